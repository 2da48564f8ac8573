"""Authorization of the data-path APIs (Kafka's ``KafkaApis`` handlers) with ``StandardAuthorizer``:
Produce (WRITE on the topic, WRITE on the TRANSACTIONAL_ID), Fetch (READ; CLUSTER_ACTION for a
follower), ListOffsets and OffsetForLeaderEpoch (DESCRIBE), Metadata and DescribeTopicPartitions
(DESCRIBE, CREATE to auto-create), DeleteRecords (DELETE), DescribeProducers (READ). Real clients
logged in over SASL as alice and bob, and raw requests for the exact error codes; a topic that may
not be described never says whether it exists."""

from __future__ import annotations

import datetime
import time
import uuid
from typing import Any

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka import errors as kafka_errors
from kio.schema.errors import ErrorCode as E

from kafkalog.broker.acl import (
    SUPPORTED_OPERATIONS,
    AclOperation,
)
from kafkalog.broker.auth_helper import NOT_REQUESTED
from kafkalog.broker.embedded import Broker
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.records.memory import MemoryRecordsBuilder
from kafkalog.records.types import CompressionType, TimestampType
from tests.broker import _raw
from tests.broker._authz import (
    ALICE,
    BOB,
    DENY,
    PREFIXED,
    SECOND,
    TIMEOUT_S,
    TX,
    C,
    G,
    Op,
    T,
    acl,
    authorizing_broker,
    call,
    confluent_config,
    grant,
    has_topic,
    kafka_python_config,
    nested,
    req,
    sasl_socket,
    topic_id,
)


@pytest.fixture
def broker(tmp_path):
    with authorizing_broker(tmp_path / "data", **{"num.partitions": "1"}) as running:
        create_topics(running, "t", "u")
        yield running


def create_topics(broker: Broker, *names: str) -> None:
    admin = AdminClient(confluent_config(broker, "admin"))  # a super user: needs no ACL
    for future in admin.create_topics([NewTopic(n, 1) for n in names]).values():
        future.result(TIMEOUT_S)


def log_end(broker: Broker, topic: str) -> int:
    return int(broker.server.log_manager.get_log(topic, 0).log_end_offset)


def batch(n: int = 1, *, transactional: bool = False) -> bytes:
    producer = {"producer_id": 4000, "producer_epoch": 0, "base_sequence": 0} if transactional else {}
    builder = MemoryRecordsBuilder(
        2, CompressionType.NONE, TimestampType.CREATE_TIME, 0, is_transactional=transactional, **producer
    )
    for i in range(n):
        builder.append(1_700_000_000_000 + i, b"k", b"v%d" % i)
    return bytes(builder.build().to_bytes())


# -- raw requests ----------------------------------------------------------------------------------


def produce_req(
    topics: dict[Any, bytes], *, version: int = 9, acks: int = -1, transactional_id: str | None = None
) -> Any:
    """Partition 0 of each topic (a name, or an id from v13) with its records."""
    data = tuple(
        nested(
            ApiKey.PRODUCE,
            version,
            "TopicProduceData",
            name=key,
            topic_id=key,
            partition_data=(
                nested(ApiKey.PRODUCE, version, "PartitionProduceData", index=0, records=records),
            ),
        )
        for key, records in topics.items()
    )
    return req(
        ApiKey.PRODUCE,
        version,
        transactional_id=transactional_id,
        acks=acks,
        timeout=5 * SECOND,
        topic_data=data,
    )


def produced(response: Any) -> dict[Any, tuple[int, str | None]]:
    """(error, message) of partition 0 by topic name (by id from v13), in response order."""
    return {
        (t.topic_id if getattr(t, "name", None) is None else t.name): (
            int(t.partition_responses[0].error_code),
            t.partition_responses[0].error_message,
        )
        for t in response.responses
    }


