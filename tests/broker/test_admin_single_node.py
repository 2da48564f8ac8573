"""The cluster-shape admin APIs on one node, as Kafka answers them there: DescribeLogDirs (the data
directory, partition sizes, volume space), AlterReplicaLogDirs (a move to where the replica is),
ElectLeaders (never needed), Alter/ListPartitionReassignments (only ``[this node]`` is valid, none
is ever in progress) and ListConfigResources — on the wire, every version, and through
kafka-python's and confluent-kafka's admin clients."""

from __future__ import annotations

import logging
import os
import time
import uuid
from datetime import timedelta

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient
from kafka.admin import NewTopic as KpNewTopic
from kafka.errors import (
    InvalidReplicationAssignmentError,
    LogDirNotFoundError,
    NoError,
    NoReassignmentInProgressError,
    ReplicaNotAvailableError,
    UnknownTopicOrPartitionError,
)
from kafka.structs import TopicPartition as KpTopicPartition
from kafka.structs import TopicPartitionReplica
from kio.schema.errors import ErrorCode

from kafkalog.broker.embedded import Broker
from tests.broker import _raw

TIMEOUT = timedelta(seconds=10)
TIMEOUT_S = 15


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with Broker(tmp_path_factory.mktemp("single-node"), configs={"auto.create.topics.enable": "false"}) as b:
        lm = b.server.log_manager
        lm.create_topic("two", 2)
        lm.create_topic("one", 1)
        yield b


def _produce(broker, topic, partition, count):
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, linger_ms=0)
    try:
        for i in range(count):
            producer.send(topic, b"v%d" % i, partition=partition)
        producer.flush(TIMEOUT_S)
    finally:
        producer.close(TIMEOUT_S)


def _describe_log_dirs(sock, version, topics):
    cls, mod = _raw.request_class(35, version)
    wanted = (
        None
        if topics is None
        else tuple(mod.DescribableLogDirTopic(topic=t, partitions=tuple(ps)) for t, ps in topics.items())
    )
    return _raw.request(sock, cls(topics=wanted))


def test_describe_log_dirs_every_version(broker):
    _produce(broker, "two", 1, 5)
    data_dir = os.path.abspath(broker.server.log_manager.data_dir)
    sizes = {(log.topic, log.partition): log.size_in_bytes for log in broker.server.log_manager.logs()}
    assert sizes[("two", 1)] > 0 and sizes[("two", 0)] == 0
    statvfs = os.statvfs(data_dir)
    with _raw.connect(broker.bootstrap_servers) as sock:
        for version in range(1, 5):
            everything = _describe_log_dirs(sock, version, None)
            (result,) = everything.results
            assert result.error_code == ErrorCode.none and result.log_dir == data_dir
            got = {(t.name, p.partition_index): p.partition_size for t in result.topics for p in t.partitions}
            assert got == sizes
            assert all(p.offset_lag == 0 and not p.is_future_key for t in result.topics for p in t.partitions)
            if version >= 3:
                assert everything.error_code == ErrorCode.none
            if version >= 4:
                assert result.total_bytes == statvfs.f_blocks * statvfs.f_frsize
                assert 0 <= result.usable_bytes <= result.total_bytes
            # Named partitions: only those here; a topic with none of them here is left out.
            named = _describe_log_dirs(sock, version, {"two": [1, 9], "one": [5], "nope": [0]})
            (result,) = named.results
            assert [(t.name, [p.partition_index for p in t.partitions]) for t in result.topics] == [
                ("two", [1])
            ]
            assert result.topics[0].partitions[0].partition_size == sizes[("two", 1)]
            assert _describe_log_dirs(sock, version, {}).results[0].topics == ()


def _alter_log_dirs(sock, version, moves):
    cls, mod = _raw.request_class(34, version)
    dirs = tuple(
        mod.AlterReplicaLogDir(
            path=path,
            topics=tuple(
                mod.AlterReplicaLogDirTopic(name=t, partitions=tuple(ps)) for t, ps in topics.items()
            ),
        )
        for path, topics in moves
    )
    response = _raw.request(sock, cls(dirs=dirs))
    return {(t.topic_name, p.partition_index): p.error_code for t in response.results for p in t.partitions}


