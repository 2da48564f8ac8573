"""Deep decoding of every golden record file, asserting the values the golden README states."""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path

import pytest

from kafkalog.errors import InvalidRecordError
from kafkalog.records import (
    CompressionType,
    ControlRecordType,
    EndTransactionMarker,
    Header,
    MemoryRecords,
    Record,
    RecordBatch,
    TimestampType,
    decompress,
    iter_batches,
    parse_control_record_type,
)
from tests.conftest import GOLDEN_DIR

T0 = 1_700_000_000_000
CT = TimestampType.CREATE_TIME
LAT = TimestampType.LOG_APPEND_TIME
NTT = TimestampType.NO_TIMESTAMP_TYPE


def _records(data: bytes) -> list[Record]:
    out = []
    for b in iter_batches(data):
        b.ensure_valid()
        out.extend(b.records())
    return out


def _check_columns_match_records(data: bytes) -> None:
    for b in iter_batches(data):
        assert b.decode_columns().to_records() == list(b.records())


def test_s1(kafka_golden_dir: Path) -> None:
    for sub in ("active", "rolled"):
        data = (kafka_golden_dir / "s1_v2_single" / sub / "00000000000000000000.log").read_bytes()
        recs = _records(data)
        assert len(recs) == 30
        for i, r in enumerate(recs):
            ts = T0 + {10: 2500, 20: 40000}.get(i, i * 1000)
            assert r == Record(i, ts, CT, b"key-%d" % i, b"value-%d" % i, (), -1, None)


def test_s2(kafka_golden_dir: Path) -> None:
    data = (kafka_golden_dir / "s2_v2_mixed" / "00000000000000000100.log").read_bytes()
    recs = _records(data)
    assert recs[:3] == [
        Record(100, T0 + 5, CT, b"a", b"alpha", (Header("h1", b"v1"), Header("h-null", None))),
        Record(101, T0 + 3, CT, None, b"no-key"),
        Record(102, T0 + 9, CT, b"tomb", None),
    ]
    assert recs[3:5] == [
        Record(103, T0 + 20, CT, b"g1", b"gzip-one"),
        Record(104, T0 + 21, CT, b"g2", b"gzip-two"),
    ]
    # transactional records carry sequences baseSequence + offsetDelta
    assert recs[5:7] == [
        Record(105, T0 + 30, CT, b"t1", b"txn-one", (), 0),
        Record(106, T0 + 31, CT, b"t2", b"txn-two", (), 1),
    ]
    marker = recs[7]
    assert (marker.offset, marker.key, marker.value) == (
        107,
        b"\x00\x00\x00\x00",
        b"\x00\x00\x00\x00\x00\x0b",
    )
    assert parse_control_record_type(marker.key) is ControlRecordType.ABORT
    assert EndTransactionMarker.deserialize(marker) == EndTransactionMarker(ControlRecordType.ABORT, 11)
    # LogAppendTime: every record reports the batch max timestamp, not its stored delta
    assert recs[8:] == [
        Record(108, T0 + 50, LAT, b"l1", b"lat-one"),
        Record(109, T0 + 50, LAT, b"l2", b"lat-two"),
    ]
    _check_columns_match_records(data)


