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
        # only the group coordinator writes to __consumer_offsets (Kafka: "Cannot append to internal topic")
        internal = _produce(sock, "__consumer_offsets", _batch(1))
        assert internal.error_code == ErrorCode.invalid_topic_exception
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