def test_alter_replica_log_dirs_only_to_where_it_is(broker):
    here = os.path.abspath(broker.server.log_manager.data_dir)
    long_topic = "x" * 215  # "<topic>-0.<32 hex>-future" is then longer than 255 bytes
    with _raw.connect(broker.bootstrap_servers) as sock:
        for version in (1, 2):
            got = _alter_log_dirs(
                sock,
                version,
                [
                    (here, {"two": [0, 1], "nope": [0], "one": [3], long_topic: [0]}),
                    ("/elsewhere", {"one": [0]}),
                    (here + "/", {"two": [1]}),  # not the same string: Kafka compares paths as strings
                ],
            )
            assert got == {
                ("two", 0): ErrorCode.none,
                ("two", 1): ErrorCode.log_dir_not_found,  # the last directory named for it wins
                ("nope", 0): ErrorCode.replica_not_available,
                ("one", 3): ErrorCode.replica_not_available,
                (long_topic, 0): ErrorCode.invalid_topic_exception,
                ("one", 0): ErrorCode.log_dir_not_found,
            }
    assert broker.server.log_manager.partitions("two") == [0, 1]  # nothing moved, nothing made


def _elect(sock, version, election_type, topics):
    cls, mod = _raw.request_class(43, version)
    wanted = (
        None
        if topics is None
        else tuple(mod.TopicPartitions(topic=t, partitions=tuple(ps)) for t, ps in topics.items())
    )
    return _raw.request(
        sock,
        cls(election_type=election_type, topic_partitions=wanted, timeout=TIMEOUT)
        if version >= 1
        else cls(topic_partitions=wanted, timeout=TIMEOUT),
    )


def test_elect_leaders_is_never_needed(broker):
    with _raw.connect(broker.bootstrap_servers) as sock:
        for version in range(3):
            for election_type in (0, 1) if version else (0,):
                response = _elect(sock, version, election_type, {"two": [0, 1, 2], "nope": [0]})
                if version >= 1:
                    assert response.error_code == ErrorCode.none
                got = {
                    (r.topic, p.partition_id): (p.error_code, p.error_message)
                    for r in response.replica_election_results
                    for p in r.partition_result
                }
                assert got == {
                    ("two", 0): (
                        ErrorCode.election_not_needed,
                        "Leader election not needed for topic partition.",
                    ),
                    ("two", 1): (
                        ErrorCode.election_not_needed,
                        "Leader election not needed for topic partition.",
                    ),
                    ("two", 2): (ErrorCode.unknown_topic_or_partition, "No such partition as two-2"),
                    ("nope", 0): (ErrorCode.unknown_topic_or_partition, "No such topic as nope"),
                }
                # All partitions: those that need no election are left out, every topic is listed.
                everything = _elect(sock, version, election_type, None)
                listed = {r.topic: r.partition_result for r in everything.replica_election_results}
                assert set(listed) == set(broker.server.log_manager.topics())
                assert all(results == () for results in listed.values())
        bad = _elect(sock, 2, 7, {"two": [0]})
        assert bad.error_code == ErrorCode.invalid_request
        (result,) = bad.replica_election_results[0].partition_result
        assert (result.error_code, result.error_message) == (
            ErrorCode.invalid_request,
            "Unknown election type 7",
        )


def _reassign(sock, version, targets, allow_rf_change=True):
    cls, mod = _raw.request_class(45, version)
    topics = tuple(
        mod.ReassignableTopic(
            name=t, partitions=tuple(mod.ReassignablePartition(partition_index=p, replicas=r) for p, r in ps)
        )
        for t, ps in targets.items()
    )
    extra = {"allow_replication_factor_change": allow_rf_change} if version >= 1 else {}
    response = _raw.request(sock, cls(topics=topics, timeout=TIMEOUT, **extra))
    assert response.error_code == ErrorCode.none and response.error_message is None
    if version >= 1:
        assert response.allow_replication_factor_change == allow_rf_change
    return {
        (t.name, p.partition_index): (p.error_code, p.error_message)
        for t in response.responses
        for p in t.partitions
    }


