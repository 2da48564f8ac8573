"""Group configs, the GROUP config resource (32) of KIP-848, as Kafka 4.0 serves them: described for
any group id with their defaults (some from the broker's ``group.consumer.*`` configs), set and
deleted with IncrementalAlterConfigs, replaced with AlterConfigs, validated against Kafka's
``GroupConfig`` and the broker's bounds (a refused change alters nothing), kept across a restart in
``kafkalog-group-configs.json``, listed by ListConfigResources v1, and left alone by DeleteGroups."""

from __future__ import annotations

import json

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource
from kio.schema.errors import ErrorCode

from kafkalog.broker.config import KafkaConfig
from kafkalog.broker.embedded import Broker
from kafkalog.broker.group.group_config import GROUP_CONFIGS_FILE, GroupConfigManager
from kafkalog.errors import InvalidConfigError
from tests.broker import _raw

TIMEOUT_S = 15
GROUP = 32  # ConfigResource.Type.GROUP
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
DEFAULT_CONFIG, GROUP_CONFIG = 5, 8
INT, STRING = 3, 2
SESSION = "consumer.session.timeout.ms"
LOCK = "share.record.lock.duration.ms"
RESET = "share.auto.offset.reset"
SHARE_SESSION = "share.session.timeout.ms"
ALL_DEFAULTS = {
    "consumer.heartbeat.interval.ms": ("5000", INT),
    "consumer.session.timeout.ms": ("45000", INT),
    "share.auto.offset.reset": ("latest", STRING),
    "share.heartbeat.interval.ms": ("5000", INT),
    LOCK: ("30000", INT),
    "share.session.timeout.ms": ("45000", INT),
}


def _alter(sock, group, ops, validate_only=False):
    cls, mod = _raw.request_class(44, 1)
    configs = tuple(mod.AlterableConfig(name=n, config_operation=op, value=v) for n, op, v in ops)
    resource = mod.AlterConfigsResource(resource_type=GROUP, resource_name=group, configs=configs)
    (result,) = _raw.request(sock, cls(resources=(resource,), validate_only=validate_only)).responses
    assert (result.resource_type, result.resource_name) == (GROUP, group)
    return result.error_code, result.error_message


def _legacy_alter(sock, group, values, validate_only=False):
    cls, mod = _raw.request_class(33, 2)
    configs = tuple(mod.AlterableConfig(name=n, value=v) for n, v in values.items())
    resource = mod.AlterConfigsResource(resource_type=GROUP, resource_name=group, configs=configs)
    (result,) = _raw.request(sock, cls(resources=(resource,), validate_only=validate_only)).responses
    return result.error_code, result.error_message


def _describe_result(sock, group, keys=None, version=4):
    cls, mod = _raw.request_class(32, version)
    resource = mod.DescribeConfigsResource(resource_type=GROUP, resource_name=group, configuration_keys=keys)
    fields = {"include_synonyms": True}
    if version >= 3:
        fields["include_documentation"] = False
    (result,) = _raw.request(sock, cls(resources=(resource,), **fields)).results
    return result


def _describe(sock, group, keys=None):
    result = _describe_result(sock, group, keys)
    assert result.error_code == ErrorCode.none, result.error_message
    return {c.name: c for c in result.configs}


def _values(sock, group):
    """name -> (value, source) of every config of ``group``."""
    return {name: (c.value, c.config_source) for name, c in _describe(sock, group).items()}


def _listed(sock, types):
    cls, _ = _raw.request_class(74, 1)
    response = _raw.request(sock, cls(resource_types=types))
    assert response.error_code == ErrorCode.none
    return [(r.resource_name, r.resource_type) for r in response.config_resources]


def _stored(data_dir):
    return json.loads((data_dir / GROUP_CONFIGS_FILE).read_text())


@pytest.fixture()
def data_dir(tmp_path):
    return tmp_path / "data"


