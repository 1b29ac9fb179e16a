"""UpdateFeatures (key 57) v0-2: v1 UpgradeType instead of AllowDowngrade, and ValidateOnly; v2 no
per-feature results (the first error is the top-level one).

This broker's feature levels are fixed (broker/features.py; no controller quorum to change them), so
a request succeeds only where it changes nothing: a feature set to the level it already has. As
Kafka's FeatureControlManager answers the rest: a feature this broker does not know, or a level
outside its supported range, is INVALID_UPDATE_VERSION; a lower level without a downgrade
(AllowDowngrade, UpgradeType 2 or 3) is INVALID_UPDATE_VERSION; an unknown UpgradeType is
INVALID_UPDATE_VERSION. A valid change of level -- which Kafka would make -- is
INVALID_UPDATE_VERSION too, saying the levels are fixed here. As Kafka 4.3 answers at every version,
the first error is the top-level one and the per-feature results are then empty; a feature named
twice is answered twice.
"""

from __future__ import annotations

from broker.protocol.errors import ErrorCode, KafkaError
from broker.protocol.generated.update_features import (
    FeatureUpdateKey,
    UpdatableFeatureResult,
    UpdateFeaturesRequest,
    UpdateFeaturesResponse,
)
from broker.security.authorizer import ALTER, CLUSTER, CLUSTER_NAME

from .registry import RequestContext

API_KEY = 57

UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3


def _check(u: FeatureUpdateKey, version: int, levels: dict[str, tuple[int, int, int]]) -> None:
    level = u.max_version_level
    if levels.get(u.feature) is None:
        raise KafkaError(
            ErrorCode.INVALID_UPDATE_VERSION,
            f"Invalid update version {level} for feature {u.feature}. The broker does not support the given feature.",
        )
    lo, hi, current = levels[u.feature]
    downgrade = u.allow_downgrade if version == 0 else u.upgrade_type in (SAFE_DOWNGRADE, UNSAFE_DOWNGRADE)
    if version >= 1 and u.upgrade_type not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
        raise KafkaError(ErrorCode.INVALID_UPDATE_VERSION, f"Unknown upgrade type {u.upgrade_type}.")
    if level == current:
        return
    if level > hi or (level >= 0 and level < lo):
        raise KafkaError(
            ErrorCode.INVALID_UPDATE_VERSION,
            f"Invalid update version {level} for feature {u.feature}. Local broker supports versions [{lo}-{hi}].",
        )
    if level < current and not downgrade:
        raise KafkaError(
            ErrorCode.INVALID_UPDATE_VERSION,
            f"Invalid update version {level} for feature {u.feature}. Can't downgrade the version of this "
            "feature without setting the upgrade type to either safe or unsafe downgrade.",
        )
    raise KafkaError(
        ErrorCode.INVALID_UPDATE_VERSION,
        f"Invalid update version {level} for feature {u.feature}: this broker's feature levels are fixed "
        f"(finalized level {current}).",
    )


def handle(ctx: RequestContext, req: UpdateFeaturesRequest) -> UpdateFeaturesResponse:
    if not ctx.allowed(ALTER, CLUSTER, CLUSTER_NAME):  # as Kafka: ALTER on the cluster
        raise KafkaError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
    v = ctx.api_version
    results = []
    for u in req.feature_updates:
        try:
            _check(u, v, ctx.services.registry.features)
        except KafkaError as e:
            results.append(UpdatableFeatureResult(u.feature, int(e.code), e.message))
        else:
            results.append(UpdatableFeatureResult(u.feature, 0, None))
    failed = next((r for r in results if r.error_code), None)
    if failed is not None:
        return UpdateFeaturesResponse(0, failed.error_code, failed.error_message, [])
    return UpdateFeaturesResponse(0, 0, None, results)


def error_response(
    req: UpdateFeaturesRequest, version: int, code: ErrorCode, message: str | None = None
) -> UpdateFeaturesResponse:
    return UpdateFeaturesResponse(0, int(code), message, [])
