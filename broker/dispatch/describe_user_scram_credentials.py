"""DescribeUserScramCredentials (key 50) v0 (flexible): the SCRAM credentials of users, mechanism and
iterations only (never salts or keys), as Kafka's ScramImage.describe answers: every user with a
credential when the request names none (null or empty), else one result per distinct name, with
RESOURCE_NOT_FOUND for a user without credentials and DUPLICATE_RESOURCE for a name given twice."""

from __future__ import annotations

from broker.protocol.errors import ErrorCode
from broker.protocol.generated.describe_user_scram_credentials import (
    CredentialInfo,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
    DescribeUserScramCredentialsResult,
)

from .registry import RequestContext

API_KEY = 50


def handle(
    ctx: RequestContext, req: DescribeUserScramCredentialsRequest
) -> DescribeUserScramCredentialsResponse:
    names = [u.name for u in req.users] if req.users else None
    results = [
        DescribeUserScramCredentialsResult(
            user=name,
            error_code=code,
            error_message=message,
            credential_infos=[CredentialInfo(mechanism=m, iterations=i) for m, i in infos],
        )
        for name, code, message, infos in ctx.services.scram.describe(names)
    ]
    return DescribeUserScramCredentialsResponse(
        throttle_time_ms=0, error_code=0, error_message=None, results=results
    )


def error_response(
    req: DescribeUserScramCredentialsRequest, version: int, code: ErrorCode
) -> DescribeUserScramCredentialsResponse:
    return DescribeUserScramCredentialsResponse(
        throttle_time_ms=0, error_code=int(code), error_message=None, results=[]
    )