def fetch_req(*topics: Any, version: int = 12, replica_id: int = -1, session_id: int = 0,
              session_epoch: int = -1) -> Any:
    """Partition 0 of each topic (a name, or an id from v13) from offset 0."""
    partition = nested(
        ApiKey.FETCH,
        version,
        "FetchPartition",
        partition=0,
        current_leader_epoch=-1,
        fetch_offset=0,
        last_fetched_epoch=-1,
        log_start_offset=-1,
        partition_max_bytes=1 << 20,
    )
    return req(
        ApiKey.FETCH,
        version,
        replica_id=replica_id,
        max_wait=datetime.timedelta(milliseconds=0),
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=session_id,
        session_epoch=session_epoch,
        topics=tuple(
            nested(ApiKey.FETCH, version, "FetchTopic", topic=t, topic_id=t, partitions=(partition,))
            for t in topics
        ),
        forgotten_topics_data=(),
        rack_id="",
    )


def fetched(response: Any) -> dict[Any, tuple[int, int]]:
    """(error, high watermark) of partition 0 by topic name (by id from v13)."""
    return {
        (t.topic_id if getattr(t, "topic", None) is None else t.topic): (
            int(t.partitions[0].error_code),
            int(t.partitions[0].high_watermark),
        )
        for t in response.responses
    }


def metadata_req(
    topics: list[str] | None,
    *,
    version: int = 12,
    allow_create: bool = False,
    ids: list[uuid.UUID] | None = None,
    topic_operations: bool = False,
    cluster_operations: bool = False,
) -> Any:
    requested = None
    if topics is not None or ids is not None:
        requested = tuple(
            nested(ApiKey.METADATA, version, "MetadataRequestTopic", name=n, topic_id=None)
            for n in topics or ()
        ) + tuple(
            nested(ApiKey.METADATA, version, "MetadataRequestTopic", name=None, topic_id=i) for i in ids or ()
        )
    return req(
        ApiKey.METADATA,
        version,
        topics=requested,
        allow_auto_topic_creation=allow_create,
        include_topic_authorized_operations=topic_operations,
        include_cluster_authorized_operations=cluster_operations,
    )


def described(response: Any) -> list[tuple[str | None, int, uuid.UUID | None]]:
    """(name, error, topic id) of each topic, in response order; internal topics left out."""
    return [
        (t.name, int(t.error_code), getattr(t, "topic_id", None))
        for t in response.topics
        if not (t.name or "").startswith("__")
    ]


def list_offsets_req(*topics: str, version: int = 7) -> Any:
    partition = nested(
        ApiKey.LIST_OFFSETS,
        version,
        "ListOffsetsPartition",
        partition_index=0,
        current_leader_epoch=-1,
        timestamp=-1,
    )
    return req(
        ApiKey.LIST_OFFSETS,
        version,
        replica_id=-1,
        isolation_level=0,
        topics=tuple(
            nested(ApiKey.LIST_OFFSETS, version, "ListOffsetsTopic", name=t, partitions=(partition,))
            for t in topics
        ),
        timeout=5 * SECOND,
    )


def by_topic(response: Any, name: str = "name") -> list[tuple[str, int, int]]:
    """(topic, error, offset-like value) of partition 0 of each topic, in response order."""
    out = []
    for t in response.topics:
        p = t.partitions[0]
        value = getattr(p, "offset", getattr(p, "end_offset", getattr(p, "low_watermark", None)))
        out.append((getattr(t, name), int(p.error_code), int(value)))
    return out


def offset_for_epoch_req(*topics: str, version: int = 4) -> Any:
    partition = nested(
        ApiKey.OFFSET_FOR_LEADER_EPOCH,
        version,
        "OffsetForLeaderPartition",
        partition=0,
        current_leader_epoch=-1,
        leader_epoch=0,
    )
    return req(
        ApiKey.OFFSET_FOR_LEADER_EPOCH,
        version,
        replica_id=-1,
        topics=tuple(
            nested(
                ApiKey.OFFSET_FOR_LEADER_EPOCH,
                version,
                "OffsetForLeaderTopic",
                topic=t,
                partitions=(partition,),
            )
            for t in topics
        ),
    )


def delete_records_req(offsets: dict[str, int], version: int = 2) -> Any:
    return req(
        ApiKey.DELETE_RECORDS,
        version,
        topics=tuple(
            nested(
                ApiKey.DELETE_RECORDS,
                version,
                "DeleteRecordsTopic",
                name=t,
                partitions=(
                    nested(
                        ApiKey.DELETE_RECORDS, version, "DeleteRecordsPartition", partition_index=0, offset=o
                    ),
                ),
            )
            for t, o in offsets.items()
        ),
        timeout=5 * SECOND,
    )


