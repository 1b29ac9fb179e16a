"""ApiVersions (key 18) v0-4: v1 adds throttle time; v3 is flexible and carries the client's software
name and version (KIP-511), which we keep per connection for logs, and the answer's supported and
finalized features (KIP-584; the levels are in broker/features.py).

An ApiVersions request at a version we don't serve never reaches this module: the connection answers
it in the v0 format with UNSUPPORTED_VERSION and the ApiVersions versions we serve
(``unsupported_version_response``), so the client can retry with a version we know.
"""

from __future__ import annotations

import re

from broker import features
from broker.protocol.errors import ErrorCode
from broker.protocol.generated import api_versions as codec
from broker.protocol.generated.api_versions import (
    ApiVersion,
    ApiVersionsResponse,
    FinalizedFeatureKey,
    SupportedFeatureKey,
)

from .registry import RequestContext

API_KEY = 18

# Kafka accepts client software names/versions matching this (KIP-511).
_SOFTWARE_RE = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")


def _api_keys(ctx: RequestContext) -> list[ApiVersion]:
    return [ApiVersion(key, lo, hi) for key, lo, hi in ctx.services.registry.ranges()]


def handle(ctx: RequestContext, req: codec.ApiVersionsRequest) -> bytes | ApiVersionsResponse:
    client = ctx.client
    if ctx.api_version >= 3:
        name, version = req.client_software_name, req.client_software_version
        if name != client.software_name or version != client.software_version:
            if not (_SOFTWARE_RE.match(name) and _SOFTWARE_RE.match(version)):
                # as Kafka's error response: no API ranges (only UNSUPPORTED_VERSION carries some)
                return ApiVersionsResponse(error_code=ErrorCode.INVALID_REQUEST, api_keys=[])
            client.software_name = name
            client.software_version = version
    # The answer depends only on the version and the registry: encode it once per version.
    cache = ctx.services.registry.cache
    body = cache.get(("api_versions", ctx.api_version))
    if body is None:
        levels = {}
        registry = ctx.services.registry
        if registry.reports_features:  # (the Redpanda persona's ApiVersions has none)
            levels = dict(
                supported_features=[
                    SupportedFeatureKey(n, lo, hi) for n, (lo, hi, _f) in registry.features.items()
                ],
                finalized_features_epoch=features.FINALIZED_EPOCH,
                finalized_features=[
                    FinalizedFeatureKey(n, lvl, lvl)
                    for n, lvl in features.finalized(registry.features).items()
                ],
            )
        resp = ApiVersionsResponse(error_code=0, api_keys=_api_keys(ctx), **levels)
        body = codec.RESPONSE_ENCODERS[ctx.api_version](resp)
        cache[("api_versions", ctx.api_version)] = body
    return body


def unsupported_version_response(ranges: list[tuple[int, int, int]], only_own: bool = True) -> bytes:
    """The v0-format body answering an ApiVersions request at a version we do not serve:
    UNSUPPORTED_VERSION and, as Kafka since 2.4 (KIP-511, ApiVersionsRequest.getErrorResponse), only
    ApiVersions' own range, the versions to retry with. A client given every range takes them as the
    answer and never retries, so it never learns the finalized features (franz-go, whose first
    ApiVersions is v5, then ran its first transaction without KIP-890 part 2). ``only_own=False``:
    every range (the Redpanda persona's answer, kept as it was)."""
    keys = [ApiVersion(k, lo, hi) for k, lo, hi in ranges if k == API_KEY or not only_own]
    resp = ApiVersionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=keys)
    return codec.encode_response_v0(resp)
