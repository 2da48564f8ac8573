"""ListOffsets answers what the storage engine says; Metadata auto-creates with num.partitions and
returns topic ids that stay the same across restarts, and each partition's leader epoch (its log's);
meta.properties is KRaft-style."""

from __future__ import annotations

from datetime import timedelta

import kafka
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as CkTopicPartition
from kio.schema.errors import ErrorCode

from kafkalog.broker import Broker
from kafkalog.records.memory import MemoryRecordsBuilder
from kafkalog.records.types import CompressionType, TimestampType
from kafkalog.storage.log_manager import LogManager
from kafkalog.storage.metadata_files import read_meta_properties
from tests.broker import _raw
from tests.broker.test_fetch import _fetch
from tests.broker.test_produce_errors import _batch, _create, _produce


def _list_offsets(sock, topic, timestamps, version=7, isolation_level=0):
    cls, mod = _raw.request_class(2, version)
    extra = {"current_leader_epoch": -1} if version >= 4 else {}
    partitions = tuple(mod.ListOffsetsPartition(partition_index=0, timestamp=t, **extra) for t in timestamps)
    values = dict(
        replica_id=-1,
        isolation_level=isolation_level,
        topics=(mod.ListOffsetsTopic(name=topic, partitions=partitions),),
        timeout=timedelta(seconds=5),
    )
    fields = set(cls.__dataclass_fields__)
    response = _raw.request(sock, cls(**{k: v for k, v in values.items() if k in fields}))
    return response.topics[0].partitions


def test_list_offsets_matches_storage(tmp_path):
    with Broker(tmp_path) as broker, _raw.connect(broker.bootstrap_servers) as sock:
        _create(sock, "ts")
        base = 1_700_000_000_000
        for i in range(6):  # timestamps base, base+1000, ...; one batch of 3 records each
            _produce(sock, "ts", _batch(3, timestamp=base + i * 1000))
        log = broker.server.log_manager.get_log("ts", 0)
        targets = [base - 5, base, base + 1, base + 2500, base + 5002, base + 9999, -1, -2, -3]
        for version in (1, 4, 7, 11):
            for target in targets:  # one request each: a partition named twice is INVALID_REQUEST
                (answer,) = _list_offsets(sock, "ts", [target], version=version)
                if target == -3 and version < 7:  # MAX_TIMESTAMP came with v7
                    assert answer.error_code == ErrorCode.unsupported_version
                    continue
                assert answer.error_code == ErrorCode.none
                if target == -1:
                    assert answer.offset == log.log_end_offset == 18
                    continue
                found = log.offset_for_timestamp(target)
                expected = (-1, -1) if found is None else (found.timestamp, found.offset)
                assert (answer.timestamp, answer.offset) == expected, (version, target)
        # a real client's offsets_for_times agrees
        consumer = kafka.KafkaConsumer(bootstrap_servers=broker.bootstrap_servers)
        tp = kafka.TopicPartition("ts", 0)
        got = consumer.offsets_for_times({tp: base + 2500})[tp]
        assert (got.offset, got.timestamp) == (9, base + 3000)
        assert consumer.end_offsets([tp])[tp] == 18 and consumer.beginning_offsets([tp])[tp] == 0
        consumer.close()
        unknown = _list_offsets(sock, "nope", [-1])
        assert unknown[0].error_code == ErrorCode.unknown_topic_or_partition


def _list_offsets_of(sock, version, asked, current_leader_epoch=-1):
    """ListOffsets of [(topic, [(partition, timestamp), ...]), ...] as asked (duplicates included)."""
    cls, mod = _raw.request_class(2, version)
    extra = {"current_leader_epoch": current_leader_epoch} if version >= 4 else {}
    topics = tuple(
        mod.ListOffsetsTopic(name=topic, partitions=tuple(
            mod.ListOffsetsPartition(partition_index=p, timestamp=t, **extra) for p, t in partitions))
        for topic, partitions in asked
    )
    values = dict(replica_id=-1, isolation_level=0, topics=topics, timeout=timedelta(seconds=5))
    fields = set(cls.__dataclass_fields__)
    response = _raw.request(sock, cls(**{k: v for k, v in values.items() if k in fields}))
    return [(t.name, [(p.partition_index, p.error_code, p.timestamp, p.offset) for p in t.partitions])
            for t in response.topics]


