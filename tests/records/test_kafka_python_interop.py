"""Cross-checks with kafka-python's record module, both directions, every magic and codec."""

from __future__ import annotations

import pytest
from kafka.record import MemoryRecords as KpMemoryRecords
from kafka.record import MemoryRecordsBuilder as KpMemoryRecordsBuilder
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatch, LegacyRecordBatchBuilder

from kafkalog.records import (
    CompressionType,
    Header,
    MemoryRecords,
    MemoryRecordsBuilder,
    RecordBatch,
    TimestampType,
)

T0 = 1_700_000_000_000
COMBOS = [
    (magic, codec)
    for magic in (0, 1, 2)
    for codec in CompressionType
    if not (codec is CompressionType.ZSTD and magic < 2)
]


def _inputs(magic: int) -> list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]]:
    out = []
    for i in range(40):
        key = None if i % 7 == 3 else b"key-%03d" % i
        value = None if i % 11 == 5 else (b"value %03d, compressible payload " % i) * 4
        headers: list[tuple[str, bytes | None]] = []
        if magic == 2 and i % 3 == 0:
            headers = [("trace-id", b"%08d" % i), ("empty", b""), ("null", None), ("ünï", b"\xff")]
        out.append((T0 + (i * 37) % 500, key, value, headers))
    return out


def _expected_ts(magic: int, ts: int) -> int:
    return -1 if magic == 0 else ts


@pytest.mark.parametrize(("magic", "codec"), COMBOS)
def test_kafka_python_builds_kafkalog_reads(magic: int, codec: CompressionType) -> None:
    inputs = _inputs(magic)
    builder = KpMemoryRecordsBuilder(magic, int(codec), batch_size=1 << 20)
    for ts, key, value, headers in inputs:
        assert builder.append(ts, key, value, headers) is not None
    builder.close()
    data = bytes(builder.buffer())
    records = MemoryRecords(data)
    batches = list(records.batches())
    # uncompressed legacy data is one log entry per record; everything else one batch
    assert len(batches) == (len(inputs) if magic < 2 and codec is CompressionType.NONE else 1)
    for batch in batches:
        batch.ensure_valid()
        assert batch.magic == magic
        assert batch.compression_type is codec
    got = list(records.records())
    assert [r.offset for r in got] == list(range(len(inputs)))
    assert [(r.timestamp, r.key, r.value) for r in got] == [
        (_expected_ts(magic, t), k, v) for t, k, v, _ in inputs
    ]
    assert [tuple((h.key, h.value) for h in r.headers) for r in got] == [tuple(h) for *_, h in inputs]
    if magic > 0:
        assert {r.timestamp_type for r in got} == {TimestampType.CREATE_TIME}
    if magic < 2:
        # legacy records carry their own CRC, which kafka-python computed the same way
        assert all(r.checksum is not None for r in got)
    assert [r for b in batches for r in b.decode_columns().to_records()] == got


@pytest.mark.parametrize(("magic", "codec"), COMBOS)
def test_kafkalog_builds_kafka_python_reads(magic: int, codec: CompressionType) -> None:
    inputs = _inputs(magic)
    builder = MemoryRecordsBuilder(magic, codec, TimestampType.CREATE_TIME, 1000)
    for ts, key, value, headers in inputs:
        builder.append(ts, key, value, [Header(k, v) for k, v in headers])
    data = builder.build().to_bytes()
    kp = KpMemoryRecords(data)
    got = []
    while (kp_batch := kp.next_batch()) is not None:
        assert kp_batch.validate_crc()
        assert kp_batch.compression_type == int(codec)
        got.extend(kp_batch)
    assert [r.offset for r in got] == list(range(1000, 1000 + len(inputs)))
    assert [(r.key, r.value) for r in got] == [(k, v) for _, k, v, _ in inputs]
    if magic > 0:
        assert [r.timestamp for r in got] == [t for t, *_ in inputs]
    if magic == 2:
        assert [list(r.headers) for r in got] == [h for *_, h in inputs]
    else:
        assert all(r.validate_crc() for r in got)  # inner / plain message CRCs


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_checksums_agree(magic: int) -> None:
    builder = MemoryRecordsBuilder(magic, CompressionType.NONE, TimestampType.CREATE_TIME, 0)
    crcs = [builder.append(T0 + i, b"k%d" % i, b"v%d" % i) for i in range(3)]
    kp = KpMemoryRecords(builder.build().to_bytes())
    kp_crcs = []
    while (batch := kp.next_batch()) is not None:
        kp_crcs.extend(r.checksum for r in batch)
    assert crcs == kp_crcs
    kp_builder = LegacyRecordBatchBuilder(magic, 0, 1 << 20)
    metas = [kp_builder.append(i, T0 + i, b"k%d" % i, b"v%d" % i) for i in range(3)]
    assert [m.crc for m in metas] == crcs
    assert [r.checksum for r in MemoryRecords(bytes(kp_builder.build())).records()] == crcs


def test_idempotent_and_transactional_batches_round_trip() -> None:
    kp = DefaultRecordBatchBuilder(2, 0, True, 77, 3, 1000, 1 << 20)
    for i in range(3):
        kp.append(i, T0 + i, b"k", b"v", [])
    batch = RecordBatch(bytes(kp.build()))
    batch.ensure_valid()
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence, batch.last_sequence) == (
        77,
        3,
        1000,
        1002,
    )
    assert batch.is_transactional and [r.sequence for r in batch.records()] == [1000, 1001, 1002]

    ours = MemoryRecordsBuilder(2, CompressionType.LZ4, TimestampType.CREATE_TIME, 0, -1, 77, 3, 1000, True)
    for i in range(3):
        ours.append(T0 + i, b"k", b"v" * 100)
    kp_batch = DefaultRecordBatch(ours.build().to_bytes())
    assert kp_batch.validate_crc()
    assert (kp_batch.producer_id, kp_batch.producer_epoch, kp_batch.base_sequence) == (77, 3, 1000)
    assert kp_batch.is_transactional and len(list(kp_batch)) == 3


def test_mixed_magics_in_one_buffer() -> None:
    parts = []
    offset = 0
    for magic, codec in COMBOS:
        b = MemoryRecordsBuilder(magic, codec, TimestampType.CREATE_TIME, offset)
        for i in range(3):
            b.append(T0 + i, b"k", b"mixed payload " * 10)
        parts.append(b.build().to_bytes())
        offset += 3
    data = b"".join(parts)
    assert [r.offset for r in MemoryRecords(data).records()] == list(range(offset))
    kp = KpMemoryRecords(data)
    kp_offsets = []
    while (batch := kp.next_batch()) is not None:
        assert batch.validate_crc()
        kp_offsets.extend(r.offset for r in batch)
    assert kp_offsets == list(range(offset))


def test_kafka_python_legacy_batch_class_reads_our_wrapper() -> None:
    b = MemoryRecordsBuilder(
        1, CompressionType.GZIP, TimestampType.LOG_APPEND_TIME, 40, log_append_time=T0 + 9
    )
    for i in range(4):
        b.append(T0 + i, None, b"x" * 50)
    kp = LegacyRecordBatch(b.build().to_bytes(), 1)
    assert kp.validate_crc() and kp.timestamp_type == 1
    assert [(r.offset, r.timestamp) for r in kp] == [(40 + i, T0 + 9) for i in range(4)]
