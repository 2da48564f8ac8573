"""Produce over the raw protocol: idempotent duplicates return the original offsets, sequence gaps
get OUT_OF_ORDER_SEQUENCE_NUMBER, and each failure gets Kafka's per-partition error code."""

from __future__ import annotations

import struct
import uuid
import zlib
from datetime import timedelta

import pytest
from kio.schema.errors import ErrorCode

from kafkalog.broker import Broker
from kafkalog.records.memory import MemoryRecordsBuilder
from kafkalog.records.types import CompressionType, TimestampType
from tests.broker import _raw

PRODUCE_VERSION = 9


def _batch(n, *, producer_id=-1, epoch=-1, sequence=-1, timestamp=1_700_000_000_000, size=10):
    builder = MemoryRecordsBuilder(
        2,
        CompressionType.NONE,
        TimestampType.CREATE_TIME,
        0,
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
    )
    for i in range(n):
        builder.append(timestamp + i, b"k%d" % i, b"v" * size)
    return builder.build().to_bytes()


def _produce(sock, topic, records, *, acks=-1, correlation_id=1, version=PRODUCE_VERSION):
    cls, mod = _raw.request_class(0, version)
    request = cls(
        transactional_id=None,
        acks=acks,
        timeout=timedelta(seconds=5),
        topic_data=(
            mod.TopicProduceData(
                name=topic, partition_data=(mod.PartitionProduceData(index=0, records=records),)
            ),
        ),
    )
    if acks == 0:
        _raw.send_frame(sock, _raw.header(0, version, correlation_id) + _raw.encode_body(request))
        return None
    response = _raw.request(sock, request, correlation_id)
    return response.responses[0].partition_responses[0]


def _create(sock, topic):
    cls, mod = _raw.request_class(3, 12)
    response = _raw.request(
        sock,
        cls(
            topics=(mod.MetadataRequestTopic(topic_id=None, name=topic),),
            allow_auto_topic_creation=True,
            include_topic_authorized_operations=False,
        ),
    )
    assert response.topics[0].error_code == ErrorCode.none


def _init_producer_id(sock):
    cls, _ = _raw.request_class(22, 4)
    response = _raw.request(
        sock,
        cls(
            transactional_id=None,
            transaction_timeout=timedelta(seconds=60),
            producer_id=-1,
            producer_epoch=-1,
        ),
    )
    assert response.error_code == ErrorCode.none
    return response.producer_id, response.producer_epoch


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    configs = {"message.max.bytes": 3000, "log.message.timestamp.before.max.ms": 3_600_000 * 24 * 365 * 30}
    with Broker(tmp_path_factory.mktemp("errors"), configs=configs) as b:
        yield b


def test_idempotent_duplicate_and_sequence_gap(broker):
    with _raw.connect(broker.bootstrap_servers) as sock:
        _create(sock, "idem")
        pid, epoch = _init_producer_id(sock)
        pid2, _ = _init_producer_id(sock)
        assert pid2 != pid
        first = _batch(3, producer_id=pid, epoch=epoch, sequence=0)
        r = _produce(sock, "idem", first)
        assert (r.error_code, r.base_offset) == (ErrorCode.none, 0)
        r = _produce(sock, "idem", _batch(2, producer_id=pid, epoch=epoch, sequence=3))
        assert (r.error_code, r.base_offset) == (ErrorCode.none, 3)
        # the same first batch again (a retry): no error, the original offsets, nothing written
        r = _produce(sock, "idem", first)
        assert (r.error_code, r.base_offset) == (ErrorCode.none, 0)
        # a gap in the sequence
        r = _produce(sock, "idem", _batch(1, producer_id=pid, epoch=epoch, sequence=9))
        assert r.error_code == ErrorCode.out_of_order_sequence_number
        log = broker.server.log_manager.get_log("idem", 0)
        assert log.log_end_offset == 5
        assert [b.base_sequence for b in log.batches(0)] == [0, 3]


