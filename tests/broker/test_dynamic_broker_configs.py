"""Dynamic broker configs, as Kafka's ``DynamicBrokerConfig`` runs them: cluster-wide (resource
name "") and per-broker values set with (Incremental)AlterConfigs, their precedence over the static
configs, topic defaults that the live logs take at once, DescribeConfigs' sources and synonyms,
Kafka's refusals, and the values kept across a restart."""

from __future__ import annotations

import json
import time

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource
from kio.schema.errors import ErrorCode

from kafkalog.broker.config import KafkaConfig
from kafkalog.broker.dynamic_broker_config import DYNAMIC_BROKER_CONFIGS_FILE, load_dynamic_configs
from kafkalog.broker.embedded import Broker
from kafkalog.errors import InvalidConfigError
from tests.broker import _raw
from tests.storage._cleaning import all_records, append

TIMEOUT_S = 15
SET, DELETE, APPEND = 0, 1, 2
DYNAMIC_BROKER, DYNAMIC_DEFAULT, STATIC, DEFAULT, TOPIC = 2, 3, 4, 5, 1


def _alter(sock, name, ops, validate_only=False):
    cls, mod = _raw.request_class(44, 1)
    configs = tuple(mod.AlterableConfig(name=n, config_operation=op, value=v) for n, op, v in ops)
    resource = mod.AlterConfigsResource(resource_type=4, resource_name=name, configs=configs)
    (result,) = _raw.request(sock, cls(resources=(resource,), validate_only=validate_only)).responses
    return result.error_code, result.error_message


def _describe(sock, resource_type, name, keys=None):
    cls, mod = _raw.request_class(32, 4)
    resource = mod.DescribeConfigsResource(
        resource_type=resource_type, resource_name=name, configuration_keys=keys
    )
    (result,) = _raw.request(
        sock, cls(resources=(resource,), include_synonyms=True, include_documentation=False)
    ).results
    assert result.error_code == ErrorCode.none, result.error_message
    return {c.name: c for c in result.configs}


def _synonyms(entry):
    return [(s.name, s.value, s.source) for s in entry.synonyms]


@pytest.fixture()
def data_dir(tmp_path):
    return tmp_path / "data"


def test_cluster_default_and_per_broker_values_apply_at_once(data_dir):
    with Broker(
        data_dir, configs={"log.retention.hours": "5", "auto.create.topics.enable": "false"}
    ) as broker:
        lm = broker.server.log_manager
        lm.create_topic("plain", 1)
        lm.create_topic("own", 1, {"retention.ms": "42"})
        node = str(broker.server.apis.node_id)
        with _raw.connect(broker.bootstrap_servers) as sock:
            assert lm.get_log("plain", 0).config.retention_ms == 5 * 3600 * 1000
            # Cluster-wide: every topic without its own value takes it at once.
            assert _alter(sock, "", [("log.retention.ms", SET, "7200000")]) == (ErrorCode.none, None)
            assert lm.get_log("plain", 0).config.retention_ms == 7_200_000
            assert lm.get_log("own", 0).config.retention_ms == 42
            entry = _describe(sock, 2, "plain", ("retention.ms",))["retention.ms"]
            assert (entry.value, entry.config_source) == ("7200000", DYNAMIC_DEFAULT)
            # log.retention.ms has no default of its own in Kafka: the DEFAULT synonym is the hours'
            assert _synonyms(entry) == [
                ("log.retention.ms", "7200000", DYNAMIC_DEFAULT),
                ("log.retention.hours", "5", STATIC),
                ("log.retention.hours", "168", DEFAULT),
            ]
            # This node's value wins over the cluster-wide one.
            assert _alter(sock, node, [("log.retention.ms", SET, "3600000")]) == (ErrorCode.none, None)
            assert lm.get_log("plain", 0).config.retention_ms == 3_600_000
            entry = _describe(sock, 2, "plain", ("retention.ms",))["retention.ms"]
            assert entry.config_source == DYNAMIC_BROKER
            assert [s[2] for s in _synonyms(entry)] == [DYNAMIC_BROKER, DYNAMIC_DEFAULT, STATIC, DEFAULT]
            own = _describe(sock, 2, "own", ("retention.ms",))["retention.ms"]
            assert (own.value, own.config_source) == ("42", TOPIC)
            # The broker resource: this node's view, and the cluster-wide dynamic configs alone.
            mine = _describe(sock, 4, node)
            assert (mine["log.retention.ms"].value, mine["log.retention.ms"].config_source) == (
                "3600000",
                DYNAMIC_BROKER,
            )
            assert not mine["log.retention.ms"].read_only and mine["num.partitions"].read_only
            assert _synonyms(mine["log.retention.ms"]) == [
                ("log.retention.ms", "3600000", DYNAMIC_BROKER),
                ("log.retention.ms", "7200000", DYNAMIC_DEFAULT),
                ("log.retention.hours", "5", STATIC),
                ("log.retention.hours", "168", DEFAULT),
            ]
            cluster = _describe(sock, 4, "")
            assert list(cluster) == ["log.retention.ms"]
            assert _synonyms(cluster["log.retention.ms"]) == [
                ("log.retention.ms", "7200000", DYNAMIC_DEFAULT)
            ]
            # DELETE: back to the level below.
            assert _alter(sock, node, [("log.retention.ms", DELETE, None)]) == (ErrorCode.none, None)
            assert lm.get_log("plain", 0).config.retention_ms == 7_200_000
            assert _alter(sock, "", [("log.retention.ms", DELETE, None)]) == (ErrorCode.none, None)
            assert lm.get_log("plain", 0).config.retention_ms == 5 * 3600 * 1000
            assert _describe(sock, 4, "") == {}
            # message.max.bytes is the default of every topic's max.message.bytes.
            assert _alter(sock, "", [("message.max.bytes", SET, "2000000")]) == (ErrorCode.none, None)
            assert lm.get_log("plain", 0).config.max_message_bytes == 2_000_000