def describe_producers_req(*topics: str) -> Any:
    return req(
        ApiKey.DESCRIBE_PRODUCERS,
        0,
        topics=tuple(
            nested(ApiKey.DESCRIBE_PRODUCERS, 0, "TopicRequest", name=t, partition_indexes=(0,))
            for t in topics
        ),
    )


def describe_partitions_req(*topics: str, limit: int = 2000, cursor: tuple[str, int] | None = None) -> Any:
    return req(
        ApiKey.DESCRIBE_TOPIC_PARTITIONS,
        0,
        topics=tuple(nested(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, "TopicRequest", name=t) for t in topics),
        response_partition_limit=limit,
        cursor=None
        if cursor is None
        else nested(
            ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, "Cursor", topic_name=cursor[0], partition_index=cursor[1]
        ),
    )


def bits(*operations: AclOperation) -> int:
    return sum(1 << op for op in operations)


def poll_records(consumer: Any, want: int) -> list[bytes]:
    """Values kafka-python's consumer returns, until ``want`` of them (bounded)."""
    values: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT_S
    while len(values) < want and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            values.extend(r.value for r in records)
    return values


# -- Produce ---------------------------------------------------------------------------------------


def test_producing_needs_write_on_the_topic(broker):
    grant(broker, acl(T, "t", ALICE, Op.WRITE), acl(T, "t", BOB, Op.DESCRIBE))
    alice = KafkaProducer(max_block_ms=10_000, **kafka_python_config(broker, "alice"))
    assert alice.send("t", b"hello", partition=0).get(TIMEOUT_S).offset == 0
    alice.close(TIMEOUT_S)

    # bob may see the topic (Metadata) but not write it: the Produce itself is refused
    bob = KafkaProducer(max_block_ms=10_000, enable_idempotence=False, **kafka_python_config(broker, "bob"))
    with pytest.raises(kafka_errors.TopicAuthorizationFailedError):
        bob.send("t", b"denied", partition=0).get(TIMEOUT_S)
    bob.close(TIMEOUT_S)

    reports: list[Any] = []
    confluent_bob = ck.Producer(confluent_config(broker, "bob"))
    confluent_bob.produce("t", b"denied too", partition=0, on_delivery=lambda err, msg: reports.append(err))
    assert confluent_bob.flush(TIMEOUT_S) == 0
    assert [e.code() for e in reports] == [ck.KafkaError.TOPIC_AUTHORIZATION_FAILED]
    assert log_end(broker, "t") == 1  # nothing of bob's was appended


def test_produce_errors_per_partition(broker):
    grant(broker, acl(T, "t", ALICE, Op.WRITE))
    t_id, u_id, unknown_id = topic_id(broker, "t"), topic_id(broker, "u"), uuid.uuid4()
    by_name, by_id = call(
        broker,
        "alice",
        # a topic that may not be written says nothing of whether it exists
        produce_req({"t": batch(2), "u": batch(), "no-such-topic": batch()}),
        produce_req({t_id: batch(), u_id: batch(), unknown_id: batch()}, version=13),
    )
    assert produced(by_name) == {
        "t": (E.none, None),
        "u": (E.topic_authorization_failed, None),
        "no-such-topic": (E.topic_authorization_failed, None),
    }
    # by id, an id that names no topic is UNKNOWN_TOPIC_ID before anything is authorized
    assert {key: code for key, (code, _) in produced(by_id).items()} == {
        t_id: E.none,
        u_id: E.topic_authorization_failed,
        unknown_id: E.unknown_topic_id,
    }
    assert (log_end(broker, "t"), log_end(broker, "u")) == (3, 0)

    # acks=0 expects no answer: a refused partition closes the connection, as any failed acks=0 does
    with sasl_socket(broker, "alice") as sock:
        request = produce_req({"u": batch()}, acks=0)
        _raw.send_frame(sock, _raw.header(0, 9, 30) + _raw.encode_body(request))
        assert _raw.is_closed(sock)
    with sasl_socket(broker, "alice") as sock:
        _raw.send_frame(sock, _raw.header(0, 9, 31) + _raw.encode_body(produce_req({"t": batch()}, acks=0)))
        assert _raw.request(sock, produce_req({"t": batch()}), correlation_id=32)  # still open
    assert (log_end(broker, "t"), log_end(broker, "u")) == (5, 0)


