"""MemoryRecordsBuilder / MemoryRecords: byte-identical to Kafka's builder on the golden inputs."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkalog.errors import (
    CorruptRecordError,
    InvalidRecordError,
    UnsupportedCompressionTypeError,
    UnsupportedForMessageFormatError,
)
from kafkalog.records import (
    CompressionType,
    ControlRecordType,
    EndTransactionMarker,
    Header,
    MemoryRecords,
    MemoryRecordsBuilder,
    Record,
    RecordBatch,
    RecordsInfo,
    SimpleRecord,
    TimestampType,
    decompress,
    iter_batches,
)

T0 = 1_700_000_000_000
CT = TimestampType.CREATE_TIME
LAT = TimestampType.LOG_APPEND_TIME
NONE, GZIP = CompressionType.NONE, CompressionType.GZIP


def test_s1_batches_are_byte_identical(kafka_golden_dir: Path) -> None:
    golden = (kafka_golden_dir / "s1_v2_single" / "active" / "00000000000000000000.log").read_bytes()
    out = b""
    for i in range(30):
        ts = T0 + {10: 2500, 20: 40000}.get(i, i * 1000)
        record = SimpleRecord(b"value-%d" % i, b"key-%d" % i, ts)
        out += MemoryRecords.with_records(
            2, NONE, [record], base_offset=i, partition_leader_epoch=0
        ).to_bytes()
    assert out == golden


def test_s2_batches_are_byte_identical(kafka_golden_dir: Path) -> None:
    golden = [
        bytes(b.buffer)
        for b in iter_batches((kafka_golden_dir / "s2_v2_mixed" / "00000000000000000100.log").read_bytes())
    ]
    first = MemoryRecords.with_records(
        2,
        NONE,
        [
            SimpleRecord(b"alpha", b"a", T0 + 5, (Header("h1", b"v1"), Header("h-null", None))),
            SimpleRecord(b"no-key", None, T0 + 3),
            SimpleRecord(None, b"tomb", T0 + 9),
        ],
        base_offset=100,
        partition_leader_epoch=3,
    )
    assert first.to_bytes() == golden[0]
    txn = MemoryRecords.with_records(
        2,
        NONE,
        [SimpleRecord(b"txn-one", b"t1", T0 + 30), SimpleRecord(b"txn-two", b"t2", T0 + 31)],
        base_offset=105,
        partition_leader_epoch=3,
        producer_id=4242,
        producer_epoch=7,
        base_sequence=0,
        is_transactional=True,
    )
    assert txn.to_bytes() == golden[2]
    marker = MemoryRecords.with_end_transaction_marker(
        107, T0 + 40, 3, 4242, 7, EndTransactionMarker(ControlRecordType.ABORT, 11)
    )
    assert marker.to_bytes() == golden[3]
    lat = MemoryRecords.with_records(
        2,
        NONE,
        [SimpleRecord(b"lat-one", b"l1", T0 + 1), SimpleRecord(b"lat-two", b"l2", T0 + 2)],
        base_offset=108,
        partition_leader_epoch=3,
        timestamp_type=LAT,
        log_append_time=T0 + 50,
    )
    assert lat.to_bytes() == golden[4]
    # gzip bytes differ across zlib builds; the container and the decompressed records must not
    gz = MemoryRecords.with_records(
        2,
        GZIP,
        [SimpleRecord(b"gzip-one", b"g1", T0 + 20), SimpleRecord(b"gzip-two", b"g2", T0 + 21)],
        base_offset=103,
        partition_leader_epoch=3,
    ).to_bytes()
    assert gz[:17] == golden[1][:8] + gz[8:12] + golden[1][12:17]
    assert gz[21:61] == golden[1][21:61]
    assert decompress(GZIP, gz[61:], 2) == decompress(GZIP, golden[1][61:], 2)


def test_s3_legacy_is_byte_identical(kafka_golden_dir: Path) -> None:
    golden = (kafka_golden_dir / "s3_legacy" / "00000000000000000000.log").read_bytes()
    v0 = MemoryRecords.with_records(
        0, NONE, [SimpleRecord(b"v0-plain-0", b"k0"), SimpleRecord(b"v0-plain-1")]
    )
    assert v0.to_bytes() == golden[:74]
    v1 = MemoryRecords.with_records(
        1, NONE, [SimpleRecord(b"v1-plain-4", b"k4", T0 + 4), SimpleRecord(None, None, T0 + 5)], base_offset=4
    )
    assert v1.to_bytes() == golden[162:242]
    cases = [
        (0, 2, [SimpleRecord(b"v0-gzip-2", b"k2"), SimpleRecord(b"v0-gzip-3", b"k3")], golden[74:162], 26),
        (
            1,
            6,
            [
                SimpleRecord(b"v1-gzip-6", b"k6", T0 + 7),
                SimpleRecord(b"v1-gzip-7", b"k7", T0 + 6),
                SimpleRecord(b"v1-gzip-8", b"k8", T0 + 8),
            ],
            golden[242:365],
            34,
        ),
    ]
    for magic, base, records, expected, header in cases:
        built = MemoryRecords.with_records(magic, GZIP, records, base_offset=base).to_bytes()
        # offset (= last inner offset), magic, attributes, wrapper timestamp (= max inner ts), null key
        assert built[:8] == expected[:8]
        assert built[16 : header - 4] == expected[16 : header - 4]
        # the inner message set (offsets, CRCs, everything) is identical
        assert decompress(GZIP, built[header:], magic) == decompress(GZIP, expected[header:], magic)
        RecordBatch(built).ensure_valid()


def test_s7_up_converted_batch_is_byte_identical(kafka_golden_dir: Path) -> None:
    golden = (kafka_golden_dir / "s7_validated_v1_upconverted_to_v2_offset500_epoch9.bin").read_bytes()
    built = MemoryRecords.with_records(
        2,
        NONE,
        [SimpleRecord(b"1", b"a", T0 + 10), SimpleRecord(b"2", b"b", T0 + 30)],
        base_offset=500,
        partition_leader_epoch=9,
    )
    assert built.to_bytes() == golden
    client = MemoryRecords.with_records(
        2,
        NONE,
        [
            SimpleRecord(b"1", b"a", T0 + 10),
            SimpleRecord(b"2", b"b", T0 + 30),
            SimpleRecord(b"3", b"c", T0 + 20),
        ],
    )
    assert client.to_bytes() == (kafka_golden_dir / "s7_client_v2_none_input.bin").read_bytes()
    v1 = MemoryRecords.with_records(
        1, NONE, [SimpleRecord(b"1", b"a", T0 + 10), SimpleRecord(b"2", b"b", T0 + 30)]
    )
    assert v1.to_bytes() == (kafka_golden_dir / "s7_client_v1_none_input.bin").read_bytes()


def _builder(
    magic: int, codec: CompressionType = NONE, ts_type: TimestampType = CT, **kw: object
) -> MemoryRecordsBuilder:
    return MemoryRecordsBuilder(magic, codec, ts_type, 100, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("magic", "codec", "expected"),
    [
        (2, NONE, RecordsInfo(T0 + 9, 102)),
        (2, GZIP, RecordsInfo(T0 + 9, 102)),
        (1, NONE, RecordsInfo(T0 + 9, 101)),  # the first record with the max timestamp
        (1, GZIP, RecordsInfo(T0 + 9, 102)),
        (0, NONE, RecordsInfo(-1, 102)),
        (0, GZIP, RecordsInfo(-1, 102)),
    ],
)
def test_info_create_time(magic: int, codec: CompressionType, expected: RecordsInfo) -> None:
    b = _builder(magic, codec, CT if magic else TimestampType.NO_TIMESTAMP_TYPE)
    for ts in (T0 + 1, T0 + 9, T0 + 9):
        b.append(ts, b"k", b"v")
    assert b.info() == expected
    assert b.num_records == 3 and b.last_offset == 102


@pytest.mark.parametrize(
    ("magic", "codec", "offset"), [(2, NONE, 102), (2, GZIP, 102), (1, NONE, 100), (1, GZIP, 102)]
)
def test_info_log_append_time(magic: int, codec: CompressionType, offset: int) -> None:
    b = _builder(magic, codec, LAT, log_append_time=T0 + 77)
    for ts in (T0 + 1, T0 + 9, T0 + 3):
        b.append(ts, b"k", b"v")
    assert b.info() == RecordsInfo(T0 + 77, offset)
    recs = list(b.build().records())
    assert [r.timestamp for r in recs] == [T0 + 77] * 3
    assert {r.timestamp_type for r in recs} == {LAT}


def test_v1_log_append_time_writes_the_append_time_into_every_message() -> None:
    b = _builder(1, NONE, LAT, log_append_time=T0 + 5)
    b.append(T0, b"k", b"v")
    entry = next(b.build().batches())
    assert entry.max_timestamp == T0 + 5 and entry.attributes == 0x08


def test_v2_builder_state_and_offsets() -> None:
    b = _builder(2)
    assert b.info() == RecordsInfo(-1, -1)
    b.append(-1, None, b"no timestamp")
    b.append_with_offset(105, T0 + 3, b"k", None, (Header("h", None),))
    b.append(T0 + 2, b"k2", b"v2")
    assert (b.num_records, b.last_offset, b.max_timestamp, b.offset_of_max_timestamp) == (3, 106, T0 + 3, 105)
    built = b.build()
    assert b.build() is built and b.is_closed()
    batch = next(built.batches())
    assert (batch.base_offset, batch.last_offset, batch.record_count, batch.base_timestamp) == (
        100,
        106,
        3,
        -1,
    )
    assert [(r.offset, r.timestamp) for r in batch.records()] == [(100, -1), (105, T0 + 3), (106, T0 + 2)]
    with pytest.raises(InvalidRecordError, match="closed"):
        b.append(T0, b"k", b"v")


def test_empty_builder_builds_empty_records() -> None:
    for magic in (0, 1, 2):
        records = _builder(magic).build()
        assert records.size_in_bytes == 0 and list(records.batches()) == []


def test_override_last_offset() -> None:
    b = _builder(2)
    b.append(T0, b"k", b"v")
    b.override_last_offset(110)
    batch = next(b.build().batches())
    assert (batch.base_offset, batch.last_offset, batch.record_count) == (100, 110, 1)
    legacy = _builder(1, GZIP)
    legacy.append(T0, b"k", b"v")
    legacy.override_last_offset(104)
    assert next(legacy.build().batches()).last_offset == 104


@pytest.mark.parametrize("magic", [0, 1, 2])
def test_append_misuse(magic: int) -> None:
    b = _builder(magic)
    b.append_with_offset(105, T0, b"k", b"v")
    with pytest.raises(InvalidRecordError, match="Illegal offset 105 following previous offset 105"):
        b.append_with_offset(105, T0, b"k", b"v")
    with pytest.raises(InvalidRecordError, match="Invalid negative timestamp -2"):
        b.append(-2, b"k", b"v")
    with pytest.raises(InvalidRecordError, match="Maximum offset delta"):
        b.append_with_offset(100 + 2**31, T0, b"k", b"v")
    if magic < 2:
        with pytest.raises(UnsupportedForMessageFormatError, match="headers"):
            b.append(T0, b"k", b"v", (Header("h", b"x"),))
        with pytest.raises(UnsupportedForMessageFormatError):
            b.append_control_record(T0, ControlRecordType.COMMIT, b"")
    else:
        with pytest.raises(
            InvalidRecordError, match="Control records can only be appended to control batches"
        ):
            b.append_control_record(T0, ControlRecordType.COMMIT, b"")


def test_constructor_misuse() -> None:
    with pytest.raises(UnsupportedCompressionTypeError):
        MemoryRecordsBuilder(1, CompressionType.ZSTD, CT, 0)
    with pytest.raises(UnsupportedCompressionTypeError):
        MemoryRecordsBuilder(2, 6, CT, 0)
    with pytest.raises(InvalidRecordError):
        MemoryRecordsBuilder(3, NONE, CT, 0)
    with pytest.raises(InvalidRecordError, match="TimestampType"):
        MemoryRecordsBuilder(1, NONE, TimestampType.NO_TIMESTAMP_TYPE, 0)
    with pytest.raises(UnsupportedForMessageFormatError):
        MemoryRecordsBuilder(1, NONE, CT, 0, is_transactional=True)
    with pytest.raises(UnsupportedForMessageFormatError):
        MemoryRecordsBuilder(0, NONE, CT, 0, is_control=True)


def test_producer_state_is_checked_at_build() -> None:
    cases = [
        ({"is_transactional": True}, "valid producer ID"),
        ({"producer_id": 5}, "producer epoch"),
        ({"producer_id": 5, "producer_epoch": 1}, "sequence"),
    ]
    for kwargs, message in cases:
        b = _builder(2, **kwargs)
        b.append(T0, b"k", b"v")
        with pytest.raises(InvalidRecordError, match=message):
            b.build()
    legacy = _builder(1, producer_id=5, producer_epoch=1, base_sequence=0)
    legacy.append(T0, b"k", b"v")
    with pytest.raises(UnsupportedForMessageFormatError, match="Idempotent"):
        legacy.build()
    ok = _builder(2)
    ok.set_producer_state(5, 1, 10, True)
    ok.append(T0, b"k", b"v")
    batch = next(ok.build().batches())
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence, batch.is_transactional) == (
        5,
        1,
        10,
        True,
    )
    assert next(batch.records()).sequence == 10


def test_end_transaction_marker_rules() -> None:
    marker = EndTransactionMarker(ControlRecordType.COMMIT, 4)
    with pytest.raises(InvalidRecordError, match="producerId"):
        _builder(2, is_control=True, is_transactional=True).append_end_txn_marker(T0, marker)
    with pytest.raises(InvalidRecordError, match="transactional"):
        _builder(2, is_control=True, producer_id=3, producer_epoch=0).append_end_txn_marker(T0, marker)
    control = _builder(2, is_control=True)
    with pytest.raises(InvalidRecordError, match="Control records"):
        control.append(T0, b"k", b"v")
    records = MemoryRecords.with_end_transaction_marker(50, T0, 2, 42, 3, marker)
    batch = next(records.batches())
    assert (batch.attributes, batch.is_control, batch.is_transactional, batch.base_sequence) == (
        0x30,
        True,
        True,
        -1,
    )
    (record,) = batch.records()
    assert EndTransactionMarker.deserialize(record) == marker and record.offset == 50


def test_leader_change_control_record() -> None:
    b = _builder(2, is_control=True)
    b.append_control_record(T0, ControlRecordType.LEADER_CHANGE, b"\x00\x00payload")
    (record,) = b.build().records()
    assert record.key == b"\x00\x00\x00\x02" and record.value == b"\x00\x00payload"


def test_compression_level_and_codecs() -> None:
    records = [SimpleRecord(b"v" * 500, b"k", T0)] * 5
    for codec in (GZIP, CompressionType.SNAPPY, CompressionType.LZ4, CompressionType.ZSTD):
        for level in (None, 1):
            if codec is CompressionType.SNAPPY and level is not None:
                continue
            built = MemoryRecords.with_records(2, codec, records, compression_level=level)
            batch = next(built.batches())
            assert batch.compression_type is codec
            assert batch.size_in_bytes < 500
            assert [r.value for r in batch.records()] == [b"v" * 500] * 5


def test_memory_records_api(kafka_golden_dir: Path) -> None:
    data = (kafka_golden_dir / "s4_recovery_input_torn_tail.log").read_bytes()
    records = MemoryRecords(data)
    assert records.size_in_bytes == len(records) == 2480
    assert records.valid_bytes == 2440
    assert len(list(records)) == 30
    assert [r.offset for r in records.records()] == list(range(30))
    assert records == MemoryRecords(bytearray(data))
    assert records.buffer.obj is data and records.to_bytes() == data
    assert MemoryRecords.EMPTY.size_in_bytes == 0  # type: ignore[attr-defined]
    assert "2480" in repr(records)
    with pytest.raises(CorruptRecordError):
        list(MemoryRecords(b"\x00" * 30).batches())


def test_with_records_log_append_time_defaults_to_now() -> None:
    batch = next(
        MemoryRecords.with_records(2, NONE, [SimpleRecord(b"v", None, 5)], timestamp_type=LAT).batches()
    )
    assert batch.max_timestamp > T0
    assert next(batch.records()) == Record(0, batch.max_timestamp, LAT, None, b"v")
