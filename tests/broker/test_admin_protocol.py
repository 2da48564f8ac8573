"""The admin APIs at the wire, where the clients do not reach: CreateTopics' v7 answer (topic id,
configs), DeleteTopics v6 by topic id, a fetch parked on a topic that is then deleted, a topic
deleted and created again under the same name, DescribeCluster's endpoint types, bad requests."""

from __future__ import annotations

import threading
import time
import uuid
from datetime import timedelta

import pytest
from kio.schema.errors import ErrorCode

from kafkalog.broker.embedded import Broker
from tests.broker import _raw
from tests.broker.test_fetch import _fetch

TIMEOUT = timedelta(seconds=10)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with Broker(tmp_path_factory.mktemp("admin"), configs={"auto.create.topics.enable": "false"}) as b:
        yield b


def _create(sock, name, partitions=1, configs=(), version=7, replication_factor=-1, validate_only=False):
    cls, mod = _raw.request_class(19, version)
    topic = mod.CreatableTopic(
        name=name,
        num_partitions=partitions,
        replication_factor=replication_factor,
        assignments=(),
        configs=tuple(mod.CreatableTopicConfig(name=k, value=v) for k, v in configs),
    )
    response = _raw.request(sock, cls(topics=(topic,), timeout=TIMEOUT, validate_only=validate_only))
    return response.topics[0]


def _delete_by_id(sock, topic_id):
    cls, mod = _raw.request_class(20, 6)
    request = cls(topics=(mod.DeleteTopicState(name=None, topic_id=topic_id),), timeout=TIMEOUT)
    return _raw.request(sock, request).responses[0]