def test_any_group_is_described_with_its_defaults(data_dir):
    # The consumer ones default to the broker's group.consumer.* configs, the share session ones do not.
    configs = {
        "group.consumer.session.timeout.ms": "50000",
        "group.consumer.heartbeat.interval.ms": "6000",
        "group.share.session.timeout.ms": "50000",
    }
    with Broker(data_dir, configs=configs) as broker, _raw.connect(broker.bootstrap_servers) as sock:
        described = _describe(sock, "no-such-group")  # never created: still describable
        expected = dict(ALL_DEFAULTS)
        expected[SESSION] = ("50000", INT)
        expected["consumer.heartbeat.interval.ms"] = ("6000", INT)
        assert list(described) == sorted(expected)
        for name, entry in described.items():
            assert (entry.value, entry.config_type) == expected[name]
            assert entry.config_source == DEFAULT_CONFIG
            assert not entry.read_only and not entry.is_sensitive and entry.documentation is None
            assert [(s.name, s.value, s.source) for s in entry.synonyms] == [
                (name, expected[name][0], DEFAULT_CONFIG)
            ]
        # A filter by name: unknown names are left out; none (null or empty) is every config.
        assert list(_describe(sock, "g", (SESSION, "session.timeout.ms"))) == [SESSION]
        assert list(_describe(sock, "g", ())) == sorted(expected)
        # v1 has no types; the group name must not be empty.
        (entry,) = _describe_result(sock, "g", (SESSION,), version=1).configs
        assert (entry.name, entry.value, entry.config_source) == (SESSION, "50000", DEFAULT_CONFIG)
        empty = _describe_result(sock, "")
        assert (empty.error_code, empty.error_message, empty.configs) == (
            ErrorCode.invalid_request,
            "Group name must not be empty",
            (),
        )
    assert not (data_dir / GROUP_CONFIGS_FILE).exists()


def test_set_and_delete_through_confluent_kafka(data_dir):
    with Broker(data_dir) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        resource = ConfigResource(
            ck.admin.ResourceType.GROUP,
            "cg",
            incremental_configs=[
                ConfigEntry(SESSION, "50000", incremental_operation=AlterConfigOpType.SET),
                ConfigEntry(RESET, "earliest", incremental_operation=AlterConfigOpType.SET),
            ],
        )
        admin.incremental_alter_configs([resource])[resource].result(TIMEOUT_S)
        group = ConfigResource(ck.admin.ResourceType.GROUP, "cg")
        described = admin.describe_configs([group])[group].result(TIMEOUT_S)
        assert (described[SESSION].value, described[SESSION].source) == (
            "50000",
            ConfigSource.GROUP_CONFIG.value,
        )
        assert described[RESET].value == "earliest"
        assert described["consumer.heartbeat.interval.ms"].source == ConfigSource.DEFAULT_CONFIG.value
        assert _stored(data_dir) == {
            "version": 1,
            "groups": {"cg": {SESSION: "50000", RESET: "earliest"}},
        }
        # DELETE: back to the default; a group left without configs is not kept.
        reset = ConfigResource(
            ck.admin.ResourceType.GROUP,
            "cg",
            incremental_configs=[
                ConfigEntry(SESSION, None, incremental_operation=AlterConfigOpType.DELETE),
                ConfigEntry(RESET, None, incremental_operation=AlterConfigOpType.DELETE),
            ],
        )
        admin.incremental_alter_configs([reset])[reset].result(TIMEOUT_S)
        described = admin.describe_configs([group])[group].result(TIMEOUT_S)
        assert (described[SESSION].value, described[SESSION].source) == (
            "45000",
            ConfigSource.DEFAULT_CONFIG.value,
        )
        assert _stored(data_dir) == {"version": 1, "groups": {}}
        # A value out of the broker's bounds is refused with Kafka's error and message.
        bad = ConfigResource(
            ck.admin.ResourceType.GROUP,
            "cg",
            incremental_configs=[ConfigEntry(SESSION, "1000", incremental_operation=AlterConfigOpType.SET)],
        )
        with pytest.raises(ck.KafkaException) as refused:
            admin.incremental_alter_configs([bad])[bad].result(TIMEOUT_S)
        error = refused.value.args[0]
        assert error.code() == ck.KafkaError.INVALID_CONFIG
        assert "must be greater than or equal to group.consumer.min.session.timeout.ms" in error.str()