def test_transactional_records_need_write_on_the_transactional_id(broker):
    grant(broker, acl(T, "t", ALICE, Op.WRITE), acl(T, "u", ALICE, Op.WRITE))
    # ApiError.fromThrowable drops the error's default text: no message
    refused = (E.transactional_id_authorization_failed, None)
    no_txn_acl, no_txn_id, plain = call(
        broker,
        "alice",
        produce_req({"t": batch(transactional=True), "u": batch()}, transactional_id="tx"),
        produce_req({"t": batch(transactional=True)}),
        # a transactional id on records that are not transactional asks nothing of it
        produce_req({"u": batch()}, transactional_id="tx"),
    )
    assert produced(no_txn_acl) == {"t": refused, "u": refused}  # the whole request fails
    assert produced(no_txn_id) == {"t": refused}
    assert produced(plain) == {"u": (E.none, None)}
    assert (log_end(broker, "t"), log_end(broker, "u")) == (0, 1)

    grant(broker, acl(TX, "tx", ALICE, Op.WRITE))
    (allowed,) = call(broker, "alice", produce_req({"t": batch(transactional=True)}, transactional_id="tx"))
    # past authorization: the transaction coordinator knows no such producer
    assert produced(allowed)["t"][0] not in (E.none, E.transactional_id_authorization_failed)

    # acks=0: no answer can carry the error, so the connection closes
    with sasl_socket(broker, "alice") as sock:
        request = produce_req({"t": batch(transactional=True)}, transactional_id="other", acks=0)
        _raw.send_frame(sock, _raw.header(0, 9, 40) + _raw.encode_body(request))
        assert _raw.is_closed(sock)


def test_prefixed_acls_and_deny_winning_over_allow(broker):
    create_topics(broker, "team-a", "team-secret")
    grant(
        broker,
        acl(T, "team-", ALICE, Op.WRITE, pattern=PREFIXED),
        acl(T, "team-", ALICE, Op.READ, pattern=PREFIXED),
        acl(T, "team-secret", ALICE, Op.READ, DENY),
        acl(T, "team-secret", "User:*", Op.WRITE, DENY),
    )
    producer = KafkaProducer(max_block_ms=10_000, **kafka_python_config(broker, "alice"))
    assert producer.send("team-a", b"a", partition=0).get(TIMEOUT_S).offset == 0
    with pytest.raises(kafka_errors.TopicAuthorizationFailedError):
        producer.send("team-secret", b"s", partition=0).get(TIMEOUT_S)
    producer.close(TIMEOUT_S)
    (response,) = call(
        broker, "alice", produce_req({"team-a": batch(), "team-secret": batch(), "t": batch()})
    )
    assert {t: code for t, (code, _) in produced(response).items()} == {
        "team-a": E.none,
        "team-secret": E.topic_authorization_failed,
        "t": E.topic_authorization_failed,  # no prefix of it is granted
    }
    (response,) = call(broker, "alice", fetch_req("team-a", "team-secret"))
    assert fetched(response) == {"team-a": (E.none, 2), "team-secret": (E.topic_authorization_failed, -1)}


# -- Fetch -----------------------------------------------------------------------------------------