def _metadata_topic_ids(sock):
    cls, _ = _raw.request_class(3, 12)
    response = _raw.request(
        sock, cls(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    )
    return {t.name: t.topic_id for t in response.topics}


def test_create_topics_v7_answer_and_errors(broker):
    with _raw.connect(broker.bootstrap_servers) as sock:
        created = _create(sock, "v7", 2, configs=[("retention.ms", "1234")])
        assert created.error_code == ErrorCode.none and created.num_partitions == 2
        assert created.replication_factor == 1
        assert created.topic_id == _metadata_topic_ids(sock)["v7"] != uuid.UUID(int=0)
        configs = {c.name: c for c in created.configs}
        assert configs["retention.ms"].value == "1234" and configs["retention.ms"].config_source == 1
        assert configs["segment.bytes"].config_source == 5
        bad = _create(sock, "v7-bad", configs=[("retention.ms", "soon")])
        assert bad.error_code == ErrorCode.invalid_config and "retention.ms" in bad.error_message
        unknown = _create(sock, "v7-bad", configs=[("no.such.config", "1")])
        assert unknown.error_code == ErrorCode.invalid_config
        assert _create(sock, "v7-rf", replication_factor=2).error_code == ErrorCode.invalid_replication_factor
        assert _create(sock, "v7-zero", partitions=0).error_code == ErrorCode.invalid_partitions
        assert _create(sock, "a" * 250).error_code == ErrorCode.invalid_topic_exception
        assert _create(sock, "v7.x").error_code == ErrorCode.none
        assert _create(sock, "v7_x").error_code == ErrorCode.invalid_topic_exception  # collides with v7.x
        checked = _create(sock, "v7-checked", 3, validate_only=True)
        assert checked.error_code == ErrorCode.none and checked.num_partitions == 3
        assert "v7-checked" not in _metadata_topic_ids(sock)
        assert not broker.server.log_manager.has_topic("v7-checked")


def test_delete_by_topic_id_and_recreate_gets_new_id(broker):
    with _raw.connect(broker.bootstrap_servers) as sock:
        first = _create(sock, "by-id").topic_id
        result = _delete_by_id(sock, first)
        assert (result.error_code, result.name, result.topic_id) == (ErrorCode.none, "by-id", first)
        assert "by-id" not in _metadata_topic_ids(sock)
        assert _delete_by_id(sock, first).error_code == ErrorCode.unknown_topic_id
        second = _create(sock, "by-id").topic_id
        assert second != first and _metadata_topic_ids(sock)["by-id"] == second


def test_parked_fetch_ends_when_topic_deleted(broker):
    with _raw.connect(broker.bootstrap_servers) as sock, _raw.connect(broker.bootstrap_servers) as admin:
        _create(admin, "doomed")
        result = {}

        def fetch():
            result["partition"] = _fetch(sock, "doomed", 0, version=12, max_wait_ms=8000)[1]
            result["at"] = time.monotonic()

        thread = threading.Thread(target=fetch)
        thread.start()
        time.sleep(0.3)
        cls, _ = _raw.request_class(20, 5)
        deleted_at = time.monotonic()
        response = _raw.request(admin, cls(topic_names=("doomed",), timeout=TIMEOUT))
        assert response.responses[0].error_code == ErrorCode.none
        thread.join(10)
        assert not thread.is_alive()
        assert result["partition"].error_code == ErrorCode.unknown_topic_or_partition
        assert result["at"] - deleted_at < 2


def test_delete_records_and_create_partitions_errors(broker):
    with _raw.connect(broker.bootstrap_servers) as sock:
        _create(sock, "dr")
        cls, mod = _raw.request_class(21, 2)
        request = cls(
            topics=(
                mod.DeleteRecordsTopic(
                    name="dr",
                    partitions=(
                        mod.DeleteRecordsPartition(partition_index=0, offset=1),
                        mod.DeleteRecordsPartition(partition_index=7, offset=0),
                    ),
                ),
            ),
            timeout=TIMEOUT,
        )
        partitions = _raw.request(sock, request).topics[0].partitions
        assert [(p.error_code, p.low_watermark) for p in partitions] == [
            (ErrorCode.offset_out_of_range, -1),
            (ErrorCode.unknown_topic_or_partition, -1),
        ]
        cls, mod = _raw.request_class(37, 3)
        topics = (
            mod.CreatePartitionsTopic(name="dr", count=1, assignments=None),
            mod.CreatePartitionsTopic(name="nope", count=2, assignments=None),
        )
        results = _raw.request(sock, cls(topics=topics, timeout=TIMEOUT, validate_only=False)).results
        assert [r.error_code for r in results] == [
            ErrorCode.invalid_partitions,
            ErrorCode.unknown_topic_or_partition,
        ]


def test_requests_over_the_controllers_record_bound_create_nothing(broker):
    """Kafka's controller writes at most 10,000 metadata records for one request (a topic, each of
    its configs and partitions: one each): over that, every topic of the request gets
    POLICY_VIOLATION and nothing is created — not 227 million partition directories."""
    with _raw.connect(broker.bootstrap_servers) as sock:
        cls, mod = _raw.request_class(19, 7)

        def creatable(name, partitions, configs=()):
            return mod.CreatableTopic(
                name=name,
                num_partitions=partitions,
                replication_factor=-1,
                assignments=(),
                configs=tuple(mod.CreatableTopicConfig(name=k, value=v) for k, v in configs),
            )

        big = (creatable("big-a", 9_998), creatable("big-b", 1, [("retention.ms", "1000")]))
        response = _raw.request(sock, cls(topics=big, timeout=TIMEOUT, validate_only=False))
        assert [(t.name, t.error_code) for t in response.topics] == [
            ("big-a", ErrorCode.policy_violation),
            ("big-b", ErrorCode.policy_violation),
        ]
        assert response.topics[0].error_message == "Unable to perform excessively large batch operation."
        assert not broker.server.log_manager.has_topic("big-a")
        # 10,000 records exactly (1 + 9,996, then 1 + 1 + 1) is within the bound
        within = (creatable("fits-a", 9_996), creatable("fits-b", 1, [("retention.ms", "1000")]))
        response = _raw.request(sock, cls(topics=within, timeout=TIMEOUT, validate_only=True))
        assert [t.error_code for t in response.topics] == [ErrorCode.none, ErrorCode.none]

        assert _create(sock, "grows").error_code == ErrorCode.none
        cls, mod = _raw.request_class(37, 3)
        for count, expected in ((227_437_535, ErrorCode.policy_violation), (10_001, ErrorCode.none)):
            topics = (mod.CreatePartitionsTopic(name="grows", count=count, assignments=None),)
            request = cls(topics=topics, timeout=TIMEOUT, validate_only=True)
            assert [r.error_code for r in _raw.request(sock, request).results] == [expected]
        assert broker.server.apis.metadata_cache.num_partitions("grows") == 1


def test_describe_cluster_endpoint_types(broker):
    with _raw.connect(broker.bootstrap_servers) as sock:
        cls, _ = _raw.request_class(60, 1)
        ok = _raw.request(sock, cls(include_cluster_authorized_operations=False, endpoint_type=1))
        assert ok.error_code == ErrorCode.none and ok.controller_id == 1
        assert [(b.broker_id, b.port) for b in ok.brokers] == [(1, broker.port)]
        wrong = _raw.request(sock, cls(include_cluster_authorized_operations=False, endpoint_type=2))
        assert (wrong.error_code, wrong.error_message) == (
            ErrorCode.mismatched_endpoint_type,
            "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type "
            "CONTROLLER")
        unknown = _raw.request(sock, cls(include_cluster_authorized_operations=False, endpoint_type=3))
        assert (unknown.error_code, unknown.error_message) == (
            ErrorCode.unsupported_endpoint_type, "Unsupported endpoint type 3")


def _describe_configs(sock, resource_type, name):
    cls, mod = _raw.request_class(32, 4)
    resource = mod.DescribeConfigsResource(resource_type=resource_type, resource_name=name,
                                           configuration_keys=None)
    body = cls(resources=(resource,), include_synonyms=False, include_documentation=False)
    (result,) = _raw.request(sock, body).results
    return result.error_code, result.error_message


def _incremental_alter(sock, name, config, op=0, value="1"):
    cls, mod = _raw.request_class(44, 1)
    resource = mod.AlterConfigsResource(resource_type=2, resource_name=name, configs=(
        mod.AlterableConfig(name=config, config_operation=op, value=value),))
    (result,) = _raw.request(sock, cls(resources=(resource,), validate_only=False)).responses
    return result.error_code, result.error_message


def test_config_resources_named_as_kafka_reads_them(broker):
    """DescribeConfigs and IncrementalAlterConfigs validate a topic's name first (Kafka's
    Topic.validate), and AlterConfigs the configs before it looks the topic up; a broker id is read
    as Scala's toInt reads it."""
    with _raw.connect(broker.bootstrap_servers) as sock:
        assert _describe_configs(sock, 2, "bad name")[0] == ErrorCode.invalid_topic_exception
        assert _describe_configs(sock, 2, "no.such.topic") == (ErrorCode.unknown_topic_or_partition, None)
        node = broker.server.apis.node_id
        assert _describe_configs(sock, 4, f"0{node}") == (ErrorCode.none, None)
        assert _describe_configs(sock, 4, "abc") == (ErrorCode.invalid_request,
                                                     "Broker id must be an integer, but it is: abc")
        assert _incremental_alter(sock, "bad name", "retention.ms")[0] == ErrorCode.invalid_topic_exception
        assert _incremental_alter(sock, "", "retention.ms") == (ErrorCode.invalid_request,
                                                                "Default topic resources are not allowed.")
        invalid = _incremental_alter(sock, "no.such.topic", "retention.ms", value="soon")
        assert invalid[0] == ErrorCode.invalid_config
        assert _incremental_alter(sock, "no.such.topic", "retention.ms", op=2) == (
            ErrorCode.invalid_config, "Can't APPEND to key retention.ms because its type is not LIST.")
        assert _incremental_alter(sock, "no.such.topic", "retention.ms") == (
            ErrorCode.unknown_topic_or_partition, "The topic 'no.such.topic' does not exist.")
        cls, mod = _raw.request_class(3, 12)
        response = _raw.request(sock, cls(topics=(mod.MetadataRequestTopic(topic_id=None, name="bad name"),),
                                          allow_auto_topic_creation=False,
                                          include_topic_authorized_operations=False))
        assert response.topics[0].error_code == ErrorCode.invalid_topic_exception


# AclOperation codes, as the clients' enums number them: READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7,
# DESCRIBE 8, CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12.
_TOPIC_OPS = {3, 4, 5, 6, 7, 8, 10, 11}
_CLUSTER_OPS = {5, 7, 8, 9, 10, 11, 12}
_NOT_ASKED = -(2**31)


def _ops(field):
    return {bit for bit in range(32) if field >> bit & 1}


def test_authorized_operations_without_an_authorizer_are_all_the_supported_ones(broker):
    """No authorizer: asked, a Kafka broker answers every operation AclEntry supports for the resource
    type (also for a topic it does not know); not asked, the schema's default."""
    with _raw.connect(broker.bootstrap_servers) as sock:
        assert _create(sock, "ops-t").error_code == ErrorCode.none
        cls, mod = _raw.request_class(3, 10)
        topics = tuple(mod.MetadataRequestTopic(name=n, topic_id=None) for n in ("ops-t", "ops-missing"))
        for asked in (True, False):
            response = _raw.request(
                sock,
                cls(
                    topics=topics,
                    allow_auto_topic_creation=False,
                    include_cluster_authorized_operations=asked,
                    include_topic_authorized_operations=asked,
                ),
            )
            by_name = {t.name: t for t in response.topics}
            assert by_name["ops-missing"].error_code == ErrorCode.unknown_topic_or_partition
            for topic in by_name.values():
                field = topic.topic_authorized_operations
                assert _ops(field) == _TOPIC_OPS if asked else field == _NOT_ASKED
            field = response.cluster_authorized_operations
            assert _ops(field) == _CLUSTER_OPS if asked else field == _NOT_ASKED
        cls, _ = _raw.request_class(60, 1)
        for asked in (True, False):
            field = _raw.request(
                sock, cls(include_cluster_authorized_operations=asked, endpoint_type=1)
            ).cluster_authorized_operations
            assert _ops(field) == _CLUSTER_OPS if asked else field == _NOT_ASKED


def test_metadata_before_v12_refuses_topic_ids_and_null_names_per_topic(broker):
    """v10-v11 carry a topic id and a nullable name but may use neither: Kafka answers every topic
    with INVALID_REQUEST (a null name as ""), keeping the connection."""
    with _raw.connect(broker.bootstrap_servers) as sock:
        cls, mod = _raw.request_class(3, 11)
        for topic in (
            mod.MetadataRequestTopic(name=None, topic_id=None),
            mod.MetadataRequestTopic(name="x", topic_id=uuid.uuid4()),
        ):
            request = cls(
                topics=(topic, mod.MetadataRequestTopic(name="other", topic_id=None)),
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )
            response = _raw.request(sock, request)
            assert [(t.name, t.error_code) for t in response.topics] == [
                (topic.name or "", ErrorCode.invalid_request),
                ("other", ErrorCode.invalid_request),
            ]
        _metadata_topic_ids(sock)  # the connection still serves


def test_configs_of_unknown_topic_and_broker_alter_refused(broker):
    with _raw.connect(broker.bootstrap_servers) as sock:
        cls, mod = _raw.request_class(32, 4)
        resources = (
            mod.DescribeConfigsResource(resource_type=2, resource_name="missing", configuration_keys=None),
            mod.DescribeConfigsResource(resource_type=4, resource_name="99", configuration_keys=None),
            mod.DescribeConfigsResource(resource_type=4, resource_name="1", configuration_keys=("node.id",)),
        )
        results = _raw.request(
            sock, cls(resources=resources, include_synonyms=True, include_documentation=True)
        ).results
        assert [r.error_code for r in results] == [
            ErrorCode.unknown_topic_or_partition,
            ErrorCode.invalid_request,
            ErrorCode.none,
        ]
        assert [(c.name, c.config_source, c.read_only) for c in results[2].configs] == [("node.id", 5, True)]
        cls, mod = _raw.request_class(44, 1)
        resource = mod.AlterConfigsResource(
            resource_type=4,
            resource_name="1",
            configs=(mod.AlterableConfig(name="num.partitions", config_operation=0, value="3"),),
        )
        response = _raw.request(sock, cls(resources=(resource,), validate_only=False))
        assert response.responses[0].error_code == ErrorCode.invalid_request


def test_describe_topic_partitions_pages_in_name_order(broker):
    """KIP-966 as Kafka's handler answers it: topics by name, at most the limit's partitions per
    response, a cursor where the next page starts (mid-topic, or at the next topic)."""
    with _raw.connect(broker.bootstrap_servers) as sock:
        assert _create(sock, "dtp-a", partitions=5).error_code == ErrorCode.none
        assert _create(sock, "dtp-b", partitions=3).error_code == ErrorCode.none
        cls, mod = _raw.request_class(75, 0)

        def page(names, limit, cursor=None):
            request = cls(
                topics=tuple(mod.TopicRequest(name=n) for n in names),
                response_partition_limit=limit,
                cursor=None
                if cursor is None
                else mod.Cursor(topic_name=cursor[0], partition_index=cursor[1]),
            )
            response = _raw.request(sock, request)
            got = [(t.name, t.error_code, [p.partition_index for p in t.partitions]) for t in response.topics]
            c = response.next_cursor
            return got, None if c is None else (c.topic_name, c.partition_index)

        both = ["dtp-b", "dtp-a"]  # answered in name order
        assert page(both, 4) == ([("dtp-a", ErrorCode.none, [0, 1, 2, 3])], ("dtp-a", 4))
        assert page(both, 4, ("dtp-a", 4)) == (
            [("dtp-a", ErrorCode.none, [4]), ("dtp-b", ErrorCode.none, [0, 1, 2])],
            None,
        )
        # a limit met exactly at a topic's end: the next topic starts the next page
        assert page(both, 5) == ([("dtp-a", ErrorCode.none, [0, 1, 2, 3, 4])], ("dtp-b", 0))
        assert page(["dtp-a", "nope", "bad name"], 100) == (
            [
                ("bad name", ErrorCode.invalid_topic_exception, []),
                ("dtp-a", ErrorCode.none, [0, 1, 2, 3, 4]),
                ("nope", ErrorCode.unknown_topic_or_partition, []),
            ],
            None,
        )
        # a cursor on a topic not asked for, or with a negative partition: INVALID_REQUEST per topic
        assert page(["dtp-a"], 10, ("dtp-b", 0))[0] == [("dtp-a", ErrorCode.invalid_request, [])]
        assert page(["dtp-a"], 10, ("dtp-a", -1))[0] == [("dtp-a", ErrorCode.invalid_request, [])]
        # no topics named: every topic from the cursor's on, partitions from the cursor's
        listed, _ = page([], 2000, ("dtp-a", 3))
        assert listed[:2] == [("dtp-a", ErrorCode.none, [3, 4]), ("dtp-b", ErrorCode.none, [0, 1, 2])]
        response = _raw.request(
            sock, cls(topics=(mod.TopicRequest(name="dtp-b"),), response_partition_limit=10, cursor=None)
        )
        (topic,) = response.topics
        assert topic.topic_id == broker.server.apis.metadata_cache.topic_id("dtp-b")
        assert _ops(topic.topic_authorized_operations) == _TOPIC_OPS
        assert [(p.leader_id, tuple(p.replica_nodes), tuple(p.isr_nodes)) for p in topic.partitions] == [
            (1, (1,), (1,))
        ] * 3


def _create_many(sock, topics, version=7):
    """CreateTopics of [(name, partitions, replication factor, assignments, configs), ...]."""
    cls, mod = _raw.request_class(19, version)
    def topic(name, n, rf, assignments, configs):
        return mod.CreatableTopic(
            name=name, num_partitions=n, replication_factor=rf,
            assignments=tuple(mod.CreatableReplicaAssignment(partition_index=i, broker_ids=tuple(b))
                              for i, b in assignments),
            configs=tuple(mod.CreatableTopicConfig(name=k, value=v) for k, v in configs))

    request = cls(topics=tuple(topic(*t) for t in topics), timeout=TIMEOUT, validate_only=False)
    return [(t.name, t.error_code, t.error_message) for t in _raw.request(sock, request).topics]


def test_create_topics_checks_in_kafkas_controller_order(broker):
    """ControllerApis/ReplicationControlManager: a name given twice gets one refusal after the
    others; then the name, that the topic is new, its configs, and only then replication and
    partitions (a manual assignment checked replica by replica)."""
    node = broker.server.apis.node_id
    with _raw.connect(broker.bootstrap_servers) as sock:
        assert _create(sock, "exists.a").error_code == ErrorCode.none
        answers = _create_many(sock, [("dup", 1, -1, (), ()), ("dup", 1, -1, (), ()),
                                      ("fresh", 1, -1, (), ())])
        assert answers == [("fresh", ErrorCode.none, None),
                           ("dup", ErrorCode.invalid_request, "Duplicate topic name.")]
        already = ("exists.a", ErrorCode.topic_already_exists, "Topic 'exists.a' already exists.")
        for n, rf, configs in ((1, 3, ()), (0, -1, ()), (1, -1, (("no.such.config", "1"),))):
            assert _create_many(sock, [("exists.a", n, rf, (), configs)]) == [already]
        bad_name = _create_many(sock, [("bad name", 1, 3, (), ())])
        assert bad_name[0][1] == ErrorCode.invalid_topic_exception
        for rf, n, code, text in (
                (0, 1, ErrorCode.invalid_replication_factor,
                 "Replication factor must be larger than 0, or -1 to use the default value."),
                (-2, 1, ErrorCode.invalid_replication_factor,
                 "Replication factor must be larger than 0, or -1 to use the default value."),
                (3, 0, ErrorCode.invalid_partitions,
                 "Number of partitions was set to an invalid non-positive value."),
                (3, 1, ErrorCode.invalid_replication_factor,
                 "Unable to replicate the partition 3 time(s): The target replication factor of 3 cannot be "
                 "reached because only 1 broker(s) are registered.")):
            assert _create_many(sock, [("rf", n, rf, (), ())]) == [("rf", code, text)]
        for assignments, code, text in (
                (((0, [node]), (0, [node])), ErrorCode.invalid_replica_assignment,
                 "Found multiple manual partition assignments for partition 0"),
                (((0, []),), ErrorCode.invalid_replica_assignment,
                 "The manual partition assignment includes an empty replica list."),
                (((0, [node + 6]),), ErrorCode.invalid_replica_assignment,
                 f"The manual partition assignment includes broker {node + 6}, but no such broker is "
                 "registered."),
                (((0, [node, node]),), ErrorCode.invalid_replica_assignment,
                 f"The manual partition assignment includes the broker {node} more than once."),
                (((1, [node]),), ErrorCode.invalid_replica_assignment,
                 "partitions should be a consecutive 0-based integer sequence")):
            assert _create_many(sock, [("assigned", -1, -1, assignments, ())]) == [("assigned", code, text)]
        assert _create_many(sock, [("assigned", 3, -1, ((0, [node]),), ())])[0][2] == (
            "A manual partition assignment was specified, but numPartitions was not set to -1.")
        two = _create_many(sock, [("assigned", -1, -1, ((0, [node]), (1, [node])), ())])
        assert two[0][1] == ErrorCode.none


def test_replication_factor_minus_one_is_the_brokers_default(tmp_path):
    with Broker(tmp_path, configs={"default.replication.factor": "3"}) as b, \
            _raw.connect(b.bootstrap_servers) as sock:
        refused = _create(sock, "three")
        assert refused.error_code == ErrorCode.invalid_replication_factor
        assert _create(sock, "one", replication_factor=1).error_code == ErrorCode.none


def _delete_many(sock, entries, version=6):
    cls, mod = _raw.request_class(20, version)
    if version >= 6:
        states = tuple(mod.DeleteTopicState(name=n, topic_id=i or uuid.UUID(int=0)) for n, i in entries)
        request = cls(topics=states, timeout=TIMEOUT)
    else:
        request = cls(topic_names=tuple(n for n, _ in entries), timeout=TIMEOUT)
    zero = uuid.UUID(int=0)
    return [(r.name, (r.topic_id or zero) if version >= 6 else None, r.error_code,
             getattr(r, "error_message", None)) for r in _raw.request(sock, request).responses]


def test_delete_topics_refuses_what_kafkas_controller_refuses(broker):
    zero = uuid.UUID(int=0)
    with _raw.connect(broker.bootstrap_servers) as sock:
        for name in ("del.a", "del.b"):
            assert _create(sock, name).error_code == ErrorCode.none
        ids = _metadata_topic_ids(sock)
        answers = _delete_many(sock, [("del.a", None), ("del.a", None), (None, ids["del.b"]),
                                      ("del.b", None), (None, None), ("del.b", ids["del.b"])])
        assert sorted(answers, key=str) == sorted([
            (None, zero, ErrorCode.invalid_request, "Neither topic name nor id were specified."),
            ("del.b", ids["del.b"], ErrorCode.invalid_request,
             "You may not specify both topic name and topic id."),
            ("del.a", zero, ErrorCode.invalid_request, "Duplicate topic name."),
            ("del.b", ids["del.b"], ErrorCode.invalid_request,
             "The provided topic name maps to an ID that was already supplied."),
        ], key=str)
        assert {"del.a", "del.b"} <= set(_metadata_topic_ids(sock))  # nothing was deleted
        unknown = _delete_many(sock, [("no.such", None), (None, uuid.UUID(int=7))])
        assert unknown == [("no.such", zero, ErrorCode.unknown_topic_or_partition,
                            "This server does not host this topic-partition."),
                           (None, uuid.UUID(int=7), ErrorCode.unknown_topic_id,
                            "This server does not host this topic ID.")]


def test_delete_topic_enable_false_deletes_nothing(tmp_path):
    with Broker(tmp_path, configs={"delete.topic.enable": "false"}) as b, \
            _raw.connect(b.bootstrap_servers) as sock:
        assert _create(sock, "kept").error_code == ErrorCode.none
        assert _delete_many(sock, [("kept", None)])[0][2] == ErrorCode.topic_deletion_disabled
        old = _delete_many(sock, [("kept", None)], version=2)
        assert old == [("kept", None, ErrorCode.invalid_request, None)]
        assert "kept" in _metadata_topic_ids(sock)


def test_delete_records_refuses_internal_topics(broker):
    from kafkalog.broker.replica_manager import TopicPartition

    log_manager = broker.server.log_manager
    if not log_manager.has_topic("__consumer_offsets"):
        log_manager.create_topic("__consumer_offsets", 1, {"cleanup.policy": "compact"})
    rm = broker.server.apis.replica_manager
    assert rm.delete_records({TopicPartition("__consumer_offsets", 0): -1}) == {
        TopicPartition("__consumer_offsets", 0): (ErrorCode.invalid_topic_exception, -1)}


def test_remote_storage_is_refused_without_tiered_storage(broker):
    """Kafka's validateRemoteStorageOnlyIfSystemEnabled: this broker has no tiered storage."""
    text = ("Tiered Storage functionality is disabled in the broker. Topic cannot be configured with "
            "remote log storage.")
    with _raw.connect(broker.bootstrap_servers) as sock:
        refused = _create(sock, "tiered", configs=[("remote.storage.enable", "true")])
        assert (refused.error_code, refused.error_message) == (ErrorCode.invalid_config, text)
        untiered = _create(sock, "untiered", configs=[("remote.storage.enable", "false")])
        assert untiered.error_code == ErrorCode.none
        assert _incremental_alter(sock, "untiered", "remote.storage.enable", value="true") == (
            ErrorCode.invalid_config, text)


def test_create_partitions_answers_as_kafkas_controller(broker):
    node = broker.server.apis.node_id
    with _raw.connect(broker.bootstrap_servers) as sock:
        assert _create(sock, "cp", 2).error_code == ErrorCode.none
        cls, mod = _raw.request_class(37, 3)

        def grow(*topics):
            body = cls(topics=tuple(mod.CreatePartitionsTopic(
                name=name, count=count,
                assignments=None if a is None else tuple(mod.CreatePartitionsAssignment(broker_ids=tuple(b))
                                                         for b in a)) for name, count, a in topics),
                timeout=TIMEOUT, validate_only=True)
            return [(r.name, r.error_code, r.error_message) for r in _raw.request(sock, body).results]

        invalid, assignment = ErrorCode.invalid_partitions, ErrorCode.invalid_replica_assignment
        assert grow(("cp", 1, None)) == [
            ("cp", invalid, "The topic cp currently has 2 partition(s); 1 would not be an increase.")]
        assert grow(("cp", 2, None)) == [("cp", invalid, "Topic already has 2 partition(s).")]
        assert grow(("cp", 4, [[node]])) == [
            ("cp", assignment,
             "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified.")]
        assert grow(("cp", 3, [[node, node]]))[0][2] == (
            f"The manual partition assignment includes the broker {node} more than once.")
        assert grow(("no.such", 3, None)) == [("no.such", ErrorCode.unknown_topic_or_partition, None)]
        assert grow(("cp", 3, None), ("cp", 4, None), ("cp", 3, [[node]])) == [
            ("cp", ErrorCode.invalid_request, "Duplicate topic name.")]
        assert grow(("cp", 3, [[node]])) == [("cp", ErrorCode.none, None)]