def test_refusals_change_nothing(data_dir):
    with Broker(data_dir) as broker, _raw.connect(broker.bootstrap_servers) as sock:
        assert _alter(sock, "g", [(SESSION, SET, "50000")]) == (ErrorCode.none, None)
        before = _values(sock, "g")
        stored = _stored(data_dir)
        refused = [
            (
                [(SESSION, SET, "60001")],
                f"{SESSION} must be less than or equal to group.consumer.max.session.timeout.ms",
            ),
            (
                [(SESSION, SET, "44999")],
                f"{SESSION} must be greater than or equal to group.consumer.min.session.timeout.ms",
            ),
            ([(SESSION, SET, "0")], f"Invalid value 0 for configuration {SESSION}: Value must be at least 1"),
            (
                [(SESSION, SET, "soon")],
                f"Invalid value soon for configuration {SESSION}: Not a number of type INT",
            ),
            (
                [(SESSION, SET, "3000000000")],
                f"Invalid value 3000000000 for configuration {SESSION}: Not a number of type INT",
            ),
            ([("session.timeout.ms", SET, "50000")], "Unknown group config name: session.timeout.ms"),
            (
                [(LOCK, SET, "999")],
                f"Invalid value 999 for configuration {LOCK}: Value must be at least 1000",
            ),
            (
                [(LOCK, SET, "70000")],
                f"{LOCK} must be less than or equal to group.share.max.record.lock.duration.ms",
            ),
            (
                [(RESET, SET, "LATEST")],
                f"Invalid value LATEST for configuration {RESET}: Invalid value `LATEST` for configuration "
                f"{RESET}. The value must be either 'earliest', 'latest' or of the format "
                "'by_duration:<PnDTnHnMn.nS.>'.",
            ),
            ([(RESET, SET, "by_duration:-PT1H")], None),  # negative
            ([(RESET, SET, "by_duration:PT")], None),
            ([(SESSION, APPEND, "1")], f"Can't APPEND to key {SESSION} because its type is not LIST."),
            ([(SESSION, SUBTRACT, "1")], f"Can't SUBTRACT to key {SESSION} because its type is not LIST."),
            # All or nothing: a valid change next to a refused one is not made either.
            (
                [("consumer.heartbeat.interval.ms", SET, "6000"), (SHARE_SESSION, SET, "1")],
                f"{SHARE_SESSION} must be greater than or equal to group.share.min.session.timeout.ms",
            ),
        ]
        for ops, message in refused:
            for validate_only in (False, True):
                error, said = _alter(sock, "g", ops, validate_only)
                assert error == ErrorCode.invalid_config, ops
                if message is None:
                    assert said.startswith(f"Invalid value {ops[0][2]} for configuration {RESET}: "), said
                else:
                    assert said == message, ops
        # The request-level checks, as for every resource type.
        assert _alter(sock, "g", [(SESSION, SET, "50000"), (SESSION, DELETE, None)]) == (
            ErrorCode.invalid_request,
            "Error due to duplicate config keys",
        )
        assert _alter(sock, "g", [(SESSION, SET, None)]) == (
            ErrorCode.invalid_request,
            f"Null value not supported for : {SESSION}",
        )
        assert _alter(sock, "", [(SESSION, SET, "50000")]) == (
            ErrorCode.invalid_request,
            "Default group resources are not allowed.",
        )
        assert _values(sock, "g") == before and _stored(data_dir) == stored
        # validate_only: checked, accepted, not made.
        assert _alter(sock, "g", [(SESSION, DELETE, None)], validate_only=True) == (ErrorCode.none, None)
        assert _alter(sock, "other", [(SESSION, SET, "46000")], validate_only=True) == (ErrorCode.none, None)
        assert _values(sock, "g") == before and _stored(data_dir) == stored
        assert _values(sock, "other")[SESSION] == ("45000", DEFAULT_CONFIG)
        # Kafka's ConfigDef takes an int with a sign or leading zeros, and blanks around a value;
        # they are described plainly.
        assert _alter(sock, "g", [(RESET, SET, " by_duration:P1DT2H ")]) == (
            ErrorCode.none,
            None,
        )
        assert _alter(sock, "g", [("consumer.heartbeat.interval.ms", SET, "+0012000")]) == (
            ErrorCode.none,
            None,
        )
        assert _values(sock, "g")["consumer.heartbeat.interval.ms"] == ("12000", GROUP_CONFIG)
        assert _values(sock, "g")[RESET] == ("by_duration:P1DT2H", GROUP_CONFIG)


