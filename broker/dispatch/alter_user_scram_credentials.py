"""AlterUserScramCredentials (key 51) v0 (flexible): delete and upsert SCRAM credentials (KIP-554),
validated as Kafka's ScramControlManager does (``broker.security.scram_store``). An upsertion
carries the client's salt and salted password; the broker keeps only the stored and server keys
derived from it. Valid changes are written durably (``scram-credentials.json``, fsynced) before the
answer and apply to the next SCRAM authentication; a storage failure answers KAFKA_STORAGE_ERROR
for every user and changes nothing."""

from __future__ import annotations

import logging

from broker.protocol.errors import ErrorCode
from broker.protocol.generated.alter_user_scram_credentials import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    AlterUserScramCredentialsResult,
)
from broker.security.scram_store import Deletion, Upsertion

from .registry import RequestContext

API_KEY = 51

log = logging.getLogger(__name__)


def handle(ctx: RequestContext, req: AlterUserScramCredentialsRequest) -> AlterUserScramCredentialsResponse:
    deletions = [Deletion(d.name, d.mechanism) for d in req.deletions]
    upsertions = [
        Upsertion(u.name, u.mechanism, u.iterations, bytes(u.salt), bytes(u.salted_password))
        for u in req.upsertions
    ]
    try:
        results = ctx.services.scram.alter(deletions, upsertions)
    except OSError as e:
        log.error("writing SCRAM credentials failed: %s", e)
        return error_response(req, ctx.api_version, ErrorCode.KAFKA_STORAGE_ERROR)
    for name, code, _msg in results:
        if code == 0:
            log.info("SCRAM credentials of user %s changed by %s", name, ctx.client.principal)
    return AlterUserScramCredentialsResponse(
        throttle_time_ms=0,
        results=[
            AlterUserScramCredentialsResult(user=n, error_code=c, error_message=m) for n, c, m in results
        ],
    )


def error_response(
    req: AlterUserScramCredentialsRequest, version: int, code: ErrorCode
) -> AlterUserScramCredentialsResponse:
    users = dict.fromkeys([d.name for d in req.deletions] + [u.name for u in req.upsertions])
    return AlterUserScramCredentialsResponse(
        throttle_time_ms=0,
        results=[
            AlterUserScramCredentialsResult(user=n, error_code=int(code), error_message=None) for n in users
        ],
    )
