"""Feature flags (KIP-584) as a Kafka 4.1 node that is its own controller reports and updates them:
ApiVersions v3+ lists metadata.version 4.1-IV1 as supported and finalized, UpdateFeatures takes
what changes nothing and refuses the rest with Kafka's messages -- on the wire, every version, and
through kafka-python's admin client."""

from __future__ import annotations

import pytest
from kafka.admin import KafkaAdminClient
from kafka.errors import InvalidUpdateVersionError
from kio.schema.errors import ErrorCode

from kafkalog.broker.embedded import Broker
from kafkalog.protocol.api_keys import ApiKey
from tests.broker import _raw

MV = "metadata.version"
LEVEL = 27  # MetadataVersion.IBP_4_1_IV1
FAILED = "The update failed for all features since the following feature had an error: "


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with Broker(tmp_path_factory.mktemp("features")) as b:
        yield b


def api_versions(sock, version):
    cls, _ = _raw.request_class(ApiKey.API_VERSIONS, version)
    body = cls(client_software_name="raw", client_software_version="1") if version >= 3 else cls()
    return _raw.request(sock, body)


def test_api_versions_lists_the_features_from_v3(broker):
    with _raw.connect(broker.bootstrap_servers) as sock:
        for version in range(3):
            response = api_versions(sock, version)
            assert response.error_code == ErrorCode.none and not hasattr(response, "supported_features")
        for version in (3, 4):
            response = api_versions(sock, version)
            assert response.error_code == ErrorCode.none
            assert [(f.name, f.min_version, f.max_version) for f in response.supported_features] == [
                (MV, LEVEL, LEVEL)]
            finalized = response.finalized_features
            assert [(f.name, f.min_version_level, f.max_version_level) for f in finalized] == [
                (MV, LEVEL, LEVEL)]
            assert response.finalized_features_epoch == 0 and response.zk_migration_ready is False
            # The table is unchanged by the features: UpdateFeatures is in it.
            assert (ApiKey.UPDATE_FEATURES, 0, 2) in {(k.api_key, k.min_version, k.max_version)
                                                      for k in response.api_keys}


def update(sock, version, *updates, validate_only=False):
    """UpdateFeatures of (feature, level[, upgrade type]) at ``version``."""
    cls, mod = _raw.request_class(ApiKey.UPDATE_FEATURES, version)
    keys = []
    for feature, level, *rest in updates:
        fields = {"feature": feature, "max_version_level": level}
        if version == 0:
            fields["allow_downgrade"] = bool(rest)
        elif rest:
            fields["upgrade_type"] = rest[0]
        keys.append(mod.FeatureUpdateKey(**fields))
    extra = {"validate_only": validate_only} if version >= 1 else {}
    return _raw.request(sock, cls(feature_updates=tuple(keys), **extra))


def results(response):
    return [(r.feature, r.error_code, r.error_message) for r in getattr(response, "results", ())]


def test_updates_that_change_nothing_succeed_at_every_version(broker):
    with _raw.connect(broker.bootstrap_servers) as sock:
        for version in (0, 1):
            response = update(sock, version, (MV, LEVEL), ("group.version", 0), ("kraft.version", 0))
            assert (response.error_code, response.error_message) == (ErrorCode.none, None)
            # Kafka's controller gives each feature Errors.NONE and its message()
            assert results(response) == [(MV, 0, "NONE"), ("group.version", 0, "NONE"),
                                         ("kraft.version", 0, "NONE")]
        response = update(sock, 2, (MV, LEVEL), ("transaction.version", 0))
        assert (response.error_code, response.error_message) == (ErrorCode.none, None)
        assert results(response) == []  # v2 lists no per-feature results
        response = update(sock, 1, (MV, LEVEL), validate_only=True)
        assert response.error_code == ErrorCode.none and results(response) == [(MV, 0, "NONE")]
        # A downgrade to the finalized level itself is no downgrade.
        assert update(sock, 1, (MV, LEVEL, 2)).error_code == ErrorCode.none


@pytest.mark.parametrize(
    "updates, why",
    [
        ([(MV, 26)], "Invalid update version 26 for feature metadata.version. "
                     "Local controller 1 only supports versions 27"),
        ([(MV, 28)], "Invalid update version 28 for feature metadata.version. "
                     "Local controller 1 only supports versions 27"),
        ([(MV, 21, 2)], "Invalid update version 21 for feature metadata.version. "
                        "Local controller 1 only supports versions 27"),
        ([("group.version", 1)], "Invalid update version 1 for feature group.version. "
                                 "Local controller 1 does not support this feature."),
        ([("share.version", 1)], "Invalid update version 1 for feature share.version. "
                                 "Local controller 1 does not support this feature."),
        ([("no.such.feature", 0)], "Invalid update version 0 for feature no.such.feature. "
                                   "Feature no.such.feature not found."),
        ([("no.such.feature", 3)], "Invalid update version 3 for feature no.such.feature. "
                                   "Local controller 1 does not support this feature."),
        ([("group.version", -1)], "Invalid update version -1 for feature group.version. "
                                  "A feature version cannot be less than 0."),
        ([(MV, LEVEL, 0)], "Invalid update version 27 for feature metadata.version. "
                           "The controller does not support the given upgrade type."),
        ([(MV, LEVEL, 9)], "Invalid update version 27 for feature metadata.version. "
                           "The controller does not support the given upgrade type."),
        # one refusal fails them all; the first one found is named
        ([(MV, LEVEL), ("group.version", 0), ("transaction.version", 2)],
         "Invalid update version 2 for feature transaction.version. "
         "Local controller 1 does not support this feature."),
    ],
)
@pytest.mark.parametrize("version", [1, 2])
def test_refused_updates_fail_the_whole_request(broker, version, updates, why):
    with _raw.connect(broker.bootstrap_servers) as sock:
        for validate_only in (False, True):
            response = update(sock, version, *updates, validate_only=validate_only)
            assert (response.error_code, response.error_message) == (ErrorCode.invalid_update_version,
                                                                     FAILED + why)
            assert results(response) == []
        # nothing changed
        (finalized,) = api_versions(sock, 4).finalized_features
        assert (finalized.name, finalized.max_version_level) == (MV, LEVEL)


def test_v0_has_no_upgrade_type_and_refuses_a_downgrade_as_an_upgrade(broker):
    with _raw.connect(broker.bootstrap_servers) as sock:
        response = update(sock, 0, (MV, 25, "allow downgrade"))
        assert response.error_code == ErrorCode.invalid_update_version
        assert response.error_message == FAILED + ("Invalid update version 25 for feature metadata.version. "
                                                   "Local controller 1 only supports versions 27")


def test_kafka_python_describes_and_updates_features(broker):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        assert admin.describe_features() == {
            MV: {"supported": (LEVEL, LEVEL), "finalized": (LEVEL, LEVEL), "finalized_epoch": 0}}
        assert admin.update_features({MV: LEVEL}) == {MV: "OK"}
        assert admin.update_features({MV: LEVEL}, validate_only=True) == {MV: "OK"}
        with pytest.raises(InvalidUpdateVersionError, match="does not support this feature"):
            admin.update_features({"group.version": 1})
        with pytest.raises(InvalidUpdateVersionError, match="only supports versions 27"):
            admin.update_features({MV: ("SAFE_DOWNGRADE", 21)})
    finally:
        admin.close()