def test_partition_reassignments_on_one_node(broker):
    node = broker.server.apis.node_id
    manual = "The manual partition assignment includes"
    with _raw.connect(broker.bootstrap_servers) as sock:
        for version in (0, 1):
            got = _reassign(
                sock,
                version,
                {
                    "two": [(0, (node,)), (1, None)],
                    "one": [(0, (node, node + 1)), (1, (node,))],
                    "nope": [(0, (node,))],
                },
            )
            assert got == {
                ("two", 0): (ErrorCode.none, None),
                ("two", 1): (
                    ErrorCode.no_reassignment_in_progress,
                    "No partition reassignment is in progress.",
                ),
                ("one", 0): (
                    ErrorCode.invalid_replica_assignment,
                    f"{manual} broker {node + 1}, but no such broker is registered.",
                ),
                ("one", 1): (ErrorCode.unknown_topic_or_partition, "Unable to find partition one:1."),
                ("nope", 0): (ErrorCode.unknown_topic_or_partition, "Unable to find a topic named nope."),
            }
            twice = _reassign(sock, version, {"two": [(0, (node, node)), (1, ())]})
            assert twice == {
                ("two", 0): (
                    ErrorCode.invalid_replica_assignment,
                    f"{manual} the broker {node} more than once.",
                ),
                ("two", 1): (ErrorCode.invalid_replica_assignment, f"{manual} an empty replica list."),
            }
        fixed = _reassign(sock, 1, {"two": [(0, (node, node + 1)), (1, (node,))]}, allow_rf_change=False)
        assert fixed == {
            ("two", 0): (
                ErrorCode.invalid_replication_factor,
                "The replication factor is changed from 1 to 2",
            ),
            ("two", 1): (ErrorCode.none, None),
        }
        cls, mod = _raw.request_class(46, 0)
        for topics in (None, (mod.ListPartitionReassignmentsTopics(name="two", partition_indexes=(0, 1)),)):
            listed = _raw.request(sock, cls(timeout=TIMEOUT, topics=topics))
            assert (listed.error_code, listed.error_message, listed.topics) == (ErrorCode.none, None, ())


def test_list_config_resources(broker):
    node = str(broker.server.apis.node_id)
    topics = [(t, 2) for t in broker.server.apis.metadata_cache.topics()]
    assert ("two", 2) in topics and ("one", 2) in topics
    with _raw.connect(broker.bootstrap_servers) as sock:
        cls, _ = _raw.request_class(74, 0)
        v0 = _raw.request(sock, cls())
        assert (v0.error_code, v0.config_resources) == (ErrorCode.none, ())  # no client-metrics subscriptions
        cls, _ = _raw.request_class(74, 1)

        def listed(types):
            response = _raw.request(sock, cls(resource_types=types))
            return response.error_code, [
                (r.resource_name, r.resource_type) for r in response.config_resources
            ]

        assert listed(()) == (ErrorCode.none, [(node, 8), (node, 4), *topics])
        assert listed((2, 4, 2)) == (ErrorCode.none, [(node, 4), *topics])  # Kafka's order, each type once
        assert listed((32, 16)) == (ErrorCode.none, [])  # no group configs, no client metrics
        assert listed((2, 3)) == (ErrorCode.unsupported_version, [])


