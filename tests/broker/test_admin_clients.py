"""The admin APIs through the real admin clients: kafka-python's KafkaAdminClient, confluent-kafka's
AdminClient and aiokafka's AIOKafkaAdminClient create, describe, alter and delete topics, add
partitions, delete records and describe the cluster; configs survive a broker restart."""

from __future__ import annotations

import asyncio

import confluent_kafka as ck
import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin import NewTopic as AioNewTopic
from aiokafka.admin.config_resource import ConfigResource as AioConfigResource
from aiokafka.admin.config_resource import ConfigResourceType as AioConfigResourceType
from aiokafka.admin.records_to_delete import RecordsToDelete
from aiokafka.structs import TopicPartition as AioTopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)
from kafka import KafkaProducer
from kafka import TopicPartition as KpTopicPartition
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType as KpConfigResourceType
from kafka.admin import KafkaAdminClient
from kafka.admin import NewPartitions as KpNewPartitions
from kafka.admin import NewTopic as KpNewTopic
from kafka.errors import (
    InvalidConfigurationError,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    InvalidTopicError,
    OffsetOutOfRangeError,
    PolicyViolationError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)

from kafkalog.broker.embedded import Broker

TIMEOUT_S = 15


def _produce(bootstrap: str, topic: str, count: int, partition: int = 0) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for i in range(count):
        producer.send(topic, value=b"v%d" % i, partition=partition)
    producer.flush(TIMEOUT_S)
    producer.close()


def _partitions(broker: Broker, topic: str) -> list[int]:
    return broker.server.log_manager.partitions(topic)