def test_refusals_change_nothing(data_dir):
    with Broker(data_dir) as broker:
        node = str(broker.server.apis.node_id)
        stored = data_dir / DYNAMIC_BROKER_CONFIGS_FILE
        with _raw.connect(broker.bootstrap_servers) as sock:
            assert _alter(sock, node, [("num.partitions", SET, "3")]) == (
                ErrorCode.invalid_request,
                "Cannot update these configs dynamically: Set(num.partitions)",
            )
            assert _alter(sock, "", [("log.dirs", SET, "/x"), ("node.id", SET, "3")]) == (
                ErrorCode.invalid_request,
                "Cannot update these configs dynamically: Set(log.dirs, node.id)",
            )
            assert _alter(sock, node, [("listeners", SET, "PLAINTEXT://:1")])[0] == ErrorCode.invalid_request
            assert _alter(sock, node, [("ssl.keystore.location", SET, "/k")])[0] == ErrorCode.invalid_request
            assert _alter(sock, "", [("sasl.kerberos.min.time.before.relogin", SET, "58000")]) == (
                ErrorCode.invalid_request,
                "Cannot update these configs at default cluster level, broker id must be specified: "
                "Set(sasl.kerberos.min.time.before.relogin)",
            )
            assert _alter(sock, "7", [("log.retention.ms", SET, "1")]) == (
                ErrorCode.invalid_request,
                f"Unexpected broker id, expected {node}, but received 7",
            )
            assert _alter(sock, "x", [("log.retention.ms", SET, "1")]) == (
                ErrorCode.invalid_request,
                "Node id must be an integer, but it is: x",
            )
            error, message = _alter(sock, "", [("log.retention.ms", SET, "soon")])
            assert error == ErrorCode.invalid_request and "log.retention.ms" in message
            assert _alter(sock, "", [("log.retention.ms", APPEND, "1")]) == (
                ErrorCode.invalid_config,
                "Can't APPEND to key log.retention.ms because its type is not LIST.",
            )
            assert _alter(sock, node, [("background.threads", SET, "21")]) == (
                ErrorCode.invalid_request,
                "Dynamic thread count update validation failed for background.threads=21, "
                "value should not be greater than double the current value 10",
            )
            assert _alter(sock, node, [("background.threads", SET, "0")])[0] == ErrorCode.invalid_request
            assert _alter(sock, "", [("log.retention.ms", SET, "1")], validate_only=True) == (
                ErrorCode.none,
                None,
            )
            assert not stored.exists()
            assert broker.server.apis.config.dynamic_default == {}
            # What librdkafka's admin test sets on a broker: a thread count and a list APPEND.
            assert _alter(
                sock, node, [("background.threads", SET, "9"), ("log.cleanup.policy", APPEND, "compact")]
            ) == (ErrorCode.none, None)
            assert broker.server.apis.config.dynamic_broker == {
                "background.threads": "9",
                "log.cleanup.policy": "delete,compact",
            }
            assert broker.server.log_manager.default_config.cleanup_policy == ("delete", "compact")