def test_per_partition_error_codes(broker):
    with _raw.connect(broker.bootstrap_servers) as sock:
        _create(sock, "errs")
        assert _produce(sock, "no-such-topic", _batch(1)).error_code == ErrorCode.unknown_topic_or_partition
        # __consumer_offsets before any group made it: a partition that does not exist
        unknown = _produce(sock, "__consumer_offsets", _batch(1))
        assert unknown.error_code == ErrorCode.unknown_topic_or_partition
        if not broker.server.log_manager.has_topic("__consumer_offsets"):
            broker.server.log_manager.create_topic("__consumer_offsets", 1, {"cleanup.policy": "compact"})
        # only the group coordinator writes to it (Kafka: "Cannot append to internal topic"), and the
        # refusal carries no message and no log start offset (Kafka answers it with its "unknown"
        # LogAppendInfo)
        internal = _produce(sock, "__consumer_offsets", _batch(1))
        assert (internal.error_code, internal.log_start_offset, internal.error_message) == (
            ErrorCode.invalid_topic_exception, -1, None)
        # the share-group coordinator's topic is internal too (Kafka's Topic.INTERNAL_TOPICS), when a
        # data directory holds it
        broker.server.log_manager.create_topic("__share_group_state", 1, {"cleanup.policy": "delete"})
        share = _produce(sock, "__share_group_state", _batch(1))
        assert share.error_code == ErrorCode.invalid_topic_exception
        assert _produce(sock, "errs", _batch(1, size=5000)).error_code == ErrorCode.message_too_large
        corrupt = bytearray(_batch(2))
        corrupt[-1] ^= 0xFF
        assert _produce(sock, "errs", bytes(corrupt)).error_code == ErrorCode.corrupt_message
        r = _produce(sock, "errs", _batch(1, timestamp=1000))
        assert r.error_code == ErrorCode.invalid_timestamp
        assert _produce(sock, "errs", _batch(1) + _batch(1)).error_code == ErrorCode.invalid_record
        assert _produce(sock, "errs", _batch(1), acks=2).error_code == ErrorCode.invalid_required_acks
        ok = _produce(sock, "errs", _batch(2))
        assert (ok.error_code, ok.base_offset) == (ErrorCode.none, 0)


def _with_size(batch: bytes, size: int) -> bytes:
    return batch[:8] + struct.pack(">i", size) + batch[12:]


@pytest.mark.parametrize(
    ("records", "expected"),
    [
        (b"", ErrorCode.invalid_record),  # no batch at all
        (b"\x00" * 11, ErrorCode.invalid_record),  # shorter than offset + size: no batch
        (_batch(1)[:40], ErrorCode.invalid_record),  # a batch cut short is no batch
        (_with_size(_batch(1), 13), ErrorCode.corrupt_message),  # a size below any batch's
        (_batch(1)[:16] + b"\x07" + _batch(1)[17:], ErrorCode.corrupt_message),  # magic 7
        (_batch(1)[:16] + b"\x01" + _batch(1)[17:], ErrorCode.invalid_record),  # magic 1 in v3+
        (_batch(1) + _batch(1), ErrorCode.invalid_record),  # two batches
        (_batch(1) + _with_size(bytes(12), 5), ErrorCode.corrupt_message),  # a bad second header
        (_batch(1) + b"\x00" * 5, ErrorCode.none),  # too few bytes for a second batch: trimmed
        (_batch(1) + _batch(2)[:40], ErrorCode.none),  # a second batch cut short: trimmed
    ],
)
def test_records_that_are_not_exactly_one_v2_batch(broker, records, expected):
    """Kafka's ProduceRequest.validateRecords, with the batches read as its ByteBufferLogInputStream
    reads them (bytes too few to be another batch are no batch, and the log trims them, as
    UnifiedLog.trimInvalidBytes does): the partition gets the error, the connection stays."""
    topic = f"shapes-{zlib.crc32(records):08x}"
    with _raw.connect(broker.bootstrap_servers) as sock:
        _create(sock, topic)
        assert _produce(sock, topic, records).error_code == expected
        assert _produce(sock, topic, _batch(1)).error_code == ErrorCode.none
    log = broker.server.log_manager.get_log(topic, 0)
    kept = 2 if expected == ErrorCode.none else 1
    assert log.log_end_offset == kept and log.size_in_bytes == kept * len(_batch(1))  # whole batches


def test_acks_zero_sends_no_response(broker):
    with _raw.connect(broker.bootstrap_servers) as sock:
        _create(sock, "acks0")
        _produce(sock, "acks0", _batch(4), acks=0, correlation_id=50)
        r = _produce(sock, "acks0", _batch(1), acks=1, correlation_id=51)  # asserts correlation 51 comes next
        assert (r.error_code, r.base_offset) == (ErrorCode.none, 4)
        # a failed acks=0 produce closes the connection (the client would never learn otherwise)
        _produce(sock, "no-such-topic", _batch(1), acks=0, correlation_id=52)
        assert _raw.is_closed(sock)


