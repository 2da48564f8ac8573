"""RecordBatch shallow view and iter_batches file semantics (spec §2, §3.5, §6.1) on Kafka's bytes."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from kafkalog.errors import CorruptRecordError, KafkaLogError
from kafkalog.records import (
    MAX_HEADER_SIZE,
    CompressionType,
    MemoryRecords,
    RecordBatch,
    TimestampType,
    compression,
    iter_batches,
)

T0 = 1_700_000_000_000


@pytest.fixture(scope="module")
def s1(kafka_golden_dir: Path) -> bytes:
    return (kafka_golden_dir / "s1_v2_single" / "active" / "00000000000000000000.log").read_bytes()


@pytest.fixture(scope="module")
def s2(kafka_golden_dir: Path) -> bytes:
    return (kafka_golden_dir / "s2_v2_mixed" / "00000000000000000100.log").read_bytes()


@pytest.fixture(scope="module")
def s3(kafka_golden_dir: Path) -> bytes:
    return (kafka_golden_dir / "s3_legacy" / "00000000000000000000.log").read_bytes()


@pytest.fixture(scope="module")
def expected(kafka_golden_dir: Path) -> dict[str, object]:
    return json.loads((kafka_golden_dir / "expected.json").read_text())


def _translate_table(expected: dict[str, object], name: str) -> dict[int, tuple[int, int, int]]:
    """{last offset: (last offset, position, size)} from the translateOffset results."""
    return {v[0]: tuple(v) for _, v in expected[name] if v is not None}  # type: ignore[union-attr]


def test_s1_header_fields(s1: bytes, expected: dict[str, object]) -> None:
    batches = list(iter_batches(s1))
    assert len(batches) == 30
    assert sum(b.size_in_bytes for b in batches) == expected["s1_log_size"] == len(s1)
    table = _translate_table(expected, "s1_translate_offsets")
    for i, b in enumerate(batches):
        assert (b.last_offset, b.position, b.size_in_bytes) == table[i]
        assert b.magic == 2
        assert b.base_offset == b.last_offset == b.offset == i
        assert b.next_offset == i + 1
        assert b.last_offset_delta == 0
        assert b.partition_leader_epoch == 0
        assert b.record_count == b.count_or_none == 1
        assert b.attributes == 0
        assert b.compression_type is CompressionType.NONE and not b.is_compressed
        assert b.timestamp_type is TimestampType.CREATE_TIME
        assert not (b.is_transactional or b.is_control or b.has_delete_horizon)
        ts = T0 + {10: 2500, 20: 40000}.get(i, i * 1000)
        assert b.max_timestamp == b.base_timestamp == ts
        assert b.delete_horizon_ms == -1
        assert b.producer_id == -1 and b.producer_epoch == -1 and not b.has_producer_id
        assert b.base_sequence == b.last_sequence == -1
        assert b.is_valid()
        b.ensure_valid()
        assert b.checksum == b.compute_checksum()


def test_buffer_is_a_zero_copy_view(s1: bytes) -> None:
    b = list(iter_batches(s1))[3]
    assert isinstance(b.buffer, memoryview)
    assert b.buffer.obj is s1
    assert bytes(b.buffer) == s1[240:320]
    assert len(b) == 80


def test_s2_header_fields(s2: bytes, expected: dict[str, object]) -> None:
    batches = list(iter_batches(s2))
    table = _translate_table(expected, "s2_translate_offsets")
    assert [(b.last_offset, b.position, b.size_in_bytes) for b in batches] == [
        table[k] for k in sorted(table)
    ]
    assert [b.base_offset for b in batches] == [100, 103, 105, 107, 108]
    assert [b.attributes for b in batches] == [0x00, 0x01, 0x10, 0x30, 0x08]
    assert [b.compression_type for b in batches] == [CompressionType.NONE, CompressionType.GZIP] + [
        CompressionType.NONE
    ] * 3
    assert [b.record_count for b in batches] == [3, 2, 2, 1, 2]
    assert all(b.partition_leader_epoch == 3 for b in batches)
    assert all(b.is_valid() for b in batches)
    txn, control, lat = batches[2], batches[3], batches[4]
    assert txn.is_transactional and not txn.is_control
    assert (txn.producer_id, txn.producer_epoch, txn.base_sequence, txn.last_sequence) == (4242, 7, 0, 1)
    assert control.is_transactional and control.is_control
    assert (control.producer_id, control.producer_epoch, control.base_sequence) == (4242, 7, -1)
    assert control.last_sequence == -1
    assert lat.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert lat.max_timestamp == T0 + 50
    assert lat.base_timestamp == T0 + 1  # the builder's first CreateTime, untouched
    assert batches[0].max_timestamp == T0 + 9 and batches[0].base_timestamp == T0 + 5


def test_s3_legacy_header_fields(s3: bytes, expected: dict[str, object]) -> None:
    batches = list(iter_batches(s3))
    table = _translate_table(expected, "s3_translate_offsets")
    assert [(b.last_offset, b.position, b.size_in_bytes) for b in batches] == [
        table[k] for k in sorted(table)
    ]
    assert [b.magic for b in batches] == [0, 0, 0, 1, 1, 1]
    assert [b.compression_type for b in batches] == [CompressionType.NONE] * 2 + [CompressionType.GZIP] + [
        CompressionType.NONE
    ] * 2 + [CompressionType.GZIP]
    assert [b.count_or_none for b in batches] == [1, 1, None, 1, 1, None]
    assert [b.timestamp_type for b in batches] == [TimestampType.NO_TIMESTAMP_TYPE] * 3 + [
        TimestampType.CREATE_TIME
    ] * 3
    assert [b.max_timestamp for b in batches] == [-1, -1, -1, T0 + 4, T0 + 5, T0 + 8]
    for b in batches:
        assert b.is_valid()
        assert b.partition_leader_epoch == -1 and b.producer_id == -1 and b.base_sequence == -1
        assert not (b.is_transactional or b.is_control)
    v0_wrapper, v1_wrapper = batches[2], batches[5]
    # wrapper offset = last inner offset; the base offset needs the inner messages
    assert (v0_wrapper.last_offset, v0_wrapper.base_offset, v0_wrapper.record_count) == (3, 2, 2)
    assert (v1_wrapper.last_offset, v1_wrapper.base_offset, v1_wrapper.record_count) == (8, 6, 3)
    assert v1_wrapper.next_offset == 9


def test_shallow_access_never_decompresses(s2: bytes, s3: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*args: object) -> bytes:
        raise AssertionError("shallow iteration decompressed a batch")

    monkeypatch.setattr(compression, "decompress", boom)
    for data in (s2, s3):
        for b in iter_batches(data):
            (b.last_offset, b.next_offset, b.max_timestamp, b.compression_type, b.timestamp_type)  # noqa: B018
            (b.producer_id, b.partition_leader_epoch, b.count_or_none, b.is_control, b.checksum)  # noqa: B018
            b.ensure_valid()
            if b.magic == 2:
                assert b.base_offset >= 100
    # ... while deep iteration does go through the (patched) codec
    with pytest.raises(AssertionError, match="decompressed"):
        list(list(iter_batches(s2))[1].records())


def test_torn_tail_is_invisible(kafka_golden_dir: Path, expected: dict[str, object]) -> None:
    data = (kafka_golden_dir / "s4_recovery_input_torn_tail.log").read_bytes()
    batches = list(iter_batches(data))
    assert len(batches) == 30
    valid = sum(b.size_in_bytes for b in batches)
    assert valid == expected["s4_torn_tail_log_size_after"]
    assert len(data) - valid == expected["s4_torn_tail_truncated_bytes"]
    assert MemoryRecords(data).valid_bytes == valid


def test_bad_crc_batch_is_found(kafka_golden_dir: Path, expected: dict[str, object]) -> None:
    data = (kafka_golden_dir / "s5_recovery_input_bad_crc_batch12.log").read_bytes()
    bad = [b for b in iter_batches(data) if not b.is_valid()]
    assert [b.position for b in bad] == [expected["s5_bad_crc_batch12_position"]]
    with pytest.raises(CorruptRecordError, match="position 964"):
        bad[0].ensure_valid()
    assert len(data) - bad[0].position == expected["s5_bad_crc_truncated_bytes"]


@pytest.mark.parametrize("tail", range(18))
def test_seventeen_or_fewer_trailing_bytes_stop_iteration(s1: bytes, tail: int) -> None:
    # even garbage that would be a corrupt size is not looked at when <= 17 bytes remain
    data = s1[:160] + b"\x00" * tail
    assert [b.position for b in iter_batches(data)] == [0, 80]


def test_size_below_14_is_corrupt(s1: bytes) -> None:
    data = s1[:80] + struct.pack(">qi", 1, 13) + b"\x00" * 20
    it = iter_batches(data)
    assert next(it).position == 0
    with pytest.raises(CorruptRecordError, match="position 80"):
        next(it)
    with pytest.raises(CorruptRecordError):
        list(iter_batches(b"\x00" * 40))  # a zero-filled (preallocated) tail


def test_start_and_base_position(s1: bytes) -> None:
    batches = list(iter_batches(s1, 800, base_position=10_000))
    assert batches[0].base_offset == 10
    assert batches[0].position == 10_800
    assert len(batches) == 20


def test_in_memory_rules(s1: bytes) -> None:
    bad_magic = bytearray(s1[:80])
    bad_magic[16] = 3
    assert len(list(iter_batches(bytes(bad_magic)))) == 1  # file iteration does not check the magic
    with pytest.raises(CorruptRecordError, match="Invalid magic"):
        list(iter_batches(bytes(bad_magic), in_memory=True))
    with pytest.raises(CorruptRecordError, match="Invalid magic"):
        list(MemoryRecords(bytes(bad_magic)).batches())
    bad_magic[16] = 0xFF
    with pytest.raises(CorruptRecordError, match="-1"):
        list(MemoryRecords(bytes(bad_magic)).batches())
    # 12..17 bytes: the in-memory reader still checks the size field
    with pytest.raises(CorruptRecordError):
        list(iter_batches(s1[:80] + struct.pack(">qi", 0, 5), in_memory=True))


def test_unknown_magic_batches_are_not_valid(s1: bytes) -> None:
    data = bytearray(s1[:80])
    data[16] = 3
    b = RecordBatch(bytes(data))
    assert not b.is_valid()
    with pytest.raises(CorruptRecordError, match="magic"):
        b.decode_columns()


def test_constructor_checks(s1: bytes) -> None:
    with pytest.raises(CorruptRecordError, match="truncated"):
        RecordBatch(s1[:16])
    with pytest.raises(CorruptRecordError, match="79 of 80"):
        RecordBatch(s1[:79], 4096)
    b = RecordBatch(s1, 7)  # longer buffers are trimmed to the entry
    assert b.size_in_bytes == len(b.buffer) == 80 and b.position == 7
    with pytest.raises(CorruptRecordError, match="minimum record overhead"):
        RecordBatch(struct.pack(">qi", 0, 2) + b"\x00" * 30)
    b = RecordBatch(bytearray(s1[:80]))
    assert b.is_valid()


def test_v2_batch_smaller_than_its_header(s1: bytes) -> None:
    entry = struct.pack(">qi", 5, 40) + s1[12:52]  # size 40: a v2 magic but only 52 bytes
    b = next(iter_batches(entry + s1))
    assert b.size_in_bytes == 52 and b.magic == 2
    assert not b.is_valid()
    with pytest.raises(CorruptRecordError, match="smaller than the minimum allowed overhead 61"):
        b.ensure_valid()
    with pytest.raises(CorruptRecordError, match="smaller than the minimum allowed overhead"):
        _ = b.last_offset
    with pytest.raises(CorruptRecordError):
        list(b.records())


def test_header_only_view_with_loader(s2: bytes) -> None:
    calls: list[int] = []
    gzip_batch = list(iter_batches(s2))[1]
    full = bytes(gzip_batch.buffer)

    def loader() -> bytes:
        calls.append(1)
        return full

    b = RecordBatch(full[:MAX_HEADER_SIZE], 112, loader=loader)
    assert (b.base_offset, b.last_offset, b.record_count, b.size_in_bytes) == (103, 104, 2, 111)
    assert b.compression_type is CompressionType.GZIP and b.max_timestamp == T0 + 21
    assert calls == []
    assert b.is_valid()
    assert [r.value for r in b.records()] == [b"gzip-one", b"gzip-two"]
    assert bytes(b.buffer) == full
    assert calls == [1]
    bad = RecordBatch(full[:MAX_HEADER_SIZE], 112, loader=lambda: full[:100])
    with pytest.raises(CorruptRecordError, match="truncated"):
        bad.ensure_valid()


def test_header_only_legacy_wrapper_loads_for_base_offset(s3: bytes) -> None:
    full = s3[242:365]
    b = RecordBatch(full[:MAX_HEADER_SIZE], 242, loader=lambda: full)
    assert b.last_offset == 8 and b.max_timestamp == T0 + 8
    assert b.base_offset == 6
    with pytest.raises(CorruptRecordError, match="header bytes"):
        RecordBatch(full[:20], 242, loader=lambda: full)
    small = s3[38:74]  # a whole 36-byte entry is its own header
    assert RecordBatch(small, 38, loader=lambda: small).base_offset == 1


def test_in_place_updates_reproduce_kafkas_validator_output(kafka_golden_dir: Path) -> None:
    client = bytearray((kafka_golden_dir / "s7_client_v2_none_input.bin").read_bytes())
    b = RecordBatch(client)
    b.set_last_offset(502)
    b.set_partition_leader_epoch(9)
    b.set_max_timestamp(TimestampType.CREATE_TIME, T0 + 30)  # unchanged: no CRC rewrite
    assert (
        bytes(client) == (kafka_golden_dir / "s7_validated_v2_createtime_offset500_epoch9.bin").read_bytes()
    )
    assert b.base_offset == 500 and b.partition_leader_epoch == 9
    b.set_max_timestamp(TimestampType.LOG_APPEND_TIME, T0 + 1000)
    assert (
        bytes(client)
        == (
            kafka_golden_dir / "s7_validated_v2_logappendtime_offset500_epoch9_now1700000001000.bin"
        ).read_bytes()
    )
    assert b.is_valid() and b.timestamp_type is TimestampType.LOG_APPEND_TIME

    legacy = bytearray((kafka_golden_dir / "s7_client_v1_none_input.bin").read_bytes())
    for i, entry in enumerate(iter_batches(legacy)):
        entry.set_last_offset(500 + i)
        entry.set_max_timestamp(TimestampType.LOG_APPEND_TIME, T0 + 1000)
        entry.set_partition_leader_epoch(9)  # no-op for legacy
        assert entry.is_valid()
    assert (
        bytes(legacy)
        == (kafka_golden_dir / "s7_validated_v1_inplace_logappendtime_offset500.bin").read_bytes()
    )


def test_in_place_updates_need_a_writable_buffer(kafka_golden_dir: Path) -> None:
    b = RecordBatch((kafka_golden_dir / "s7_client_v2_none_input.bin").read_bytes())
    with pytest.raises(KafkaLogError, match="read-only"):
        b.set_last_offset(3)
    with pytest.raises(KafkaLogError):
        b.set_max_timestamp(TimestampType.NO_TIMESTAMP_TYPE, 1)


def test_repr_mentions_offsets(s1: bytes, s3: bytes) -> None:
    assert "offsets=[0, 0]" in repr(RecordBatch(s1))
    assert "magic=0" in repr(RecordBatch(s3))