def test_kept_across_a_restart_and_legacy_alter_replaces_the_set(data_dir):
    with Broker(data_dir) as broker:
        node = str(broker.server.apis.node_id)
        with _raw.connect(broker.bootstrap_servers) as sock:
            assert _alter(
                sock, "", [("log.segment.bytes", SET, "2097152"), ("log.retention.ms", SET, "1000")]
            ) == (ErrorCode.none, None)
            assert _alter(sock, node, [("log.roll.ms", SET, "60000")]) == (ErrorCode.none, None)
    stored = json.loads((data_dir / DYNAMIC_BROKER_CONFIGS_FILE).read_text())
    assert stored["cluster_default"] == {"log.retention.ms": "1000", "log.segment.bytes": "2097152"}
    assert stored["brokers"] == {node: {"log.roll.ms": "60000"}}
    with Broker(data_dir) as broker:
        lm = broker.server.log_manager
        lm.create_topic("after", 1)
        config = lm.get_log("after", 0).config
        assert (config.segment_bytes, config.retention_ms, config.segment_ms) == (2_097_152, 1000, 60000)
        with _raw.connect(broker.bootstrap_servers) as sock:
            assert (
                _describe(sock, 2, "after", ("segment.bytes",))["segment.bytes"].config_source
                == DYNAMIC_DEFAULT
            )
            # The legacy AlterConfigs replaces the entity's whole dynamic set.
            cls, mod = _raw.request_class(33, 2)
            resource = mod.AlterConfigsResource(
                resource_type=4,
                resource_name="",
                configs=(mod.AlterableConfig(name="log.retention.ms", value="5000"),),
            )
            (result,) = _raw.request(sock, cls(resources=(resource,), validate_only=False)).responses
            assert result.error_code == ErrorCode.none
        assert broker.server.apis.config.dynamic_default == {"log.retention.ms": "5000"}
        assert lm.get_log("after", 0).config.segment_bytes == 1024**3  # back to the default
        assert lm.get_log("after", 0).config.segment_ms == 60000  # this node's value stands