def test_s3_legacy(kafka_golden_dir: Path) -> None:
    data = (kafka_golden_dir / "s3_legacy" / "00000000000000000000.log").read_bytes()
    recs = _records(data)
    assert [(r.offset, r.timestamp, r.timestamp_type, r.key, r.value) for r in recs] == [
        (0, -1, NTT, b"k0", b"v0-plain-0"),
        (1, -1, NTT, None, b"v0-plain-1"),
        (2, -1, NTT, b"k2", b"v0-gzip-2"),
        (3, -1, NTT, b"k3", b"v0-gzip-3"),
        (4, T0 + 4, CT, b"k4", b"v1-plain-4"),
        (5, T0 + 5, CT, None, None),
        (6, T0 + 7, CT, b"k6", b"v1-gzip-6"),
        (7, T0 + 6, CT, b"k7", b"v1-gzip-7"),
        (8, T0 + 8, CT, b"k8", b"v1-gzip-8"),
    ]
    assert all(r.headers == () and r.sequence == -1 for r in recs)
    batches = list(iter_batches(data))
    # inner messages as stored: v0 absolute offsets 2,3; v1 relative 0,1,2 -> absolute 6,7,8
    assert [m.offset for m in batches[2].legacy_messages()] == [2, 3]
    inner_v1 = batches[5].legacy_messages()
    assert [m.offset for m in inner_v1] == [6, 7, 8]
    assert all(m.is_valid() and m.magic == 1 and not m.is_compressed for m in inner_v1)
    assert batches[5].max_timestamp == max(m.timestamp for m in inner_v1) == T0 + 8
    # every legacy record exposes its own stored CRC-32
    for b in batches:
        for m in b.legacy_messages():
            m.ensure_valid()
            assert m.crc == zlib.crc32(bytes(m.message[4:]))
    assert [r.checksum for r in recs] == [m.crc for b in batches for m in b.legacy_messages()]
    _check_columns_match_records(data)


def test_s7_inputs_and_outputs(kafka_golden_dir: Path) -> None:
    def load(name: str) -> list[Record]:
        return _records((kafka_golden_dir / name).read_bytes())

    v2_in = load("s7_client_v2_none_input.bin")
    assert [(r.offset, r.timestamp, r.key, r.value) for r in v2_in] == [
        (0, T0 + 10, b"a", b"1"),
        (1, T0 + 30, b"b", b"2"),
        (2, T0 + 20, b"c", b"3"),
    ]
    created = load("s7_validated_v2_createtime_offset500_epoch9.bin")
    assert [(r.offset, r.timestamp, r.timestamp_type) for r in created] == [
        (500, T0 + 10, CT),
        (501, T0 + 30, CT),
        (502, T0 + 20, CT),
    ]
    appended = load("s7_validated_v2_logappendtime_offset500_epoch9_now1700000001000.bin")
    assert [(r.offset, r.timestamp, r.timestamp_type) for r in appended] == [
        (500, T0 + 1000, LAT),
        (501, T0 + 1000, LAT),
        (502, T0 + 1000, LAT),
    ]
    v1_in = load("s7_client_v1_none_input.bin")
    assert [(r.offset, r.timestamp, r.timestamp_type, r.key, r.value) for r in v1_in] == [
        (0, T0 + 10, CT, b"a", b"1"),
        (1, T0 + 30, CT, b"b", b"2"),
    ]
    v1_lat = load("s7_validated_v1_inplace_logappendtime_offset500.bin")
    assert [(r.offset, r.timestamp, r.timestamp_type) for r in v1_lat] == [
        (500, T0 + 1000, LAT),
        (501, T0 + 1000, LAT),
    ]
    up = load("s7_validated_v1_upconverted_to_v2_offset500_epoch9.bin")
    assert [(r.offset, r.timestamp, r.timestamp_type, r.key, r.value) for r in up] == [
        (500, T0 + 10, CT, b"a", b"1"),
        (501, T0 + 30, CT, b"b", b"2"),
    ]
    batch = RecordBatch(
        (kafka_golden_dir / "s7_validated_v1_upconverted_to_v2_offset500_epoch9.bin").read_bytes()
    )
    assert (batch.magic, batch.partition_leader_epoch, batch.max_timestamp) == (2, 9, T0 + 30)


def test_s7_expected_max_timestamps(kafka_golden_dir: Path) -> None:
    expected = json.loads((kafka_golden_dir / "expected.json").read_text())
    for name, key in [
        ("s7_validated_v2_createtime_offset500_epoch9.bin", "s7_createtime_maxTs_shallow"),
        ("s7_validated_v2_logappendtime_offset500_epoch9_now1700000001000.bin", "s7_logappend_maxTs_shallow"),
        ("s7_validated_v1_upconverted_to_v2_offset500_epoch9.bin", "s7_upconvert_maxTs_shallow"),
    ]:
        b = RecordBatch((kafka_golden_dir / name).read_bytes())
        assert [b.max_timestamp, b.last_offset] == expected[key]