@pytest.mark.kafkalog_broker_config({"log.retention.hours": 5, "num.partitions": 2})
def test_kafka_python_admin(kafkalog_broker):
    bootstrap = kafkalog_broker.bootstrap_servers
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT_S * 1000)
    try:
        created = admin.create_topics(
            [
                KpNewTopic(
                    "kp-a", 3, 1, topic_configs={"cleanup.policy": "compact", "segment.bytes": "1048576"}
                ),
                KpNewTopic("kp-b", -1, -1),
            ]
        )
        by_name = {t["name"]: t for t in created["topics"]}
        assert by_name["kp-a"]["num_partitions"] == 3 and by_name["kp-a"]["replication_factor"] == 1
        assert by_name["kp-a"]["configs"]["cleanup.policy"]["value"] == "compact"
        assert by_name["kp-a"]["topic_id"] == str(kafkalog_broker.server.apis.metadata_cache.topic_id("kp-a"))
        assert by_name["kp-b"]["num_partitions"] == 2  # -1: num.partitions
        assert set(admin.list_topics()) >= {"kp-a", "kp-b"}
        assert _partitions(kafkalog_broker, "kp-a") == [0, 1, 2]

        admin.create_topics([KpNewTopic("kp-only-validated", 1, 1)], validate_only=True)
        assert "kp-only-validated" not in admin.list_topics()
        with pytest.raises(TopicAlreadyExistsError):
            admin.create_topics([KpNewTopic("kp-a", 1, 1)])
        with pytest.raises(InvalidReplicationFactorError):
            admin.create_topics([KpNewTopic("kp-rf3", 1, 3)])
        with pytest.raises(InvalidConfigurationError, match=r"segment\.bytes"):
            admin.create_topics([KpNewTopic("kp-badcfg", 1, 1, topic_configs={"segment.bytes": "3"})])
        with pytest.raises(InvalidTopicError):
            admin.create_topics([KpNewTopic("bad/name", 1, 1)])

        described = admin.describe_configs(
            [KpConfigResource(KpConfigResourceType.TOPIC, "kp-a")], include_synonyms=True, config_filter="all"
        )["topic"]["kp-a"]
        assert described["cleanup.policy"]["value"] == "compact"
        assert described["cleanup.policy"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
        assert described["retention.ms"]["value"] == str(5 * 3600 * 1000)
        # Kafka's quirk, kept: log.retention.ms has no default of its own, so the synonyms are cut
        # at its name and a static log.retention.hours leaves none — the source reads DEFAULT_CONFIG
        assert described["retention.ms"]["config_source"] == "DEFAULT_CONFIG"
        assert described["retention.ms"]["synonyms"] == []
        assert described["retention.bytes"]["config_source"] == "DEFAULT_CONFIG"
        assert described["retention.bytes"]["config_type"] == "LONG"
        broker_configs = admin.describe_configs(
            [KpConfigResource(KpConfigResourceType.BROKER, "1")], config_filter="all"
        )["broker"]["1"]
        assert broker_configs["log.retention.hours"]["value"] == "5"
        # Only log.retention.ms of the three names may change at runtime in Kafka.
        assert broker_configs["log.retention.hours"]["read_only"] is True
        assert broker_configs["log.retention.ms"]["read_only"] is False
        assert broker_configs["log.retention.hours"]["config_source"] == "STATIC_BROKER_CONFIG"
        assert broker_configs["num.partitions"]["read_only"] is True
        # The log cleaner's, with Kafka's defaults as Kafka writes them; dynamic in Kafka.
        assert broker_configs["log.cleaner.io.max.bytes.per.second"]["value"] == "1.7976931348623157E308"
        assert broker_configs["log.cleaner.io.max.bytes.per.second"]["config_source"] == "DEFAULT_CONFIG"
        assert broker_configs["log.cleaner.io.max.bytes.per.second"]["read_only"] is False
        assert broker_configs["log.cleaner.dedupe.buffer.size"]["value"] == str(128 * 1024 * 1024)
        assert broker_configs["log.cleaner.enable"]["read_only"] is True

        # IncrementalAlterConfigs: SET, DELETE, APPEND (the live logs take it at once)
        admin.alter_configs(
            [
                KpConfigResource(
                    KpConfigResourceType.TOPIC,
                    "kp-a",
                    configs={
                        "retention.ms": ("SET", "60000"),
                        "segment.bytes": ("DELETE", None),
                        "cleanup.policy": ("APPEND", "delete"),
                    },
                )
            ]
        )
        config = kafkalog_broker.server.log_manager.get_log("kp-a", 0).config
        assert config.retention_ms == 60000 and config.segment_bytes == 1024**3
        assert config.cleanup_policy == ("compact", "delete")
        refused = admin.alter_configs(
            [KpConfigResource(KpConfigResourceType.TOPIC, "kp-a", configs={"retention.ms": ("APPEND", "1")})]
        )
        assert (
            "InvalidConfigurationError" in refused["topic"]["kp-a"]
            and "retention.ms" in refused["topic"]["kp-a"]
        )
        validated = admin.alter_configs(
            [KpConfigResource(KpConfigResourceType.TOPIC, "kp-a", configs={"retention.ms": "1"})],
            validate_only=True,
        )
        assert validated == {"topic": {"kp-a": "OK"}}
        assert kafkalog_broker.server.log_manager.get_log("kp-a", 0).config.retention_ms == 60000
        legacy = admin.alter_configs(
            [KpConfigResource(KpConfigResourceType.TOPIC, "kp-a", configs={"retention.ms": "120000"})],
            incremental=False,
        )
        assert legacy == {"topic": {"kp-a": "OK"}}
        config = kafkalog_broker.server.log_manager.get_log("kp-a", 0).config
        assert config.retention_ms == 120000 and config.cleanup_policy == ("compact", "delete")

        admin.create_partitions({"kp-a": KpNewPartitions(5)})
        assert _partitions(kafkalog_broker, "kp-a") == [0, 1, 2, 3, 4]
        with pytest.raises(InvalidPartitionsError):
            admin.create_partitions({"kp-a": KpNewPartitions(2)})

        _produce(bootstrap, "kp-b", 10)
        deleted = admin.delete_records({KpTopicPartition("kp-b", 0): 4})
        assert deleted[KpTopicPartition("kp-b", 0)]["low_watermark"] == 4
        assert kafkalog_broker.server.log_manager.get_log("kp-b", 0).log_start_offset == 4
        with pytest.raises(OffsetOutOfRangeError):
            admin.delete_records({KpTopicPartition("kp-b", 0): 11})
        assert (
            admin.delete_records({KpTopicPartition("kp-b", 0): -1})[KpTopicPartition("kp-b", 0)][
                "low_watermark"
            ]
            == 10
        )

        cluster = admin.describe_cluster()
        assert (
            cluster["controller_id"] == 1 and cluster["cluster_id"] == kafkalog_broker.server.apis.cluster_id
        )
        assert [(b["broker_id"], b["port"]) for b in cluster["brokers"]] == [(1, kafkalog_broker.port)]

        admin.delete_topics(["kp-a"])
        assert "kp-a" not in admin.list_topics()
        with pytest.raises(UnknownTopicOrPartitionError):
            admin.delete_topics(["kp-a"])
    finally:
        admin.close()


def test_records_of_a_topic_that_does_not_delete_cannot_be_deleted(kafkalog_broker):
    """Kafka's Partition.deleteRecordsOnLeader: POLICY_VIOLATION unless the cleanup policy deletes
    (``compact,delete`` does); that is checked before the offset."""
    bootstrap = kafkalog_broker.bootstrap_servers
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([KpNewTopic("kp-compacted", 1, 1, topic_configs={"cleanup.policy": "compact"}),
                             KpNewTopic("kp-both", 1, 1, topic_configs={"cleanup.policy": "compact,delete"})])
        producer = KafkaProducer(bootstrap_servers=bootstrap)
        for topic in ("kp-compacted", "kp-both"):
            for i in range(4):
                producer.send(topic, key=b"k%d" % i, value=b"v", partition=0)
        producer.flush(TIMEOUT_S)
        producer.close()
        compacted = KpTopicPartition("kp-compacted", 0)
        for offset in (2, -1, -5):
            with pytest.raises(PolicyViolationError):
                admin.delete_records({compacted: offset})
        assert kafkalog_broker.server.log_manager.get_log("kp-compacted", 0).log_start_offset == 0
        both = KpTopicPartition("kp-both", 0)
        assert admin.delete_records({both: 2})[both]["low_watermark"] == 2
        with pytest.raises(OffsetOutOfRangeError):
            admin.delete_records({both: -5})
    finally:
        admin.close()
    ck_admin = AdminClient({"bootstrap.servers": bootstrap})
    (future,) = ck_admin.delete_records([ck.TopicPartition("kp-compacted", 0, 1)]).values()
    with pytest.raises(ck.KafkaException) as refused:
        future.result(TIMEOUT_S)
    assert refused.value.args[0].code() == ck.KafkaError.POLICY_VIOLATION


def _ck_wait(futures: dict) -> dict:
    return {key: future.result(TIMEOUT_S) for key, future in futures.items()}


def test_confluent_kafka_admin(kafkalog_broker):
    bootstrap = kafkalog_broker.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    _ck_wait(
        admin.create_topics(
            [NewTopic("ck-a", 2, 1, config={"retention.ms": "3600000"})], operation_timeout=TIMEOUT_S
        )
    )
    assert _partitions(kafkalog_broker, "ck-a") == [0, 1]
    with pytest.raises(ck.KafkaException) as failure:
        _ck_wait(admin.create_topics([NewTopic("ck-a", 1, 1)]))
    assert failure.value.args[0].code() == ck.KafkaError.TOPIC_ALREADY_EXISTS
    with pytest.raises(ck.KafkaException) as failure:
        _ck_wait(admin.create_topics([NewTopic("ck-bad", 1, 1, config={"cleanup.policy": "shred"})]))
    assert failure.value.args[0].code() == ck.KafkaError.INVALID_CONFIG

    resource = ConfigResource(ck.admin.ResourceType.TOPIC, "ck-a")
    configs = _ck_wait(admin.describe_configs([resource]))[resource]
    assert configs["retention.ms"].value == "3600000" and not configs["retention.ms"].is_default
    assert configs["segment.bytes"].is_default and configs["segment.bytes"].value == str(1024**3)

    alter = ConfigResource(
        ck.admin.ResourceType.TOPIC,
        "ck-a",
        incremental_configs=[
            ConfigEntry("max.message.bytes", "2000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
        ],
    )
    _ck_wait(admin.incremental_alter_configs([alter]))
    config = kafkalog_broker.server.log_manager.get_log("ck-a", 1).config
    assert config.max_message_bytes == 2000 and config.retention_ms == 7 * 24 * 3600 * 1000

    _ck_wait(admin.create_partitions([NewPartitions("ck-a", 4)]))
    assert _partitions(kafkalog_broker, "ck-a") == [0, 1, 2, 3]

    _produce(bootstrap, "ck-a", 6, partition=3)
    deleted = _ck_wait(admin.delete_records([ck.TopicPartition("ck-a", 3, 2)]))
    assert [r.low_watermark for r in deleted.values()] == [2]

    cluster = admin.describe_cluster().result(TIMEOUT_S)
    assert cluster.cluster_id == kafkalog_broker.server.apis.cluster_id
    assert cluster.controller.id == 1 and [n.port for n in cluster.nodes] == [kafkalog_broker.port]
    assert cluster.authorized_operations is None  # not asked for
    # No authorizer: every operation Kafka's ACLs support for the resource type.
    ops = ck.admin.AclOperation
    cluster = admin.describe_cluster(include_authorized_operations=True).result(TIMEOUT_S)
    assert set(cluster.authorized_operations) == {
        ops.CREATE,
        ops.CLUSTER_ACTION,
        ops.DESCRIBE_CONFIGS,
        ops.ALTER_CONFIGS,
        ops.IDEMPOTENT_WRITE,
        ops.ALTER,
        ops.DESCRIBE,
    }
    described = admin.describe_topics(ck.TopicCollection(["ck-a"]), include_authorized_operations=True)
    assert set(described["ck-a"].result(TIMEOUT_S).authorized_operations) == {
        ops.READ,
        ops.WRITE,
        ops.CREATE,
        ops.DESCRIBE,
        ops.DELETE,
        ops.ALTER,
        ops.DESCRIBE_CONFIGS,
        ops.ALTER_CONFIGS,
    }

    _ck_wait(admin.delete_topics(["ck-a"], operation_timeout=TIMEOUT_S))
    assert not kafkalog_broker.server.log_manager.has_topic("ck-a")
    with pytest.raises(ck.KafkaException) as failure:
        _ck_wait(admin.delete_topics(["ck-a"]))
    assert failure.value.args[0].code() == ck.KafkaError.UNKNOWN_TOPIC_OR_PART


def test_aiokafka_admin(kafkalog_broker):
    bootstrap = kafkalog_broker.bootstrap_servers

    async def run():
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT_S * 1000)
        await admin.start()
        try:
            response = await admin.create_topics(
                [AioNewTopic("aio-a", 2, 1, topic_configs={"flush.ms": "1000"})]
            )
            assert [t[1] for t in response.topic_errors] == [0]
            assert "aio-a" in await admin.list_topics()
            resources = await admin.describe_configs(
                [AioConfigResource(AioConfigResourceType.TOPIC, "aio-a")]
            )
            entries = {c[0]: c[1] for c in resources[0].resources[0][4]}
            assert entries["flush.ms"] == "1000"
            await admin.alter_configs(
                [AioConfigResource(AioConfigResourceType.TOPIC, "aio-a", {"flush.ms": "2000"})]
            )
            assert kafkalog_broker.server.log_manager.get_log("aio-a", 0).config.flush_ms == 2000
            await admin.create_partitions(
                {"aio-a": __import__("aiokafka.admin", fromlist=["x"]).NewPartitions(3)}
            )
            _produce(bootstrap, "aio-a", 5, partition=2)
            low = await admin.delete_records({AioTopicPartition("aio-a", 2): RecordsToDelete(3)})
            assert low == {AioTopicPartition("aio-a", 2): 3}
            cluster = await admin.describe_cluster()
            assert cluster["controller_id"] == 1
            response = await admin.delete_topics(["aio-a"])
            assert [t[1] for t in response.topic_error_codes] == [0]
            assert "aio-a" not in await admin.list_topics()
        finally:
            await admin.close()

    asyncio.run(asyncio.wait_for(run(), 60))
    assert _partitions_gone(kafkalog_broker, "aio-a")


def _partitions_gone(broker: Broker, topic: str) -> bool:
    return not broker.server.log_manager.has_topic(topic) and not list(
        broker.server.data_dir.glob(f"{topic}-*")
    )


def test_configs_survive_restart(tmp_path):
    data_dir = tmp_path / "data"
    with Broker(data_dir) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        _ck_wait(admin.create_topics([NewTopic("kept", 2, 1, config={"retention.bytes": "123456"})]))
        alter = ConfigResource(
            ck.admin.ResourceType.TOPIC,
            "kept",
            incremental_configs=[
                ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET)
            ],
        )
        _ck_wait(admin.incremental_alter_configs([alter]))
        _ck_wait(admin.create_partitions([NewPartitions("kept", 3)]))
    with Broker(data_dir) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        resource = ConfigResource(ck.admin.ResourceType.TOPIC, "kept")
        configs = _ck_wait(admin.describe_configs([resource]))[resource]
        assert configs["retention.bytes"].value == "123456"
        assert configs["cleanup.policy"].value == "compact"
        assert broker.server.log_manager.get_log("kept", 2).config.compact
        metadata = admin.list_topics(timeout=TIMEOUT_S)
        assert len(metadata.topics["kept"].partitions) == 3