def test_through_confluent_kafka_and_kafka_python(data_dir):
    from kafka.admin import AlterConfigOp, KafkaAdminClient
    from kafka.admin import ConfigResource as KpConfigResource
    from kafka.admin import ConfigResourceType as KpConfigResourceType

    with Broker(data_dir) as broker:
        lm = broker.server.log_manager
        lm.create_topic("t", 1)
        node = str(broker.server.apis.node_id)
        # The clients name a broker resource by its id (both refuse the cluster-wide "" locally).
        kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
        try:
            kp.alter_configs(
                [
                    KpConfigResource(
                        KpConfigResourceType.BROKER,
                        node,
                        configs={"log.retention.ms": (AlterConfigOp.SET, "86400000")},
                    )
                ],
                incremental=True,
            )
            assert lm.get_log("t", 0).config.retention_ms == 86_400_000
            mine = kp.describe_configs([KpConfigResource(KpConfigResourceType.BROKER, node)])["broker"][node]
            assert mine["log.retention.ms"]["value"] == "86400000"
            assert mine["log.retention.ms"]["config_source"] == "DYNAMIC_BROKER_CONFIG"
        finally:
            kp.close()
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        resource = ConfigResource(
            ck.admin.ResourceType.BROKER,
            node,
            incremental_configs=[
                ConfigEntry("log.retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)
            ],
        )
        admin.incremental_alter_configs([resource])[resource].result(TIMEOUT_S)
        assert lm.get_log("t", 0).config.retention_ms == 3_600_000
        topic = ConfigResource(ck.admin.ResourceType.TOPIC, "t")
        described = admin.describe_configs([topic])[topic].result(TIMEOUT_S)
        assert described["retention.ms"].value == "3600000"
        assert described["retention.ms"].source == ck.admin.ConfigSource.DYNAMIC_BROKER_CONFIG.value


@pytest.mark.parametrize(
    "content, message",
    [
        ("{not json", "Cannot read the dynamic broker configs"),
        ("[]", "expected"),
        ('{"cluster_default": []}', "expected"),
        ('{"brokers": {"1": {"log.retention.ms": 5}}}', "expected"),
        ('{"cluster_default": {"log.retention.ms": "soon"}}', "Invalid dynamic broker config"),
    ],
)
def test_a_bad_file_is_one_clear_error(tmp_path, content, message):
    (tmp_path / DYNAMIC_BROKER_CONFIGS_FILE).write_text(content)
    with pytest.raises(InvalidConfigError, match=message) as failure:
        load_dynamic_configs(tmp_path, KafkaConfig())
    assert DYNAMIC_BROKER_CONFIGS_FILE in str(failure.value)


def test_no_file_is_the_static_config(tmp_path):
    static = KafkaConfig.from_props({"log.retention.hours": "5"})
    assert load_dynamic_configs(tmp_path, static) is static


def test_the_log_cleaner_restarts_with_its_dynamic_configs(data_dir):
    """Kafka's LogCleaner.reconfigure: the threads restart with the new settings (count, throttle
    rate), a thread count beyond half/double the current one is refused, and the logs cleaned go
    on being cleaned."""
    with Broker(data_dir, configs={"log.cleaner.backoff.ms": "20"}) as broker:
        lm = broker.server.log_manager
        cleaner = lm.cleaner
        assert cleaner is not None and len(cleaner.threads) == 1 and cleaner.throttler is None
        node = str(broker.server.apis.node_id)
        with _raw.connect(broker.bootstrap_servers) as sock:
            assert _alter(sock, node, [("log.cleaner.threads", SET, "3")]) == (
                ErrorCode.invalid_request,
                "Log cleaner threads cannot be increased to more than double the current value 1",
            )
            assert _alter(sock, "", [("log.cleaner.io.max.bytes.per.second", SET, "0")])[0] == (
                ErrorCode.invalid_request
            )
            assert len(cleaner.threads) == 1 and broker.server.apis.config.dynamic_default == {}
            two_threads = [("log.cleaner.threads", SET, "2"),
                           ("log.cleaner.io.max.bytes.per.second", SET, "1e9")]
            assert _alter(sock, node, two_threads) == (ErrorCode.none, None)
            assert lm.cleaner is cleaner and cleaner.config.num_threads == 2
            assert [t.thread.is_alive() for t in cleaner.threads] == [True, True]
            assert cleaner.throttler is not None and cleaner.throttler.desired_rate_per_sec == 1e9
            entry = _describe(sock, 4, node, ["log.cleaner.threads"])["log.cleaner.threads"]
            assert (entry.value, entry.config_source) == ("2", DYNAMIC_BROKER)
            assert _alter(sock, node, [("log.cleaner.threads", SET, "0")])[0] == ErrorCode.invalid_request
            # The restarted threads clean: a compacted topic loses its superseded records.
            lm.create_topic("state", 1, {"cleanup.policy": "compact", "segment.bytes": "1000"})
            log = lm.get_log("state", 0)
            for i in range(200):
                append(log, [(b"k%d" % (i % 4), b"v%d" % i)])
            cleaner.wake()
            deadline = time.monotonic() + TIMEOUT_S
            while len(all_records(log)) >= 200:
                assert time.monotonic() < deadline, "the reconfigured cleaner never cleaned"
                time.sleep(0.05)


def test_broker_configs_carry_kafkas_types(data_dir):
    """DescribeConfigs v3+ types a broker config as Kafka's KafkaConfig defines it (they were all
    STRING): BOOLEAN 1, STRING 2, INT 3, LONG 5, DOUBLE 6, LIST 7; a topic default under its broker
    name takes the topic config's type, its hour and minute variants are INT."""
    with Broker(data_dir, configs={"log.retention.hours": "24"}) as broker, \
            _raw.connect(broker.bootstrap_servers) as sock:
        configs = _describe(sock, 4, str(broker.server.apis.node_id))
        expected = {"auto.create.topics.enable": 1, "listeners": 2, "num.partitions": 3,
                    "log.retention.hours": 3, "log.retention.ms": 5, "log.segment.bytes": 3,
                    "log.cleaner.io.buffer.load.factor": 6, "log.cleanup.policy": 7,
                    "ssl.enabled.protocols": 7, "connections.max.idle.ms": 5}
        assert {name: configs[name].config_type for name in expected} == expected