def test_produce_v3_and_v13_by_topic_id(broker):
    with _raw.connect(broker.bootstrap_servers) as sock:
        _create(sock, "versions")
        assert _produce(sock, "versions", _batch(1), version=3).base_offset == 0
        topic_id = broker.server.apis.metadata_cache.topic_id("versions")
        cls, mod = _raw.request_class(0, 13)
        request = cls(
            transactional_id=None,
            acks=1,
            timeout=timedelta(seconds=5),
            topic_data=(
                mod.TopicProduceData(
                    topic_id=topic_id, partition_data=(mod.PartitionProduceData(index=0, records=_batch(2)),)
                ),
            ),
        )
        response = _raw.request(sock, request)
        assert response.responses[0].topic_id == topic_id
        assert response.responses[0].partition_responses[0].base_offset == 1
        # two unknown ids are two topics, each partition answered (not one partition "named twice")
        unknown = (uuid.UUID(int=1), uuid.UUID(int=2))
        one = (mod.PartitionProduceData(index=0, records=_batch(1)),)
        request = cls(transactional_id=None, acks=1, timeout=timedelta(seconds=5),
                      topic_data=tuple(mod.TopicProduceData(topic_id=u, partition_data=one) for u in unknown))
        response = _raw.request(sock, request)
        assert [(t.topic_id, [p.error_code for p in t.partition_responses]) for t in response.responses] == [
            (u, [ErrorCode.unknown_topic_id]) for u in unknown]


def test_a_partition_named_twice_is_answered_once(broker):
    """As Kafka's maps by partition: the last record set named for a partition is the one appended,
    a refusal of either wins, and the response names the partition once."""
    with _raw.connect(broker.bootstrap_servers) as sock:
        _create(sock, "twice")
        cls, mod = _raw.request_class(0, PRODUCE_VERSION)

        def produce_twice(first, second):
            data = (mod.TopicProduceData(name="twice", partition_data=(
                mod.PartitionProduceData(index=0, records=first),)),
                mod.TopicProduceData(name="twice", partition_data=(
                    mod.PartitionProduceData(index=0, records=second),)))
            response = _raw.request(sock, cls(transactional_id=None, acks=-1, timeout=timedelta(seconds=5),
                                              topic_data=data))
            return [(t.name, [(p.index, p.error_code, p.base_offset) for p in t.partition_responses])
                    for t in response.responses]

        assert produce_twice(_batch(1), _batch(2)) == [("twice", [(0, ErrorCode.none, 0)])]
        log = broker.server.log_manager.get_log("twice", 0)
        assert log.log_end_offset == 2  # the second set, two records
        # the second is no valid batch: its refusal is the answer, the first set is appended
        assert produce_twice(_batch(1), b"\x00" * 70) == [("twice", [(0, ErrorCode.corrupt_message, -1)])]
        assert log.log_end_offset == 3


def _with_codec(batch: bytes, codec: int, *, fix_crc: bool = True) -> bytes:
    """The batch with its attributes' codec bits set to ``codec`` (5-7: no Kafka version has one)."""
    from crc32c import crc32c

    data = bytearray(batch)
    attributes = struct.unpack_from(">h", data, 21)[0]
    struct.pack_into(">h", data, 21, (attributes & ~7) | codec)
    if fix_crc:
        struct.pack_into(">I", data, 17, crc32c(bytes(data[21:])))
    return bytes(data)


def _produce_many(sock, partitions, *, acks=-1, version=PRODUCE_VERSION, transactional_id=None):
    """One Produce of {(topic, partition): records}; {(topic, partition): partition response}."""
    cls, mod = _raw.request_class(0, version)
    by_topic: dict = {}
    for (topic, index), records in partitions.items():
        by_topic.setdefault(topic, []).append(mod.PartitionProduceData(index=index, records=records))
    request = cls(transactional_id=transactional_id, acks=acks, timeout=timedelta(seconds=5),
                  topic_data=tuple(mod.TopicProduceData(name=t, partition_data=tuple(ps))
                                   for t, ps in by_topic.items()))
    response = _raw.request(sock, request)
    return {(t.name, p.index): p for t in response.responses for p in t.partition_responses}


def test_an_unknown_codec_fails_its_partition_not_the_connection(broker):
    """Kafka reads the codec in the log's validation from v7 (UNKNOWN_SERVER_ERROR for that
    partition, after the CRC check; the others are appended) and in validateRecords before v7,
    where the exception fails the whole request."""
    with _raw.connect(broker.bootstrap_servers) as sock:
        for topic in ("codec-a", "codec-b"):
            _create(sock, topic)
        for codec in (5, 6, 7):
            answers = _produce_many(sock, {("codec-a", 0): _with_codec(_batch(1), codec),
                                           ("codec-b", 0): _batch(1)})
            assert answers[("codec-a", 0)].error_code == ErrorCode.unknown_server_error
            assert answers[("codec-a", 0)].error_message is None  # nothing of the server's leaks
            assert answers[("codec-b", 0)].error_code == ErrorCode.none
        bad_crc = _produce_many(sock, {("codec-a", 0): _with_codec(_batch(1), 5, fix_crc=False)})
        assert bad_crc[("codec-a", 0)].error_code == ErrorCode.corrupt_message
        old = _produce_many(sock, {("codec-a", 0): _with_codec(_batch(1), 5), ("codec-b", 0): _batch(1)},
                            version=5)
        assert {r.error_code for r in old.values()} == {ErrorCode.unknown_server_error}
        assert _produce(sock, "codec-b", _batch(1)).error_code == ErrorCode.none  # still connected
        log = broker.server.log_manager.get_log("codec-b", 0)
        assert (log.log_end_offset, broker.server.log_manager.get_log("codec-a", 0).log_end_offset) == (4, 0)