def test_list_offsets_refuses_what_kafkas_replica_manager_refuses(tmp_path):
    """Each special timestamp from the version that brought it (-3 v7, -4 v8, -5 v9, -6 v11), any
    other negative one never; a partition named twice INVALID_REQUEST, answered once; one entry per
    partition, grouped by topic."""
    broker = Broker(tmp_path, configs={"num.partitions": 2})
    with broker, _raw.connect(broker.bootstrap_servers) as sock:
        _create(sock, "ts")
        for _ in range(2):
            _produce(sock, "ts", _batch(3, timestamp=1_700_000_000_000))
        none, unsupported = ErrorCode.none, ErrorCode.unsupported_version
        first_version = {-3: 7, -4: 8, -5: 9, -6: 11}
        for version in range(1, 12):
            for timestamp, since in first_version.items():
                ((_, [(_, error, ts, offset)]),) = _list_offsets_of(sock, version, [("ts", [(0, timestamp)])])
                if version < since:
                    assert (error, ts, offset) == (unsupported, -1, -1), (version, timestamp)
                else:
                    # -3: the first record with the largest timestamp (the batches' records are 0, 1
                    # and 2 ms apart); -4 is the log start here; -5 and -6 are -1 without tiered storage
                    expected = {-3: (none, 1_700_000_000_002, 2), -4: (none, -1, 0), -5: (none, -1, -1),
                                -6: (none, -1, -1)}[timestamp]
                    assert (error, ts, offset) == expected, (version, timestamp)
            for timestamp in (-7, -100, -(2**63)):
                ((_, [(_, error, _, _)]),) = _list_offsets_of(sock, version, [("ts", [(0, timestamp)])])
                assert error == unsupported, (version, timestamp)
        # -2 and -4 answer the log start even where nothing is fetchable (the empty partition 1):
        # Kafka's filter by the last fetchable offset leaves both out.
        for timestamp in (-2, -4):
            assert _list_offsets_of(sock, 8, [("ts", [(1, timestamp)])]) == [("ts", [(1, none, -1, 0)])]
        # partition 0 twice (across two entries of the topic): INVALID_REQUEST, once; partition 1 answered
        answer = _list_offsets_of(sock, 7, [("ts", [(0, -1), (1, -2)]), ("ts", [(0, -2)])])
        assert answer == [("ts", [(0, ErrorCode.invalid_request, -1, -1), (1, none, -1, 0)])]
        answer = _list_offsets_of(sock, 7, [("ts", [(1, -1)]), ("nope", [(0, -1)]), ("ts", [(0, -1)])])
        assert answer == [("ts", [(1, none, -1, 0), (0, none, -1, 6)]),
                          ("nope", [(0, ErrorCode.unknown_topic_or_partition, -1, -1)])]


def _metadata(sock, topics, version=12, allow=True):
    cls, mod = _raw.request_class(3, version)
    requested = (
        None
        if topics is None
        else tuple(
            mod.MetadataRequestTopic(**({"topic_id": None} if version >= 10 else {}), name=t) for t in topics
        )
    )
    values = dict(
        topics=requested,
        allow_auto_topic_creation=allow,
        include_topic_authorized_operations=False,
        include_cluster_authorized_operations=False,
    )
    fields = set(cls.__dataclass_fields__)
    return _raw.request(sock, cls(**{k: v for k, v in values.items() if k in fields}))


def test_metadata_auto_create_ids_and_restart(tmp_path):
    first = Broker(tmp_path, configs={"num.partitions": 4, "node.id": 7})
    with first as broker, _raw.connect(broker.bootstrap_servers) as sock:
        response = _metadata(sock, ["auto"])
        (topic,) = response.topics
        assert topic.error_code == ErrorCode.none
        assert [p.partition_index for p in topic.partitions] == [0, 1, 2, 3]
        assert {p.leader_id for p in topic.partitions} == {7}
        assert response.controller_id == 7 and response.brokers[0].node_id == 7
        assert response.brokers[0].port == broker.port
        topic_id, cluster_id = topic.topic_id, response.cluster_id
        assert topic_id.int != 0
        refused = _metadata(sock, ["not-created"], allow=False).topics[0]
        assert refused.error_code == ErrorCode.unknown_topic_or_partition
        invalid = _metadata(sock, ["bad/name"]).topics[0]
        assert invalid.error_code == ErrorCode.invalid_topic_exception
        assert [t.name for t in _metadata(sock, None).topics] == ["auto"]
        assert [t.name for t in _metadata(sock, [], version=0).topics] == ["auto"]
    meta = read_meta_properties(tmp_path / "meta.properties")
    assert (meta.version, meta.node_id, meta.cluster_id) == (1, 7, cluster_id)
    assert meta.directory_id is not None
    restarted = Broker(tmp_path, configs={"node.id": 7, "auto.create.topics.enable": "false"})
    with restarted as broker, _raw.connect(broker.bootstrap_servers) as sock:
        response = _metadata(sock, ["auto", "other"])
        assert response.topics[0].topic_id == topic_id and response.cluster_id == cluster_id
        assert response.topics[1].error_code == ErrorCode.unknown_topic_or_partition
        older = _metadata(sock, ["auto"], version=9).topics[0]
        assert len(older.partitions) == 4