def test_consuming_needs_read_on_the_topic(broker):
    call(broker, "admin", produce_req({"t": batch(3)}))
    # librdkafka looks its group's coordinator up even to assign(): let everyone use that group
    grant(broker, acl(T, "t", ALICE, Op.READ), acl(T, "t", BOB, Op.DESCRIBE), acl(G, "g", "User:*", Op.READ))
    tp = TopicPartition("t", 0)

    def consumer(user: str) -> KafkaConsumer:
        c = KafkaConsumer(
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            **kafka_python_config(broker, user),
        )
        c.assign([tp])
        return c

    alice = consumer("alice")
    assert poll_records(alice, 3) == [b"v0", b"v1", b"v2"]
    alice.close()

    bob = consumer("bob")
    with pytest.raises(kafka_errors.TopicAuthorizationFailedError):
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            bob.poll(timeout_ms=500)
    bob.close()

    def confluent_poll(user: str) -> Any:
        c = ck.Consumer({**confluent_config(broker, user), "group.id": "g", "enable.auto.commit": False})
        c.assign([ck.TopicPartition("t", 0, 0)])  # an explicit offset: no committed offset to fetch
        try:
            deadline = time.monotonic() + TIMEOUT_S
            while time.monotonic() < deadline:
                message = c.poll(0.5)
                if message is not None:
                    return message
            raise AssertionError("no message or error")
        finally:
            c.close()

    assert confluent_poll("alice").value() == b"v0"
    error = confluent_poll("bob").error()
    assert error is not None and error.code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_fetch_errors_per_partition(broker):
    call(broker, "admin", produce_req({"t": batch(), "u": batch()}))
    grant(broker, acl(T, "t", ALICE, Op.READ))
    unknown_id = uuid.uuid4()
    by_name, by_id, incremental = call(
        broker,
        "alice",
        fetch_req("t", "u", "no-such-topic"),
        fetch_req(topic_id(broker, "t"), topic_id(broker, "u"), unknown_id, version=13),
        fetch_req("u", session_id=7, session_epoch=3),  # looked up before anything is authorized
    )
    assert fetched(by_name) == {
        "t": (E.none, 1),
        "u": (E.topic_authorization_failed, -1),
        "no-such-topic": (E.topic_authorization_failed, -1),  # not UNKNOWN_TOPIC_OR_PARTITION
    }
    assert by_name.responses[1].partitions[0].records in (None, b"")
    assert fetched(by_id) == {
        topic_id(broker, "t"): (E.none, 1),
        topic_id(broker, "u"): (E.topic_authorization_failed, -1),
        unknown_id: (E.unknown_topic_id, -1),
    }
    assert incremental.error_code == E.fetch_session_id_not_found


def test_a_follower_fetch_needs_cluster_action(broker):
    grant(broker, acl(T, "t", ALICE, Op.READ), acl(C, "kafka-cluster", BOB, Op.CLUSTER_ACTION))
    (alice,) = call(broker, "alice", fetch_req("t", "u", replica_id=1))
    # a follower without CLUSTER_ACTION: every partition refused, READ or not
    assert alice.error_code == E.none
    assert fetched(alice) == {
        "t": (E.topic_authorization_failed, -1),
        "u": (E.topic_authorization_failed, -1),
    }
    # with it, past authorization: this node has no followers, so each partition fails as Kafka's
    # Partition.fetchRecords fails for a replica it does not know
    for user in ("bob", "admin"):
        (response,) = call(broker, user, fetch_req("t", "no-such-topic", replica_id=1))
        assert response.error_code == E.none
        assert fetched(response) == {"t": (E.not_leader_or_follower, -1),
                                     "no-such-topic": (E.unknown_topic_or_partition, -1)}


# -- Metadata --------------------------------------------------------------------------------------