def test_through_kafka_python_admin(broker):
    node = broker.server.apis.node_id
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=TIMEOUT_S * 1000)
    try:
        admin.create_topics([KpNewTopic("kp-dirs", 2, 1)])
        (described,) = admin.describe_log_dirs()
        assert described["broker"] == node
        (log_dir,) = described["log_dirs"]
        assert log_dir["error_code"] == 0
        assert log_dir["log_dir"] == os.path.abspath(broker.server.log_manager.data_dir)
        assert {"two", "one", "kp-dirs"} <= {t["name"] for t in log_dir["topics"]}
        here = TopicPartitionReplica("kp-dirs", 0, node)
        gone = TopicPartitionReplica("kp-dirs", 5, node)
        assert admin.alter_replica_log_dirs({here: log_dir["log_dir"]}) == {here: NoError}
        assert admin.alter_replica_log_dirs({here: "/elsewhere"}) == {here: LogDirNotFoundError}
        assert admin.alter_replica_log_dirs({gone: log_dir["log_dir"]}) == {gone: ReplicaNotAvailableError}
        response = admin.elect_leaders(0, {"kp-dirs": [0, 1]})
        results = {p[0]: p[1] for r in response.replica_election_results for p in r[1]}
        assert results == {0: 84, 1: 84}
        tp = KpTopicPartition("kp-dirs", 0)
        assert admin.alter_partition_reassignments({tp: [node]}) == {tp: None}
        assert admin.alter_partition_reassignments({tp: [node + 1]}) == {
            tp: InvalidReplicationAssignmentError
        }
        assert admin.alter_partition_reassignments({tp: None}) == {tp: NoReassignmentInProgressError}
        assert admin.list_partition_reassignments() == {}
        assert admin.list_partition_reassignments([tp]) == {}
        resources = admin.list_config_resources()
        assert resources["broker"] == [str(node)] and resources["broker_logger"] == [str(node)]
        assert {"two", "one", "kp-dirs"} <= set(resources["topic"])
        with pytest.raises(UnknownTopicOrPartitionError):
            admin.elect_leaders(0, {"kp-dirs": [7]})
    finally:
        admin.close()