def test_node_id_mismatch_is_a_startup_error(tmp_path):
    with Broker(tmp_path, configs={"node.id": 1}):
        pass
    try:
        Broker(tmp_path, configs={"node.id": 2}).start()
    except Exception as e:
        assert "node.id" in str(e) or "node id" in str(e)
    else:
        raise AssertionError("a broker with another node.id started on the directory")


def test_an_empty_partition_has_its_leader_epoch_from_the_start(tmp_path):
    """Kafka's makeLeader records the leader epoch as starting at the log end, so a partition no
    one wrote to answers OffsetForLeaderEpoch (0 ends at 0) and ListOffsets with epoch 0, and its
    leader-epoch-checkpoint holds that entry, as Kafka's does."""
    with Broker(tmp_path) as broker, _raw.connect(broker.bootstrap_servers) as sock:
        _create(sock, "fresh")
        cls, mod = _raw.request_class(23, 3)
        asked = mod.OffsetForLeaderTopic(topic="fresh", partitions=(
            mod.OffsetForLeaderPartition(partition=0, current_leader_epoch=-1, leader_epoch=0),))
        response = _raw.request(sock, cls(replica_id=-1, topics=(asked,)))
        ((partition,),) = [t.partitions for t in response.topics]
        assert (partition.error_code, partition.leader_epoch, partition.end_offset) == (ErrorCode.none, 0, 0)
        list_offsets, list_mod = _raw.request_class(2, 7)
        topics = (list_mod.ListOffsetsTopic(name="fresh", partitions=(
            list_mod.ListOffsetsPartition(partition_index=0, timestamp=-1, current_leader_epoch=-1),)),)
        answer = _raw.request(sock, list_offsets(replica_id=-1, isolation_level=0, topics=topics))
        ((found,),) = [t.partitions for t in answer.topics]
        assert (found.offset, found.leader_epoch) == (0, 0)
    assert (tmp_path / "fresh-0" / "leader-epoch-checkpoint").read_text() == "0\n1\n0 0\n"