def test_acl_requests_get_kafkas_answer_without_an_authorizer(kafkalog_broker):
    """No authorizer, as a Kafka broker without one: the ACL APIs are served, and answer
    SECURITY_DISABLED (for the request, each creation, each filter)."""
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )
    from kafka.admin import (
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        ResourcePatternFilter,
    )
    from kafka.admin import ResourceType as KpResourceType
    from kafka.errors import SecurityDisabledError

    bootstrap = kafkalog_broker.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    binding = AclBinding(ResourceType.TOPIC, "t", ResourcePatternType.LITERAL, "User:alice", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)
    match = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                             AclOperation.ANY, AclPermissionType.ANY)
    for future in (admin.create_acls([binding])[binding], admin.delete_acls([match])[match]):
        with pytest.raises(ck.KafkaException) as failure:
            future.result(TIMEOUT_S)
        assert failure.value.args[0].code() == ck.KafkaError.SECURITY_DISABLED
    kp = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        with pytest.raises(SecurityDisabledError, match="No Authorizer is configured on the broker"):
            kp.describe_acls(ACLFilter(principal=None, host="*", operation=ACLOperation.ANY,
                                       permission_type=ACLPermissionType.ANY,
                                       resource_pattern=ResourcePatternFilter(KpResourceType.ANY, None,
                                                                              ACLResourcePatternType.ANY)))
    finally:
        kp.close()