def test_metadata_lists_only_describable_topics(broker):
    grant(broker, acl(T, "t", ALICE, Op.DESCRIBE))
    everything, named, by_id, operations, v0_all = call(
        broker,
        "alice",
        metadata_req(None),
        metadata_req(["t", "u", "no-such-topic"]),
        metadata_req([], ids=[topic_id(broker, "u"), topic_id(broker, "t"), uuid.UUID(int=5)]),
        metadata_req(["t", "u"], version=9, topic_operations=True, cluster_operations=True),
        metadata_req([], version=0),
    )
    assert described(everything) == [("t", E.none, topic_id(broker, "t"))]
    assert [(n, e) for n, e, _ in described(v0_all)] == [("t", E.none)]
    # by name: refused without an id, whether the topic exists or not
    assert described(named) == [
        ("t", E.none, topic_id(broker, "t")),
        ("u", E.topic_authorization_failed, None),
        ("no-such-topic", E.topic_authorization_failed, None),
    ]
    assert named.topics[1].partitions == ()
    # by id: an id is no secret, the name is
    assert described(by_id) == [
        (None, E.topic_authorization_failed, topic_id(broker, "u")),
        ("t", E.none, topic_id(broker, "t")),
        (None, E.unknown_topic_id, uuid.UUID(int=5)),
    ]
    # authorized operations: DESCRIBE on t; none asked of u (it was refused); the cluster's are 0
    # for a principal that may not describe it
    assert [t.topic_authorized_operations for t in operations.topics] == [bits(Op.DESCRIBE), NOT_REQUESTED]
    assert operations.cluster_authorized_operations == 0
    (admin_ops,) = call(
        broker, "admin", metadata_req(["u"], version=9, topic_operations=True, cluster_operations=True)
    )
    assert admin_ops.topics[0].topic_authorized_operations == bits(*SUPPORTED_OPERATIONS[T])
    assert admin_ops.cluster_authorized_operations == bits(*SUPPORTED_OPERATIONS[C])

    # what the clients make of it
    kp_admin = KafkaAdminClient(request_timeout_ms=10_000, **kafka_python_config(broker, "alice"))
    assert [t for t in kp_admin.list_topics() if not t.startswith("__")] == ["t"]
    kp_admin.close()
    cluster = AdminClient(confluent_config(broker, "alice")).list_topics(timeout=TIMEOUT_S)
    assert set(cluster.topics) == {"t"}
    cluster = AdminClient(confluent_config(broker, "bob")).list_topics(timeout=TIMEOUT_S)
    assert set(cluster.topics) == set()


def test_auto_creation_needs_create_on_the_cluster_or_the_topic(broker):
    grant(
        broker,
        acl(T, "new-", ALICE, Op.DESCRIBE, pattern=PREFIXED),
        acl(T, "made-by-", ALICE, Op.CREATE, pattern=PREFIXED),
    )
    (response,) = call(broker, "alice", metadata_req(["new-1", "made-by-alice"], allow_create=True))
    # new-1: describable but not creatable; made-by-alice: creatable but not describable
    assert described(response) == [
        ("new-1", E.topic_authorization_failed, None),
        ("made-by-alice", E.topic_authorization_failed, None),
    ]
    assert not has_topic(broker, "new-1") and not has_topic(broker, "made-by-alice")

    grant(broker, acl(T, "new-1", ALICE, Op.CREATE))
    (response,) = call(broker, "alice", metadata_req(["new-1", "new-2"], allow_create=True))
    assert [(n, e) for n, e, _ in described(response)] == [
        ("new-1", E.none),
        ("new-2", E.topic_authorization_failed),
    ]
    assert has_topic(broker, "new-1") and not has_topic(broker, "new-2")
    # without asking for creation, a describable missing topic is simply unknown
    (response,) = call(broker, "alice", metadata_req(["new-2"]))
    assert [(n, e) for n, e, _ in described(response)] == [("new-2", E.unknown_topic_or_partition)]

    # CREATE on the cluster covers every topic; a real producer auto-creates through it
    grant(broker, acl(C, "kafka-cluster", BOB, Op.CREATE), acl(T, "auto-", BOB, Op.WRITE, pattern=PREFIXED))
    producer = KafkaProducer(max_block_ms=10_000, **kafka_python_config(broker, "bob"))
    assert producer.send("auto-topic", b"x").get(TIMEOUT_S).offset == 0
    producer.close(TIMEOUT_S)
    assert has_topic(broker, "auto-topic")