def test_through_confluent_kafka_admin(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    wanted = [ck.TopicPartition("two", 0), ck.TopicPartition("two", 1), ck.TopicPartition("two", 4)]
    for election_type in (ck.ElectionType.PREFERRED, ck.ElectionType.UNCLEAN):
        results = admin.elect_leaders(election_type, wanted).result(TIMEOUT_S)
        codes = {tp.partition: error.code() for tp, error in results.items()}
        assert codes == {
            0: ck.KafkaError.ELECTION_NOT_NEEDED,
            1: ck.KafkaError.ELECTION_NOT_NEEDED,
            4: ck.KafkaError.UNKNOWN_TOPIC_OR_PART,
        }


def _describe_loggers(sock, name, keys=None):
    cls, mod = _raw.request_class(32, 4)
    resource = mod.DescribeConfigsResource(resource_type=8, resource_name=name, configuration_keys=keys)
    (result,) = _raw.request(
        sock, cls(resources=(resource,), include_synonyms=True, include_documentation=False)
    ).results
    return result


def _alter_loggers(sock, ops, validate_only=False, name=None, version=1):
    cls, mod = _raw.request_class(44, version)
    configs = tuple(mod.AlterableConfig(name=n, config_operation=op, value=v) for n, op, v in ops)
    resource = mod.AlterConfigsResource(resource_type=8, resource_name=name, configs=configs)
    (result,) = _raw.request(sock, cls(resources=(resource,), validate_only=validate_only)).responses
    return result.error_code, result.error_message


def test_broker_loggers_described_and_altered_at_runtime(broker):
    """KIP-412's broker-logger resource over this process's Python loggers: levels under log4j's
    names, SET and DELETE at once, nothing changed by a request that fails or only validates."""
    node = str(broker.server.apis.node_id)
    target = logging.getLogger("kafkalog.broker.replica_manager")
    parent = logging.getLogger("kafkalog")
    saved = (target.level, parent.level)
    try:
        target.setLevel(logging.NOTSET)
        parent.setLevel(logging.INFO)
        with _raw.connect(broker.bootstrap_servers) as sock:
            described = _describe_loggers(sock, node)
            assert described.error_code == ErrorCode.none
            levels = {c.name: c.value for c in described.configs}
            assert described.configs[0].name == "root"
            assert levels[target.name] == "INFO"  # inherited from its parent
            entry = next(c for c in described.configs if c.name == target.name)
            assert (entry.config_source, entry.read_only, entry.is_sensitive, entry.synonyms) == (
                6,
                False,
                False,
                (),
            )
            only = _describe_loggers(sock, node, keys=(target.name, "no.such.logger"))
            assert [(c.name, c.value) for c in only.configs] == [(target.name, "INFO")]

            assert _alter_loggers(sock, [(target.name, 0, "TRACE")], name=node) == (ErrorCode.none, None)
            assert (
                target.level == 5
                and _describe_loggers(sock, node, (target.name,)).configs[0].value == "TRACE"
            )
            assert _alter_loggers(sock, [(target.name, 0, "WARN")], name=node, validate_only=True) == (
                ErrorCode.none,
                None,
            )
            assert target.level == 5  # only validated
            # Every op is checked before any is applied: a bad one leaves the good one undone.
            error, message = _alter_loggers(
                sock, [(target.name, 0, "ERROR"), (target.name + ".x", 0, "INFO")], name=node
            )
            assert (error, message) == (ErrorCode.invalid_config, f"Logger {target.name}.x does not exist!")
            assert target.level == 5
            error, message = _alter_loggers(sock, [(target.name, 0, "debug")], name=node)
            assert error == ErrorCode.invalid_config
            assert message.endswith("Valid log levels are DEBUG, ERROR, FATAL, INFO, TRACE, WARN")
            assert _alter_loggers(sock, [("root", 1, None)], name=node) == (
                ErrorCode.invalid_request,
                "Removing the log level of the root logger is not allowed",
            )
            assert _alter_loggers(sock, [(target.name, 2, "INFO")], name=node) == (
                ErrorCode.invalid_request,
                "APPEND operation is not allowed for the BROKER_LOGGER resource",
            )
            assert _alter_loggers(sock, [(target.name, 0, None)], name=node) == (
                ErrorCode.invalid_request,
                f"Null value not supported for : {target.name}",
            )
            assert _alter_loggers(sock, [(target.name, 0, "INFO"), (target.name, 1, None)], name=node) == (
                ErrorCode.invalid_request,
                "Error due to duplicate config keys",
            )
            assert _alter_loggers(sock, [(target.name, 0, "INFO")], name="7")[0] == ErrorCode.invalid_request
            assert _alter_loggers(sock, [(target.name, 0, "INFO")], name="x")[0] == ErrorCode.invalid_request
            assert target.level == 5
            assert _alter_loggers(sock, [(target.name, 1, None)], name=node, version=0) == (
                ErrorCode.none,
                None,
            )
            assert target.level == logging.NOTSET  # back to inheriting INFO
            for bad, message in (
                ("", "Broker id must not be empty"),
                ("7", f"Unexpected broker id, expected {node} but received 7"),
            ):
                failed = _describe_loggers(sock, bad)
                assert (failed.error_code, failed.error_message, failed.configs) == (
                    ErrorCode.invalid_request,
                    message,
                    (),
                )
            # The legacy AlterConfigs does not take broker loggers, as in Kafka.
            cls, mod = _raw.request_class(33, 2)
            resource = mod.AlterConfigsResource(
                resource_type=8,
                resource_name=node,
                configs=(mod.AlterableConfig(name=target.name, value="DEBUG"),),
            )
            (legacy,) = _raw.request(sock, cls(resources=(resource,), validate_only=False)).responses
            assert (legacy.error_code, legacy.error_message) == (
                ErrorCode.invalid_request,
                "Unknown resource type 8",
            )
            # A resource named twice in one request: each INVALID_REQUEST, neither applied.
            cls, mod = _raw.request_class(44, 1)
            twice = tuple(
                mod.AlterConfigsResource(
                    resource_type=8,
                    resource_name=node,
                    configs=(mod.AlterableConfig(name=target.name, config_operation=0, value="DEBUG"),),
                )
                for _ in range(2)
            )
            responses = _raw.request(sock, cls(resources=twice, validate_only=False)).responses
            assert [(r.error_code, r.error_message) for r in responses] == [
                (ErrorCode.invalid_request, "Each resource must appear at most once.")
            ] * 2
            assert target.level == logging.NOTSET
    finally:
        target.setLevel(saved[0])
        parent.setLevel(saved[1])


def test_broker_loggers_through_kafka_python(broker):
    from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType

    node = str(broker.server.apis.node_id)
    target = logging.getLogger("kafkalog.broker.kafka_server")
    saved = target.level
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=TIMEOUT_S * 1000)
    try:
        resource = ConfigResource(
            ConfigResourceType.BROKER_LOGGER, node, configs={target.name: (AlterConfigOp.SET, "DEBUG")}
        )
        admin.alter_configs([resource], incremental=True)
        assert target.level == logging.DEBUG
        described = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER_LOGGER, node)])
        levels = described["broker_logger"][node]
        assert levels[target.name]["value"] == "DEBUG" and "root" in levels
        assert levels[target.name]["config_source"] == "DYNAMIC_BROKER_LOGGER_CONFIG"
    finally:
        admin.close()
        target.setLevel(saved)


