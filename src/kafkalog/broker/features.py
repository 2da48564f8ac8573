"""Feature flags (KIP-584): what ApiVersions reports and what UpdateFeatures may change, as Kafka's
``BrokerFeatures``, ``QuorumFeatures`` and ``FeatureControlManager`` decide them on a node that is
its own controller.

A Kafka release supports a range of levels per feature and the cluster *finalizes* one level of
each; ``metadata.version`` gates what the metadata log may hold, ``group.version`` the KIP-848
consumer protocol, ``transaction.version`` KIP-890's transactions, and so on. kafkalog behaves as one
release -- Kafka 4.1, whose protocol it speaks (kio's schemas) -- and implements none of the
protocols the other features switch on, so it supports exactly one level of ``metadata.version``
(4.1-IV1, feature level 27, finalized) and level 0 of every other feature. Kafka leaves features
whose highest supported level is 0 out of ApiVersions, so ``metadata.version`` is all it lists.

UpdateFeatures is answered with Kafka's checks and messages: setting ``metadata.version`` to any
other level is refused as "Local controller N only supports versions 27", any other feature above
level 0 as "Local controller N does not support this feature."; a request that changes nothing
(the finalized level again, a known feature to 0) succeeds. So nothing ever changes and nothing is
persisted: the finalized features are a constant of the release, their epoch 0.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum
from typing import Final

__all__ = [
    "FINALIZED_FEATURES_EPOCH",
    "METADATA_VERSION",
    "METADATA_VERSION_LEVEL",
    "FeatureUpdate",
    "UpgradeType",
    "finalized_features",
    "supported_features",
    "update_features",
]

METADATA_VERSION: Final = "metadata.version"
METADATA_VERSION_LEVEL: Final = 27  # Kafka's MetadataVersion.IBP_4_1_IV1, release "4.1-IV1"
FINALIZED_FEATURES_EPOCH: Final = 0  # the features never change (see above)

# Kafka 4.1's other features (its ``Features`` enum, the test feature included): known, at level 0.
_OTHER_FEATURES: Final = frozenset({
    "kraft.version",
    "transaction.version",
    "group.version",
    "eligible.leader.replicas.version",
    "share.version",
    "streams.version",
    "test.feature.version",
})


class UpgradeType(IntEnum):
    """``FeatureUpdate.UpgradeType``, UpdateFeatures v1+'s ``UpgradeType`` byte."""

    UNKNOWN = 0
    UPGRADE = 1
    SAFE_DOWNGRADE = 2
    UNSAFE_DOWNGRADE = 3

    @classmethod
    def from_code(cls, code: int) -> UpgradeType:
        return cls(code) if code in (1, 2, 3) else cls.UNKNOWN


@dataclass(frozen=True, slots=True)
class FeatureUpdate:
    """One entry of an UpdateFeatures request."""

    feature: str
    level: int
    upgrade_type: UpgradeType


def supported_features() -> dict[str, tuple[int, int]]:
    """Feature -> (min, max) supported level, as ApiVersions lists them (``BrokerFeatures``: only
    features whose max is above 0)."""
    return {METADATA_VERSION: (METADATA_VERSION_LEVEL, METADATA_VERSION_LEVEL)}


def finalized_features() -> dict[str, int]:
    """Feature -> finalized level, those above 0 (``ApiVersionsResponse.createFinalizedFeatureKeys``)."""
    return {METADATA_VERSION: METADATA_VERSION_LEVEL}


def _range_text(lo: int, hi: int) -> str:
    # Kafka's VersionRange.toString
    return str(lo) if lo == hi else f"{lo}-{hi}"


def _check(update: FeatureUpdate, node_id: int) -> str | None:
    """Why ``update`` is refused (``FeatureControlManager.updateFeature``'s reasons, in its order), or
    None when it is valid -- which, here, means it changes nothing."""
    if update.upgrade_type is UpgradeType.UNKNOWN:
        return "The controller does not support the given upgrade type."
    if update.level < 0:
        return "A feature version cannot be less than 0."
    lo, hi = supported_features().get(update.feature, (0, 0))
    if not lo <= update.level <= hi:  # QuorumFeatures.reasonNotLocallySupported
        if hi == 0:
            return f"Local controller {node_id} does not support this feature."
        return f"Local controller {node_id} only supports versions {_range_text(lo, hi)}"
    # A supported level is the finalized one (each feature supports one level here): the update is
    # neither an upgrade nor a downgrade, so the upgrade type has nothing to refuse.
    if update.feature != METADATA_VERSION and update.feature not in _OTHER_FEATURES:
        return f"Feature {update.feature} not found."  # Features.featureFromName
    return None


def update_features(updates: Iterable[FeatureUpdate], node_id: int) -> str | None:
    """Kafka's ``FeatureControlManager.updateFeatures``: all updates are applied or none; returns the
    first refusal's message ("Invalid update version V for feature F. reason"), or None. A valid
    update never changes anything here (see the module docstring), with or without ValidateOnly."""
    for update in updates:
        reason = _check(update, node_id)
        if reason is not None:
            return f"Invalid update version {update.level} for feature {update.feature}. {reason}"
    return None