def test_legacy_alter_configs_replaces_the_whole_set(data_dir):
    with Broker(data_dir) as broker, _raw.connect(broker.bootstrap_servers) as sock:
        assert _alter(sock, "g", [(SESSION, SET, "50000"), (LOCK, SET, "20000")]) == (ErrorCode.none, None)
        assert _legacy_alter(sock, "g", {"consumer.heartbeat.interval.ms": "7000"}) == (ErrorCode.none, None)
        values = _values(sock, "g")
        assert values[SESSION] == ("45000", DEFAULT_CONFIG)  # left out: back to the default
        assert values[LOCK] == ("30000", DEFAULT_CONFIG)
        assert values["consumer.heartbeat.interval.ms"] == ("7000", GROUP_CONFIG)
        assert _legacy_alter(sock, "g", {"nope": "1"}) == (
            ErrorCode.invalid_config,
            "Unknown group config name: nope",
        )
        assert _legacy_alter(sock, "g", {}, validate_only=True) == (ErrorCode.none, None)
        assert _values(sock, "g") == values
        assert _legacy_alter(sock, "g", {}) == (ErrorCode.none, None)
        assert _stored(data_dir) == {"version": 1, "groups": {}}


def test_through_kafka_python(data_dir):
    from kafka.admin import AlterConfigOp, KafkaAdminClient
    from kafka.admin import ConfigResource as KpConfigResource
    from kafka.admin import ConfigResourceType as KpConfigResourceType

    with Broker(data_dir) as broker:
        kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=TIMEOUT_S * 1000)
        try:
            result = kp.alter_configs(
                [
                    KpConfigResource(
                        KpConfigResourceType.GROUP, "kg", configs={SESSION: (AlterConfigOp.SET, "55000")}
                    )
                ],
                incremental=True,
            )
            assert result == {"group": {"kg": "OK"}}
            described = kp.describe_configs(
                [KpConfigResource(KpConfigResourceType.GROUP, "kg")], config_filter="all"
            )["group"]["kg"]
            assert set(described) == set(ALL_DEFAULTS)
            assert (described[SESSION]["value"], described[SESSION]["config_source"]) == (
                "55000",
                "DYNAMIC_GROUP_CONFIG",
            )
            # The default filter: only what is set on the group.
            modified = kp.describe_configs([KpConfigResource(KpConfigResourceType.GROUP, "kg")])["group"][
                "kg"
            ]
            assert list(modified) == [SESSION]
            assert kp.list_config_resources(["GROUP"]) == {"group": ["kg"]}
            refused = kp.alter_configs(
                [KpConfigResource(KpConfigResourceType.GROUP, "kg", configs={SESSION: "1"})],
                incremental=True,
            )
            assert "InvalidConfigurationError" in refused["group"]["kg"]
        finally:
            kp.close()