def test_describe_topic_partitions_needs_describe(broker):
    create_topics(broker, "a", "b", "c")
    grant(broker, acl(T, "a", ALICE, Op.DESCRIBE), acl(T, "c", ALICE, Op.READ))
    everything, named, page = call(
        broker,
        "alice",
        describe_partitions_req(),
        describe_partitions_req("c", "b", "no-such-topic", "a"),
        describe_partitions_req("a", "b", "c", limit=1),
    )
    assert [(t.name, t.error_code) for t in everything.topics] == [("a", E.none), ("c", E.none)]
    # the refused ones last, without an id, existing or not
    assert [(t.name, t.error_code, t.topic_id) for t in named.topics] == [
        ("a", E.none, topic_id(broker, "a")),
        ("c", E.none, topic_id(broker, "c")),
        ("b", E.topic_authorization_failed, None),
        ("no-such-topic", E.topic_authorization_failed, None),
    ]
    assert named.topics[1].topic_authorized_operations == bits(Op.READ, Op.DESCRIBE)
    assert named.topics[2].topic_authorized_operations == NOT_REQUESTED
    # a page ends at a: b (refused) is decided on the way to the next page's first topic, c
    assert [(t.name, t.error_code) for t in page.topics] == [
        ("a", E.none),
        ("b", E.topic_authorization_failed),
    ]
    assert (page.next_cursor.topic_name, page.next_cursor.partition_index) == ("c", 0)

    kp_admin = KafkaAdminClient(request_timeout_ms=10_000, **kafka_python_config(broker, "alice"))
    topics = kp_admin.describe_topic_partitions(["a", "b"])
    kp_admin.close()
    errors = {t["name"]: t["error_code"] for t in topics["topics"]}
    assert errors == {"a": E.none, "b": E.topic_authorization_failed}


# -- ListOffsets, OffsetForLeaderEpoch -------------------------------------------------------------


def test_list_offsets_needs_describe(broker):
    call(broker, "admin", produce_req({"t": batch(2), "u": batch(3)}))
    grant(broker, acl(T, "t", ALICE, Op.DESCRIBE))
    (response,) = call(broker, "alice", list_offsets_req("no-such-topic", "u", "t"))
    # the authorized topics first, as Kafka answers
    assert by_topic(response) == [
        ("t", E.none, 2),
        ("no-such-topic", E.topic_authorization_failed, -1),
        ("u", E.topic_authorization_failed, -1),
    ]
    assert response.topics[1].partitions[0].timestamp == -1

    consumer = KafkaConsumer(**kafka_python_config(broker, "alice"))
    assert consumer.end_offsets([TopicPartition("t", 0)]) == {TopicPartition("t", 0): 2}
    consumer.close()


def test_offset_for_leader_epoch_needs_describe_or_cluster_action(broker):
    call(broker, "admin", produce_req({"t": batch(2), "u": batch(3)}))
    grant(broker, acl(T, "t", ALICE, Op.READ), acl(C, "kafka-cluster", BOB, Op.CLUSTER_ACTION))
    (alice,) = call(broker, "alice", offset_for_epoch_req("u", "t", "no-such-topic"))
    assert by_topic(alice, "topic") == [
        ("t", E.none, 2),
        ("u", E.topic_authorization_failed, -1),
        ("no-such-topic", E.topic_authorization_failed, -1),
    ]
    # CLUSTER_ACTION (a follower's right) covers every topic
    (bob,) = call(broker, "bob", offset_for_epoch_req("u", "t"))
    assert by_topic(bob, "topic") == [("u", E.none, 3), ("t", E.none, 2)]


# -- DeleteRecords, DescribeProducers --------------------------------------------------------------


def test_delete_records_needs_delete(broker):
    call(broker, "admin", produce_req({"t": batch(4), "u": batch(4)}))
    grant(broker, acl(T, "t", ALICE, Op.READ), acl(T, "u", ALICE, Op.DELETE))
    (response,) = call(broker, "alice", delete_records_req({"t": 2, "u": 1, "no-such-topic": 1}))
    assert by_topic(response) == [
        ("t", E.topic_authorization_failed, -1),
        ("u", E.none, 1),
        ("no-such-topic", E.topic_authorization_failed, -1),
    ]
    assert broker.server.log_manager.get_log("t", 0).log_start_offset == 0

    admin = AdminClient(confluent_config(broker, "alice"))
    futures = admin.delete_records([ck.TopicPartition("u", 0, 3), ck.TopicPartition("t", 0, 3)])
    assert futures[ck.TopicPartition("u", 0)].result(TIMEOUT_S).low_watermark == 3
    with pytest.raises(ck.KafkaException) as refused:
        futures[ck.TopicPartition("t", 0)].result(TIMEOUT_S)
    assert refused.value.args[0].code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_describe_producers_needs_read(broker):
    grant(broker, acl(T, "t", ALICE, Op.READ), acl(T, "u", ALICE, Op.DESCRIBE))
    (response,) = call(broker, "alice", describe_producers_req("t", "u", "no-such-topic", "bad name"))
    answers = [(t.name, t.partitions[0].error_code, t.partitions[0].error_message) for t in response.topics]
    assert answers[:3] == [
        ("t", E.none, None),
        ("u", E.topic_authorization_failed, "Topic authorization failed."),  # DESCRIBE is not enough
        ("no-such-topic", E.topic_authorization_failed, "Topic authorization failed."),
    ]
    # an invalid name is refused as such before anything is authorized
    assert answers[3][:2] == ("bad name", E.invalid_topic_exception)