def _describe_quorum(sock, version, topics):
    cls, mod = _raw.request_class(55, version)
    wanted = tuple(
        mod.TopicData(topic_name=t, partitions=tuple(mod.PartitionData(partition_index=p) for p in ps))
        for t, ps in topics
    )
    return _raw.request(sock, cls(topics=wanted))


def test_describe_quorum_every_version(broker):
    """A cluster of one that is its own controller: this node the only voter and the leader, no
    observers, an empty metadata log (kafkalog keeps metadata in files), the leader's fetch and
    caught-up times now (from v1); v2 adds no directory id and this node's listeners."""
    node = broker.server.apis.node_id
    host, port = broker.bootstrap_servers.rsplit(":", 1)
    with _raw.connect(broker.bootstrap_servers) as sock:
        for version in range(3):
            before = int(time.time() * 1000)
            response = _describe_quorum(sock, version, [("__cluster_metadata", [0])])
            after = int(time.time() * 1000)
            assert (response.error_code, getattr(response, "error_message", None)) == (ErrorCode.none, None)
            (topic,) = response.topics
            assert topic.topic_name == "__cluster_metadata"
            (p,) = topic.partitions
            assert (p.partition_index, p.error_code) == (0, ErrorCode.none)
            assert getattr(p, "error_message", None) is None
            assert (p.leader_id, p.leader_epoch, p.high_watermark, p.observers) == (node, 1, 0, ())
            (voter,) = p.current_voters
            assert (voter.replica_id, voter.log_end_offset) == (node, 0)
            if version >= 1:
                assert before <= voter.last_fetch_timestamp <= after
                assert before <= voter.last_caught_up_timestamp <= after
            if version >= 2:
                assert voter.replica_directory_id in (None, uuid.UUID(int=0))  # kio: the zero Uuid as None
                (described,) = response.nodes
                assert described.node_id == node
                assert [(x.host, x.port) for x in described.listeners] == [(host, int(port))]


def test_describe_quorum_of_another_partition_is_unknown(broker):
    """Anything but exactly ``__cluster_metadata``-0 gets UNKNOWN_TOPIC_OR_PARTITION on every
    partition asked about, as Kafka's raft client answers."""
    unknown = ErrorCode.unknown_topic_or_partition
    with _raw.connect(broker.bootstrap_servers) as sock:
        for asked in (
            [("__cluster_metadata", [1])],
            [("two", [0])],
            [("__cluster_metadata", [0, 1])],
            [("__cluster_metadata", [0]), ("two", [1])],
        ):
            response = _describe_quorum(sock, 2, asked)
            assert response.error_code == ErrorCode.none
            got = [(t.topic_name, p.partition_index, p.error_code)
                   for t in response.topics for p in t.partitions]
            assert got == [(t, p, unknown) for t, ps in asked for p in ps]
            assert {p.error_message for t in response.topics for p in t.partitions} == {
                "This server does not host this topic-partition."
            }


def test_describe_metadata_quorum_through_kafka_python(broker):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=TIMEOUT_S * 1000)
    try:
        result = admin.describe_metadata_quorum()
    finally:
        admin.close()
    (topic,) = result["topics"]
    assert topic["topic_name"] == "__cluster_metadata"
    (p,) = topic["partitions"]
    assert p["error"] is None
    assert (p["leader_id"], p["leader_epoch"], p["high_watermark"]) == (broker.server.apis.node_id, 1, 0)
    assert [v["replica_id"] for v in p["current_voters"]] == [broker.server.apis.node_id]
