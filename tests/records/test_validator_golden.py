"""LogValidator against bytes and results produced by Apache Kafka itself (golden ``s7_*``), plus
validation of other Kafka-written batches (``s2``/``s3``) whose outcome follows from Kafka's rules."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from kafkalog.errors import InvalidRecordError, InvalidTimestampError, UnsupportedForMessageFormatError
from kafkalog.records import MemoryRecords, RecordBatch, iter_batches
from kafkalog.records.types import (
    CRC_OFFSET,
    LEGACY_CRC_OFFSET,
    PARTITION_LEADER_EPOCH_OFFSET,
    CompressionType,
    TimestampType,
)
from kafkalog.records.validator import (
    AppendOrigin,
    ValidatorConfig,
    analyze_and_validate_records,
    trim_invalid_bytes,
    validate_messages_and_assign_offsets,
)

NOW = 1_700_000_001_000  # the "now" Kafka used for the LogAppendTime vectors
T0 = 1_700_000_000_000


@pytest.fixture(scope="module")
def expected(kafka_golden_dir: Path) -> dict[str, object]:
    return json.loads((kafka_golden_dir / "expected.json").read_text())


def _read(kafka_golden_dir: Path, name: str) -> bytes:
    return (kafka_golden_dir / name).read_bytes()


def _validate(data: bytes, **config: object) -> tuple[bytes, int, int, bool, int]:
    result = validate_messages_and_assign_offsets(
        MemoryRecords(data),
        offset_counter=500,
        now_ms=NOW,
        config=ValidatorConfig(**config),  # type: ignore[arg-type]
        partition_leader_epoch=9,
    )
    return (
        result.validated_records.to_bytes(),
        result.max_timestamp,
        result.shallow_offset_of_max_timestamp,
        result.messages_size_maybe_changed,
        result.next_offset,
    )


# --- s7: LogValidator outputs written by Kafka ----------------------------------------------------


def test_v2_in_place_create_time_is_byte_identical(kafka_golden_dir: Path, expected: dict) -> None:
    data = _read(kafka_golden_dir, "s7_client_v2_none_input.bin")
    out, max_ts, shallow, changed, next_offset = _validate(data)
    assert out == _read(kafka_golden_dir, "s7_validated_v2_createtime_offset500_epoch9.bin")
    assert [max_ts, shallow] == expected["s7_createtime_maxTs_shallow"]
    assert not changed
    assert next_offset == 503
    # base offset and epoch are outside the CRC: the client's CRC survives untouched
    assert out[CRC_OFFSET : CRC_OFFSET + 4] == data[CRC_OFFSET : CRC_OFFSET + 4]
    assert struct.unpack_from(">i", out, PARTITION_LEADER_EPOCH_OFFSET)[0] == 9


def test_v2_in_place_log_append_time_is_byte_identical(kafka_golden_dir: Path, expected: dict) -> None:
    data = _read(kafka_golden_dir, "s7_client_v2_none_input.bin")
    out, max_ts, shallow, changed, _ = _validate(data, timestamp_type=TimestampType.LOG_APPEND_TIME)
    assert out == _read(
        kafka_golden_dir, "s7_validated_v2_logappendtime_offset500_epoch9_now1700000001000.bin"
    )
    assert [max_ts, shallow] == expected["s7_logappend_maxTs_shallow"]
    assert not changed
    batch = RecordBatch(out)
    batch.ensure_valid()
    assert batch.base_timestamp == RecordBatch(data).base_timestamp  # untouched
    assert [r.timestamp for r in batch.records()] == [NOW] * 3


def test_v1_in_place_log_append_time_is_byte_identical(kafka_golden_dir: Path, expected: dict) -> None:
    data = _read(kafka_golden_dir, "s7_client_v1_none_input.bin")
    out, max_ts, shallow, changed, next_offset = _validate(
        data, target_magic=1, timestamp_type=TimestampType.LOG_APPEND_TIME
    )
    assert out == _read(kafka_golden_dir, "s7_validated_v1_inplace_logappendtime_offset500.bin")
    assert [max_ts, shallow] == expected["s7_v1_logappend_maxTs_shallow"]
    assert not changed
    assert next_offset == 502


def test_v1_up_converted_to_v2_is_byte_identical(kafka_golden_dir: Path, expected: dict) -> None:
    data = _read(kafka_golden_dir, "s7_client_v1_none_input.bin")
    out, max_ts, shallow, changed, next_offset = _validate(data, target_magic=2)
    assert out == _read(kafka_golden_dir, "s7_validated_v1_upconverted_to_v2_offset500_epoch9.bin")
    assert [max_ts, shallow] == expected["s7_upconvert_maxTs_shallow"]
    assert changed
    assert next_offset == 502


@pytest.mark.parametrize("name", ["s7_client_v2_none_input.bin", "s7_client_v1_none_input.bin"])
@pytest.mark.parametrize("ts_type", list(TimestampType)[1:])
@pytest.mark.parametrize("magic", [0, 1, 2])
def test_golden_inputs_are_never_modified(
    kafka_golden_dir: Path, name: str, ts_type: TimestampType, magic: int
) -> None:
    data = bytearray(_read(kafka_golden_dir, name))
    snapshot = bytes(data)
    validate_messages_and_assign_offsets(
        MemoryRecords(data),
        offset_counter=500,
        now_ms=NOW,
        config=ValidatorConfig(target_magic=magic, timestamp_type=ts_type),
        partition_leader_epoch=9,
    )
    assert bytes(data) == snapshot


# --- analysis over Kafka-written logs -----------------------------------------------------------------


def test_analyze_client_inputs(kafka_golden_dir: Path) -> None:
    v2 = analyze_and_validate_records(
        MemoryRecords(_read(kafka_golden_dir, "s7_client_v2_none_input.bin")), AppendOrigin.CLIENT
    )
    assert (v2.first_offset, v2.last_offset, v2.last_offset_of_first_batch) == (0, 2, 2)
    assert (v2.max_timestamp, v2.shallow_offset_of_max_timestamp) == (T0 + 30, 2)
    assert (v2.valid_bytes, v2.shallow_count, v2.source_compression) == (88, 1, CompressionType.NONE)
    assert v2.last_leader_epoch is None  # the client sent -1

    v1 = analyze_and_validate_records(
        MemoryRecords(_read(kafka_golden_dir, "s7_client_v1_none_input.bin")), AppendOrigin.CLIENT
    )
    # legacy: the first offset is unknown until assigned
    assert (v1.first_offset, v1.last_offset, v1.last_offset_of_first_batch) == (-1, 1, 0)
    assert v1.first_or_last_offset_of_first_batch == 0
    assert (v1.max_timestamp, v1.shallow_offset_of_max_timestamp, v1.shallow_count) == (T0 + 30, 1, 2)


def test_analyze_mixed_v2_log_as_follower(kafka_golden_dir: Path) -> None:
    data = _read(kafka_golden_dir, "s2_v2_mixed/00000000000000000100.log")
    info = analyze_and_validate_records(MemoryRecords(data), AppendOrigin.REPLICATION, assign_offsets=False)
    assert (info.first_offset, info.last_offset, info.last_offset_of_first_batch) == (100, 109, 102)
    assert info.source_compression is CompressionType.GZIP
    assert info.valid_bytes == len(data)
    assert info.shallow_count == 5
    assert info.last_leader_epoch == 3
    # the LogAppendTime batch (max ts T0+50) ends at offset 109
    assert (info.max_timestamp, info.shallow_offset_of_max_timestamp) == (T0 + 50, 109)
    assert info.offsets_monotonic


def test_analyze_legacy_log(kafka_golden_dir: Path) -> None:
    data = _read(kafka_golden_dir, "s3_legacy/00000000000000000000.log")
    info = analyze_and_validate_records(MemoryRecords(data), AppendOrigin.REPLICATION, assign_offsets=False)
    assert (info.first_offset, info.last_offset, info.last_offset_of_first_batch) == (-1, 8, 0)
    assert (info.max_timestamp, info.shallow_offset_of_max_timestamp) == (T0 + 8, 8)
    assert info.valid_bytes == len(data) and info.shallow_count == 6


def test_analyze_and_trim_torn_tail(kafka_golden_dir: Path, expected: dict) -> None:
    data = _read(kafka_golden_dir, "s4_recovery_input_torn_tail.log")
    info = analyze_and_validate_records(MemoryRecords(data), AppendOrigin.REPLICATION, assign_offsets=False)
    assert info.valid_bytes == expected["s4_torn_tail_log_size_after"]
    assert len(data) - info.valid_bytes == expected["s4_torn_tail_truncated_bytes"]
    trimmed = trim_invalid_bytes(MemoryRecords(data), info)
    assert trimmed.to_bytes() == data[: info.valid_bytes]


# --- other Kafka-written batches through the validator ---------------------------------------------


def _s2_batch(kafka_golden_dir: Path, index: int, base_offset: int | None = 0) -> bytes:
    data = _read(kafka_golden_dir, "s2_v2_mixed/00000000000000000100.log")
    batch = list(iter_batches(data))[index]
    raw = bytearray(batch.buffer)
    if base_offset is not None:
        struct.pack_into(">q", raw, 0, base_offset)  # as a producer sends it; not covered by the CRC
    return bytes(raw)


def test_kafka_gzip_batch_in_place_keeps_kafka_payload(kafka_golden_dir: Path) -> None:
    data = _s2_batch(kafka_golden_dir, 1)
    for target in (None, CompressionType.GZIP):
        out, max_ts, shallow, changed, _ = _validate(data, target_compression=target, compression_level=9)
        assert not changed
        assert (max_ts, shallow) == (T0 + 21, 501)
        # only base offset and leader epoch changed; Kafka's gzip stream is kept as is
        assert out[:8] == struct.pack(">q", 500)
        assert out[16:] == data[16:]


@pytest.mark.parametrize("target", [CompressionType.NONE, CompressionType.SNAPPY, CompressionType.LZ4])
def test_kafka_gzip_batch_recompressed(kafka_golden_dir: Path, target: CompressionType) -> None:
    data = _s2_batch(kafka_golden_dir, 1)
    out, max_ts, shallow, changed, _ = _validate(data, target_compression=target)
    assert changed
    batch = RecordBatch(out)
    batch.ensure_valid()
    assert batch.compression_type is target
    assert [(r.offset, r.key, r.value, r.timestamp) for r in batch.records()] == [
        (500, b"g1", b"gzip-one", T0 + 20),
        (501, b"g2", b"gzip-two", T0 + 21),
    ]
    assert (max_ts, shallow) == (T0 + 21, 501)


def test_kafka_v1_gzip_wrapper(kafka_golden_dir: Path) -> None:
    data = _read(kafka_golden_dir, "s3_legacy/00000000000000000000.log")
    wrapper = bytes(list(iter_batches(data))[5].buffer)
    # As stored (wrapper offset 8) the absolute inner offsets are 6..8, not 0..2: Kafka rebuilds.
    out, max_ts, shallow, changed, _ = _validate(wrapper, target_magic=1)
    assert changed
    assert [(r.offset, r.value) for r in MemoryRecords(out).records()] == [
        (500, b"v1-gzip-6"),
        (501, b"v1-gzip-7"),
        (502, b"v1-gzip-8"),
    ]
    assert (max_ts, shallow) == (T0 + 8, 502)
    # A producer's wrapper (offset 2 = n-1, inner 0..2) is patched in place; the CRC skips the offset.
    producer = bytearray(wrapper)
    struct.pack_into(">q", producer, 0, 2)
    out, max_ts, shallow, changed, _ = _validate(bytes(producer), target_magic=1)
    assert not changed
    assert out[:8] == struct.pack(">q", 502) and out[8:] == wrapper[8:]
    assert (max_ts, shallow) == (T0 + 8, 502)
    # LogAppendTime: wrapper timestamp and type rewritten, CRC recomputed, payload kept
    out, max_ts, _, changed, _ = _validate(
        bytes(producer), target_magic=1, timestamp_type=TimestampType.LOG_APPEND_TIME
    )
    assert not changed and max_ts == NOW
    batch = RecordBatch(out)
    batch.ensure_valid()
    assert (
        out[LEGACY_CRC_OFFSET : LEGACY_CRC_OFFSET + 4] != wrapper[LEGACY_CRC_OFFSET : LEGACY_CRC_OFFSET + 4]
    )
    assert [r.timestamp for r in batch.records()] == [NOW] * 3


def test_kafka_v0_gzip_wrapper_is_always_rebuilt(kafka_golden_dir: Path) -> None:
    data = _read(kafka_golden_dir, "s3_legacy/00000000000000000000.log")
    wrapper = bytes(list(iter_batches(data))[2].buffer)
    out, max_ts, shallow, changed, _ = _validate(wrapper, target_magic=0)
    assert changed
    assert (max_ts, shallow) == (-1, -1)
    batch = RecordBatch(out)
    assert batch.offset == 501 and batch.compression_type is CompressionType.GZIP
    assert [(r.offset, r.key) for r in batch.records()] == [(500, b"k2"), (501, b"k3")]


def test_kafka_transactional_batch(kafka_golden_dir: Path) -> None:
    data = _s2_batch(kafka_golden_dir, 2)
    out, *_ = _validate(data)
    batch = RecordBatch(out)
    assert batch.is_transactional and (batch.producer_id, batch.producer_epoch) == (4242, 7)
    assert batch.base_offset == 500
    with pytest.raises(UnsupportedForMessageFormatError, match=r"Transactional.*magic version 1"):
        _validate(data, target_magic=1)


def test_kafka_control_batch(kafka_golden_dir: Path) -> None:
    data = _s2_batch(kafka_golden_dir, 3)
    with pytest.raises(InvalidRecordError, match=r"not allowed to write control records"):
        _validate(data)
    result = validate_messages_and_assign_offsets(
        MemoryRecords(data),
        offset_counter=500,
        now_ms=NOW,
        config=ValidatorConfig(target_compression=CompressionType.GZIP),
        partition_leader_epoch=9,
        origin=AppendOrigin.COORDINATOR,
    )
    out = result.validated_records.to_bytes()
    # an uncompressed control batch is never compressed: patched in place
    assert not result.messages_size_maybe_changed
    assert out[16:] == data[16:] and RecordBatch(out).base_offset == 500


def test_kafka_log_append_time_batch_from_a_producer(kafka_golden_dir: Path) -> None:
    data = _s2_batch(kafka_golden_dir, 4)
    with pytest.raises(InvalidTimestampError, match=r"LogAppendTime") as info:
        _validate(data, timestamp_type=TimestampType.LOG_APPEND_TIME)
    assert [i for i, _ in info.value.record_errors] == [0, 1]
    # Kafka's rule on a CreateTime topic: the batch's timestamp (T0+50) is range-checked and
    # accepted, and the batch is rewritten as CreateTime.
    out, max_ts, shallow, _, _ = _validate(data)
    batch = RecordBatch(out)
    batch.ensure_valid()
    assert batch.timestamp_type is TimestampType.CREATE_TIME
    assert (max_ts, shallow) == (T0 + 50, 501)