# -- who --------------------------------------------------------------------------------------------


def test_the_super_user_needs_no_acl(broker):
    producer = KafkaProducer(max_block_ms=10_000, **kafka_python_config(broker, "admin"))
    assert producer.send("t", b"x", partition=0).get(TIMEOUT_S).offset == 0
    producer.close(TIMEOUT_S)
    consumer = KafkaConsumer(
        group_id=None,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        **kafka_python_config(broker, "admin"),
    )
    consumer.assign([TopicPartition("t", 0)])
    assert poll_records(consumer, 1) == [b"x"]
    consumer.close()
    everything, deleted, producers, offsets = call(
        broker,
        "admin",
        metadata_req(None),
        delete_records_req({"t": 1}),
        describe_producers_req("t"),
        offset_for_epoch_req("t"),
    )
    assert [n for n, _, _ in described(everything)] == ["t", "u"]
    assert by_topic(deleted) == [("t", E.none, 1)]
    assert producers.topics[0].partitions[0].error_code == E.none
    assert by_topic(offsets, "topic") == [("t", E.none, 1)]


def test_anonymous_on_the_plaintext_listener_is_denied_by_default(broker):
    bootstrap = f"127.0.0.1:{broker.server.bound_ports['PLAINTEXT']}"
    with _raw.connect(bootstrap) as sock:
        everything = _raw.request(sock, metadata_req(None))
        produce = _raw.request(sock, produce_req({"t": batch()}), correlation_id=2)
    assert described(everything) == []
    assert produced(produce) == {"t": (E.topic_authorization_failed, None)}

    grant(broker, acl(T, "t", "User:ANONYMOUS", Op.WRITE))
    producer = KafkaProducer(bootstrap_servers=bootstrap, max_block_ms=10_000)
    assert producer.send("t", b"anonymous", partition=0).get(TIMEOUT_S).offset == 0
    producer.close(TIMEOUT_S)
    assert log_end(broker, "t") == 1


def test_allow_everyone_if_no_acl_found(tmp_path):
    with authorizing_broker(tmp_path / "data", **{"allow.everyone.if.no.acl.found": "true"}) as broker:
        create_topics(broker, "open", "guarded")
        grant(broker, acl(T, "guarded", ALICE, Op.ALL))
        # no ACL speaks of "open": anyone may; "guarded" has ACLs, none for bob
        producer = KafkaProducer(
            max_block_ms=10_000, enable_idempotence=False, **kafka_python_config(broker, "bob")
        )
        assert producer.send("open", b"x", partition=0).get(TIMEOUT_S).offset == 0
        producer.close(TIMEOUT_S)
        everything, produce, fetch = call(
            broker,
            "bob",
            metadata_req(None),
            produce_req({"open": batch(), "guarded": batch()}),
            fetch_req("open", "guarded"),
        )
        assert [n for n, _, _ in described(everything)] == ["open"]
        assert {t: code for t, (code, _) in produced(produce).items()} == {
            "open": E.none,
            "guarded": E.topic_authorization_failed,
        }
        assert fetched(fetch) == {"open": (E.none, 2), "guarded": (E.topic_authorization_failed, -1)}
        (alice,) = call(broker, "alice", produce_req({"guarded": batch()}))
        assert produced(alice) == {"guarded": (E.none, None)}