def test_a_directory_written_at_a_later_epoch_is_served_at_it(tmp_path):
    """A data directory whose partition was last led at epoch 7 (by Kafka, say): Metadata reports
    epoch 7, the broker's appends are stamped with 7, and the epoch history stays intact for
    OffsetForLeaderEpoch -- and clients that track leader epochs (librdkafka) consume across it."""
    with LogManager(tmp_path) as manager:
        log = manager.create_topic("e", 1)[0]
        for epoch in (3, 7):
            builder = MemoryRecordsBuilder(2, CompressionType.NONE, TimestampType.CREATE_TIME, 0)
            builder.append_many([1_700_000_000_000] * 2, [b"k", b"k"], [b"old-%d" % epoch] * 2)
            log.append_as_leader(builder.build(), leader_epoch=epoch)
    with Broker(tmp_path) as broker, _raw.connect(broker.bootstrap_servers) as sock:
        (topic,) = _metadata(sock, ["e"]).topics
        assert [(p.partition_index, p.leader_epoch) for p in topic.partitions] == [(0, 7)]
        producer = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap_servers, linger_ms=0)
        producer.send("e", b"new", key=b"k", partition=0).get(15)
        producer.close(15)
        log = broker.server.log_manager.get_log("e", 0)
        stamped = [b.partition_leader_epoch for s in log.segments for b in s.log.batches()]
        assert stamped == [3, 7, 7]
        assert [(e.epoch, e.start_offset) for e in log.leader_epoch_cache.entries] == [(3, 0), (7, 2)]
        # A client's current leader epoch is checked as Kafka's Partition checks it: older is
        # fenced, newer unknown, -1 not checked -- in Fetch, ListOffsets and OffsetForLeaderEpoch.
        outcomes = {6: ErrorCode.fenced_leader_epoch, 7: ErrorCode.none, 8: ErrorCode.unknown_leader_epoch,
                    -1: ErrorCode.none}
        for current, expected in outcomes.items():
            _, fetched = _fetch(sock, "e", 0, current_leader_epoch=current)
            assert fetched.error_code == expected, current
            assert (fetched.high_watermark == 5) is (expected == ErrorCode.none)
            # v16+ (KIP-951): a fenced partition names the current leader and epoch, the response
            # the leader's endpoint
            response, fetched = _fetch(sock, None, 0, version=16, topic_id=topic.topic_id,
                                       current_leader_epoch=current)
            assert fetched.error_code == expected, current
            if expected == ErrorCode.fenced_leader_epoch:
                assert (fetched.current_leader.leader_id, fetched.current_leader.leader_epoch) == (1, 7)
                host, port = broker.bootstrap_servers.rsplit(":", 1)
                endpoints = [(n.node_id, n.host, n.port) for n in response.node_endpoints]
                assert endpoints == [(1, host, int(port))]
            else:
                assert fetched.current_leader.leader_id == -1 and response.node_endpoints == ()
            ((_, [(_, error, _, offset)]),) = _list_offsets_of(sock, 7, [("e", [(0, -1)])], current)
            assert (error, offset) == (expected, 5 if expected == ErrorCode.none else -1), current
            cls, mod = _raw.request_class(23, 3)
            asked = mod.OffsetForLeaderTopic(topic="e", partitions=(
                mod.OffsetForLeaderPartition(partition=0, current_leader_epoch=current, leader_epoch=3),))
            (result,) = _raw.request(sock, cls(replica_id=-1, topics=(asked,))).topics
            (partition,) = result.partitions
            answer = (partition.error_code, partition.leader_epoch, partition.end_offset)
            assert answer == ((expected, 3, 2) if expected == ErrorCode.none else (expected, -1, -1)), current
        # -2: Fetch reads any negative epoch as none (FetchRequest.optionalEpoch); ListOffsets and
        # OffsetForLeaderEpoch only -1, so -2 is an older epoch there: fenced.
        assert _fetch(sock, "e", 0, current_leader_epoch=-2)[1].error_code == ErrorCode.none
        ((_, [(_, error, _, _)]),) = _list_offsets_of(sock, 7, [("e", [(0, -1)])], -2)
        assert error == ErrorCode.fenced_leader_epoch
        asked = mod.OffsetForLeaderTopic(topic="e", partitions=(
            mod.OffsetForLeaderPartition(partition=0, current_leader_epoch=-2, leader_epoch=3),))
        (result,) = _raw.request(sock, cls(replica_id=-1, topics=(asked,))).topics
        assert result.partitions[0].error_code == ErrorCode.fenced_leader_epoch
        consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "g",
                             "enable.auto.commit": False})
        try:
            consumer.assign([CkTopicPartition("e", 0, 0)])
            values = []
            for _ in range(100):
                message = consumer.poll(0.2)
                if message is not None and message.error() is None:
                    values.append((message.offset(), message.value(), message.leader_epoch()))
                if len(values) == 5:
                    break
        finally:
            consumer.close()
        assert values == [(0, b"old-3", 3), (1, b"old-3", 3), (2, b"old-7", 7), (3, b"old-7", 7),
                          (4, b"new", 7)]


def test_metadata_answers_each_topic_once_and_ids_before_names(tmp_path):
    """Kafka turns the request into a set (``metadataRequest.topics.asScala.toSet``), and once an id
    is given (v12+) it looks up only the ids: a name beside them is neither answered nor created."""
    import uuid

    broker = Broker(tmp_path, configs={"num.partitions": 1})
    with broker, _raw.connect(broker.bootstrap_servers) as sock:
        topic_id = _metadata(sock, ["dup"]).topics[0].topic_id
        assert [(t.name, t.error_code) for t in _metadata(sock, ["dup", "dup", "nope/", "nope/"]).topics] == [
            ("dup", ErrorCode.none), ("nope/", ErrorCode.invalid_topic_exception)]
        cls, mod = _raw.request_class(3, 12)

        def by(*entries):
            topics = tuple(mod.MetadataRequestTopic(name=n, topic_id=i) for n, i in entries)
            return _raw.request(sock, cls(topics=topics, allow_auto_topic_creation=True,
                                          include_topic_authorized_operations=False)).topics

        unknown = uuid.uuid4()
        answered = by((None, topic_id), (None, topic_id), (None, unknown), ("by-name", uuid.UUID(int=0)))
        assert [(t.name, t.topic_id, t.error_code) for t in answered] == [
            ("dup", topic_id, ErrorCode.none), (None, unknown, ErrorCode.unknown_topic_id)]
        assert [t.name for t in _metadata(sock, None).topics] == ["dup"]  # "by-name" was not created