def test_kafka_python_broker_data(golden_dir: Path) -> None:
    v0 = _records((golden_dir / "kafka_python_record_batch_data_v0.bin").read_bytes())
    assert [(r.offset, r.key, r.value, r.timestamp_type) for r in v0] == [
        (0, None, b"123", NTT),
        (1, None, b"", NTT),
        (2, None, b"", NTT),
        (3, None, b"123", NTT),
    ]
    assert struct.unpack(">i", struct.pack(">I", v0[0].checksum))[0] == -22012481

    v1 = _records((golden_dir / "kafka_python_record_batch_data_v1.bin").read_bytes())
    assert v1[0].checksum == 1199974594
    assert [(r.offset, r.timestamp, r.value) for r in v1] == [
        (0, 1503648000942, b"123"),
        (1, 1503648001984, b""),
        (2, 1503648002162, b""),
        (3, 1503648004099, b"123"),
    ]

    data = (golden_dir / "kafka_python_record_batch_data_v2.bin").read_bytes()
    batches = list(iter_batches(data))
    assert [(b.base_offset, b.last_offset) for b in batches] == [(0, 0), (1, 2), (3, 3), (0, 0)]
    v2 = _records(data)
    assert [(r.offset, r.timestamp, r.key, r.value, r.checksum) for r in v2[:4]] == [
        (0, 1503229838908, None, b"123", None),
        (1, 1503229959532, None, b"", None),
        (2, 1503229959700, None, b"", None),
        (3, 1503229962141, None, b"123", None),
    ]
    assert v2[4].headers == (Header("hkey", b"hval"),) and v2[4].value == b"hdr"


KAFKA_GO = sorted(p.name for p in (GOLDEN_DIR / "kafka_go_fixtures").glob("*.records.bin"))


@pytest.mark.parametrize("name", KAFKA_GO)
def test_kafka_go_broker_captures(golden_dir: Path, name: str) -> None:
    data = (golden_dir / "kafka_go_fixtures" / name).read_bytes()
    batches = list(iter_batches(data))
    assert sum(b.size_in_bytes for b in batches) == len(data)
    recs = _records(data)
    # one log, mixed formats, offsets contiguous from 0
    assert [r.offset for r in recs] == list(range(len(recs)))
    assert {b.magic for b in batches} == {int(tok[1]) for tok in name.split(".")[0].split("-")}
    for b in batches:
        assert b.compression_type in (CompressionType.NONE, CompressionType.GZIP)
        if b.magic == 1 and b.is_compressed:
            inner = b.legacy_messages()
            assert b.last_offset == inner[-1].offset  # wrapper offset = last absolute inner offset
            assert b.max_timestamp == max(m.timestamp for m in inner)
    for r in recs:
        assert r.key is not None and r.value is not None
        assert json.loads(r.value)["count"] >= 0
        assert r.timestamp_type is CT and r.timestamp > 1_600_000_000_000
    _check_columns_match_records(data)


def test_kafka_go_v1_wrappers_store_relative_inner_offsets(golden_dir: Path) -> None:
    data = (golden_dir / "kafka_go_fixtures" / "v1c-v1-v1c.records.bin").read_bytes()
    first = next(iter_batches(data))
    assert first.magic == 1 and first.is_compressed and first.last_offset == 1
    # decompress by hand: stored inner offsets are 0, 1 (relative)
    value_len = struct.unpack_from(">i", first.buffer, 30)[0]
    inner = decompress(1, first.buffer[34 : 34 + value_len], 1)
    assert struct.unpack_from(">q", inner, 0)[0] == 0


def _sarama(golden_dir: Path, name: str) -> bytes:
    data = (golden_dir / "sarama" / name).read_bytes()
    if name.startswith("legacy"):
        data = struct.pack(">qi", 0, len(data)) + data  # bare messages: add the log overhead
    return data


SARAMA_RECORD = Record(
    0, 1479847795005, CT, b"\x01\x02\x03\x04", b"\x05\x06\x07", (Header("\x08\t\n", b"\x0b\x0c"),), 0
)