def test_a_missing_partition_is_answered_before_its_records_are_looked_at(broker):
    with _raw.connect(broker.bootstrap_servers) as sock:
        _create(sock, "exists")
        magic1 = _batch(1)[:16] + b"\x01" + _batch(1)[17:]
        for records in (magic1, b"", _with_codec(_batch(1), 5)):
            assert _produce(sock, "missing", records).error_code == ErrorCode.unknown_topic_or_partition
        # invalid acks fail the partitions that exist; a missing one stays UNKNOWN_TOPIC_OR_PARTITION
        answers = _produce_many(sock, {("missing", 0): _batch(1), ("exists", 0): _batch(1),
                                       ("exists", 3): _batch(1)}, acks=2)
        assert {k: v.error_code for k, v in answers.items()} == {
            ("missing", 0): ErrorCode.unknown_topic_or_partition,
            ("exists", 0): ErrorCode.invalid_required_acks,
            ("exists", 3): ErrorCode.unknown_topic_or_partition}


def test_failed_appends_report_the_log_start_offset_and_kafkas_messages(broker):
    """As Kafka's appendToLocalLog: a record validation failure says why (and names the records); other
    failures carry no message, with the log start offset except for a corrupt or too large batch."""
    with _raw.connect(broker.bootstrap_servers) as sock:
        _create(sock, "starts")
        for _ in range(3):
            assert _produce(sock, "starts", _batch(2)).error_code == ErrorCode.none
        broker.server.apis.replica_manager.delete_records({_tp("starts"): 4})
        too_old = _produce(sock, "starts", _batch(1, timestamp=1000))
        assert (too_old.error_code, too_old.log_start_offset) == (ErrorCode.invalid_timestamp, 4)
        assert too_old.error_message == "One or more records have been rejected due to invalid timestamp"
        first_error = too_old.record_errors[0].batch_index_error_message
        assert first_error.startswith("Timestamp 1000 of message with offset 0 is out of range")
        base_7 = bytearray(_batch(1))
        struct.pack_into(">q", base_7, 0, 7)
        wrong_base = _produce(sock, "starts", bytes(base_7))
        assert (wrong_base.error_code, wrong_base.log_start_offset, wrong_base.error_message) == (
            ErrorCode.invalid_record, 4, None)
        corrupt = bytearray(_batch(2))
        corrupt[-1] ^= 0xFF
        for records, code in ((bytes(corrupt), ErrorCode.corrupt_message),
                              (_batch(1, size=5000), ErrorCode.message_too_large)):
            answer = _produce(sock, "starts", records)
            assert (answer.error_code, answer.log_start_offset, answer.error_message) == (code, -1, None)


def _tp(topic):
    from kafkalog.broker.replica_manager import TopicPartition

    return TopicPartition(topic, 0)


def test_batches_too_damaged_to_read_are_answered_not_dropped(broker):
    """A v2 batch whose length field is too small to hold a header (the transactional checks read its
    attributes first) is CORRUPT_MESSAGE, the connection kept; a compressed payload its codec cannot
    read (the CRC holds) is UNKNOWN_SERVER_ERROR with the log start offset, as Kafka's appendToLocalLog
    answers what its codecs throw — not the retriable CORRUPT_MESSAGE."""
    with _raw.connect(broker.bootstrap_servers) as sock:
        _create(sock, "damaged")
        for size in (14, 38, 48):
            short = bytearray(struct.pack(">qi", 0, size) + bytes(size))
            short[16] = 2  # magic
            answer = _produce(sock, "damaged", bytes(short))
            assert (answer.error_code, answer.log_start_offset) == (ErrorCode.corrupt_message, -1)
        not_gzip = _with_codec(_batch(3), 1)  # says gzip over records that are not; the CRC holds
        answer = _produce(sock, "damaged", not_gzip)
        assert (answer.error_code, answer.log_start_offset, answer.error_message) == (
            ErrorCode.unknown_server_error, 0, None)
        assert _produce(sock, "damaged", _batch(1)).error_code == ErrorCode.none  # still connected