def test_kept_across_a_restart_listed_and_not_deleted_with_the_group(data_dir):
    with Broker(data_dir) as broker:
        broker.server.log_manager.create_topic("t", 1)
        node = str(broker.server.apis.node_id)
        with _raw.connect(broker.bootstrap_servers) as sock:
            assert _alter(sock, "b", [(SESSION, SET, "50000")]) == (ErrorCode.none, None)
            assert _alter(sock, "a", [(RESET, SET, "earliest")]) == (ErrorCode.none, None)
            assert _alter(sock, "gone", [(SESSION, SET, "46000")]) == (ErrorCode.none, None)
            assert _alter(sock, "gone", [(SESSION, DELETE, None)]) == (ErrorCode.none, None)
            assert _listed(sock, (GROUP,)) == [("a", GROUP), ("b", GROUP)]
            # Every type: the groups come first, as in Kafka's handler.
            assert _listed(sock, ())[:4] == [("a", GROUP), ("b", GROUP), (node, 8), (node, 4)]
    assert _stored(data_dir)["groups"] == {
        "a": {RESET: "earliest"},
        "b": {SESSION: "50000"},
    }
    with Broker(data_dir) as broker:
        bootstrap = broker.bootstrap_servers
        with _raw.connect(bootstrap) as sock:
            assert _values(sock, "b")[SESSION] == ("50000", GROUP_CONFIG)
            assert _values(sock, "a")[RESET] == ("earliest", GROUP_CONFIG)
        # A classic group "b" holding only offsets: DeleteGroups removes it, not its configs (Kafka's
        # group coordinator deletes the group's records; its configs live in the controller's metadata).
        consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "b", "enable.auto.commit": False})
        try:
            consumer.commit(offsets=[ck.TopicPartition("t", 0, 0)], asynchronous=False)
        finally:
            consumer.close()
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.delete_consumer_groups(["b"], request_timeout=TIMEOUT_S)["b"].result(TIMEOUT_S)
        with _raw.connect(bootstrap) as sock:
            assert _values(sock, "b")[SESSION] == ("50000", GROUP_CONFIG)
            assert _listed(sock, (GROUP,)) == [("a", GROUP), ("b", GROUP)]


def test_the_broker_bounds_apply(data_dir):
    configs = {
        "group.consumer.max.session.timeout.ms": "90000",
        "group.consumer.min.session.timeout.ms": "10000",
        "group.consumer.min.heartbeat.interval.ms": "1000",
    }
    with Broker(data_dir, configs=configs) as broker, _raw.connect(broker.bootstrap_servers) as sock:
        assert _alter(
            sock, "g", [(SESSION, SET, "80000"), ("consumer.heartbeat.interval.ms", SET, "1000")]
        ) == (
            ErrorCode.none,
            None,
        )
        assert _alter(sock, "g", [(SESSION, SET, "90001")])[0] == ErrorCode.invalid_config
        # Bounds that overlap: a session timeout must still exceed the heartbeat interval.
        assert _alter(
            sock, "g", [("consumer.heartbeat.interval.ms", SET, "15000"), (SESSION, SET, "15000")]
        ) == (
            ErrorCode.invalid_config,
            f"{SESSION} must be greater than consumer.heartbeat.interval.ms",
        )
    # A broker whose own group coordinator configs contradict each other does not start, as in Kafka.
    with pytest.raises(
        InvalidConfigError, match=r"group\.consumer\.session\.timeout\.ms must be less than or equal"
    ):
        KafkaConfig.from_props({"group.consumer.session.timeout.ms": "70000"})
    with pytest.raises(InvalidConfigError, match=r"heartbeat\.interval\.ms must be less than"):
        KafkaConfig.from_props(
            {"group.share.min.session.timeout.ms": "5000", "group.share.session.timeout.ms": "5000"}
        )


@pytest.mark.parametrize(
    "content, message",
    [
        ("{not json", "Cannot read the group configs"),
        ("[]", "not a version 1 file"),
        ('{"version": 2, "groups": {}}', "not a version 1 file"),
        ('{"version": 1}', 'no "groups" object'),
        ('{"version": 1, "groups": {"g": {"consumer.session.timeout.ms": 50000}}}', "is not a string"),
        ('{"version": 1, "groups": {"g": {"nope": "1"}}}', "unknown group config name nope"),
        ('{"version": 1, "groups": {"g": {"consumer.session.timeout.ms": "soon"}}}', "Not a number"),
        ('{"version": 1, "groups": {"": {}}}', "group ''"),
    ],
)
def test_a_bad_file_is_one_clear_startup_error(data_dir, content, message):
    data_dir.mkdir(parents=True)
    (data_dir / GROUP_CONFIGS_FILE).write_text(content)
    with pytest.raises(InvalidConfigError, match=message) as failure:
        GroupConfigManager.load(data_dir)
    assert GROUP_CONFIGS_FILE in str(failure.value)
    with pytest.raises(InvalidConfigError, match=message):
        Broker(data_dir).start()