@pytest.mark.parametrize(
    ("name", "codec"),
    [
        ("record_batch_2_uncompressed_record.bin", CompressionType.NONE),
        ("record_batch_3_gzipped_record.bin", CompressionType.GZIP),
        ("record_batch_4_snappy_record.bin", CompressionType.SNAPPY),
        ("record_batch_5_lz4_record.bin", CompressionType.LZ4),
    ],
)
def test_sarama_batches(golden_dir: Path, name: str, codec: CompressionType) -> None:
    b = RecordBatch(_sarama(golden_dir, name))
    b.ensure_valid()
    assert b.compression_type is codec
    assert (b.producer_id, b.max_timestamp, b.base_timestamp) == (0, 0, 1479847795000)
    assert list(b.records()) == [SARAMA_RECORD]


@pytest.mark.parametrize("name", ["record_batch_0_empty_record.bin", "record_batch_1_control_batch.bin"])
def test_sarama_empty_batches(golden_dir: Path, name: str) -> None:
    b = RecordBatch(_sarama(golden_dir, name))
    b.ensure_valid()
    assert b.record_count == 0 and list(b.records()) == []
    assert b.is_control == ("control" in name)
    assert b.size_in_bytes == 61


@pytest.mark.parametrize(
    ("name", "magic", "codec", "expected"),
    [
        ("legacy_message_emptyMessage.bin", 0, CompressionType.NONE, [(0, -1, NTT, None, None)]),
        ("legacy_message_emptyV1Message.bin", 1, CompressionType.NONE, [(0, 0, CT, None, None)]),
        (
            "legacy_message_emptyBulkGzipMessage.bin",
            0,
            CompressionType.GZIP,
            [(0, -1, NTT, None, b""), (1, -1, NTT, None, b"")],
        ),
        (
            "legacy_message_emptyBulkSnappyMessage.bin",
            0,
            CompressionType.SNAPPY,
            [(0, -1, NTT, b"", b""), (1, -1, NTT, b"", b"")],
        ),
        # v0 inner messages inside a v1 wrapper (offset 0 tolerated): no timestamps
        (
            "legacy_message_emptyBulkLZ4Message.bin",
            1,
            CompressionType.LZ4,
            [(0, -1, NTT, None, b""), (1, -1, NTT, None, b"")],
        ),
    ],
)
def test_sarama_legacy_messages(
    golden_dir: Path, name: str, magic: int, codec: CompressionType, expected: list[tuple[object, ...]]
) -> None:
    b = RecordBatch(_sarama(golden_dir, name))
    b.ensure_valid()
    assert (b.magic, b.compression_type) == (magic, codec)
    assert [(r.offset, r.timestamp, r.timestamp_type, r.key, r.value) for r in b.records()] == expected


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("legacy_message_emptyGzipMessage.bin", "no inner records"),
        ("legacy_message_emptyLZ4Message.bin", "no inner records"),
        ("legacy_message_emptyZSTDMessage.bin", "zstd"),
        ("legacy_message_emptyBulkZSTDMessage.bin", "zstd"),
    ],
)
def test_sarama_legacy_wrappers_kafka_rejects(golden_dir: Path, name: str, message: str) -> None:
    b = RecordBatch(_sarama(golden_dir, name))
    b.ensure_valid()  # the CRC is fine, deep iteration is not
    with pytest.raises(InvalidRecordError, match=message):
        list(b.records())


@pytest.mark.parametrize("name", ["cc_gleam_cluster_metadata.log", "cc_go_cluster_metadata.log"])
def test_kraft_metadata_logs(golden_dir: Path, name: str) -> None:
    data = (golden_dir / name).read_bytes()
    recs = _records(data)
    first = 0 if "gleam" in name else 1
    assert [r.offset for r in recs] == list(range(first, first + len(recs)))
    assert recs[0].value is not None and b"metadata.version" in recs[0].value
    assert all(r.key is None and r.value and r.value[0] == 1 for r in recs)  # frame version 1
    assert MemoryRecords(data).valid_bytes == len(data)
