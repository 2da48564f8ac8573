"""Bad input: truncations, byte flips, absurd lengths and counts, unknown codecs.

Every failure must be ONE kafkalog exception (CorruptRecordError, InvalidRecordError or
UnsupportedCompressionTypeError), raised quickly — never struct.error, IndexError, MemoryError or
a hang. Deep iteration is also exercised without the CRC check, where it must fail cleanly or
yield records.
"""

from __future__ import annotations

import struct
import zlib

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalog.errors import (
    CorruptRecordError,
    InvalidRecordError,
    KafkaLogError,
    UnsupportedCompressionTypeError,
)
from kafkalog.records import (
    CompressionType,
    Header,
    MemoryRecords,
    MemoryRecordsBuilder,
    RecordBatch,
    TimestampType,
    compress,
    iter_batches,
)
from kafkalog.records.default_batch import encode_record
from kafkalog.records.legacy import encode_message

T0 = 1_700_000_000_000
EXPECTED = (CorruptRecordError, InvalidRecordError, UnsupportedCompressionTypeError)


def _build(magic: int, codec: CompressionType, n: int = 4, headers: bool = True) -> bytes:
    b = MemoryRecordsBuilder(magic, codec, TimestampType.CREATE_TIME, 10)
    for i in range(n):
        hdrs = (Header(f"h{i}", b"x" * i), Header("n", None)) if headers and magic == 2 else ()
        b.append(T0 + i, None if i == 1 else b"key%d" % i, b"value %d " % i * 6, hdrs)
    return b.build().to_bytes()


ENTRIES = {
    "v2-none": _build(2, CompressionType.NONE),
    "v2-gzip": _build(2, CompressionType.GZIP),
    "v2-snappy": _build(2, CompressionType.SNAPPY),
    "v2-lz4": _build(2, CompressionType.LZ4),
    "v2-zstd": _build(2, CompressionType.ZSTD),
    "v1-plain": _build(1, CompressionType.NONE, 1),
    "v0-plain": _build(0, CompressionType.NONE, 1),
    "v1-gzip": _build(1, CompressionType.GZIP),
    "v0-snappy": _build(0, CompressionType.SNAPPY),
    "v1-lz4": _build(1, CompressionType.LZ4),
    "v0-lz4": _build(0, CompressionType.LZ4),
}


def _resign(entry: bytearray) -> bytes:
    """Recompute the CRC so the structure checks, not the CRC, must catch the damage."""
    if entry[16] == 2:
        struct.pack_into(">I", entry, 17, crc32c(bytes(entry[21:])))
    else:
        struct.pack_into(">I", entry, 12, zlib.crc32(bytes(entry[16:])))
    return bytes(entry)


def _resize(entry: bytes | bytearray) -> bytearray:
    out = bytearray(entry)
    struct.pack_into(">i", out, 8, len(out) - 12)
    return out


def _deep(data: bytes) -> int:
    """Iterate and deep-decode everything; only kafkalog errors may escape."""
    n = 0
    for batch in iter_batches(data):
        for _ in batch.records():
            n += 1
        batch.decode_columns()
    return n


def _deep_ok_or_kafkalog_error(data: bytes) -> None:
    try:
        _deep(data)
    except KafkaLogError as e:
        assert isinstance(e, EXPECTED), repr(e)


@pytest.mark.parametrize("name", sorted(ENTRIES))
def test_every_truncation_point(name: str) -> None:
    entry = ENTRIES[name]
    for cut in range(len(entry)):
        data = entry[:cut]
        # file iteration: an incomplete entry is invisible
        assert list(iter_batches(data)) == []
        assert MemoryRecords(data).valid_bytes == 0
        with pytest.raises(CorruptRecordError):
            RecordBatch(data)


@pytest.mark.parametrize("name", sorted(ENTRIES))
def test_every_truncation_of_the_payload_with_a_valid_crc(name: str) -> None:
    """Truncate the entry, fix its size and CRC: only the structure checks can object."""
    entry = ENTRIES[name]
    header = 61 if entry[16] == 2 else (26 if entry[16] == 0 else 34)
    for cut in range(header, len(entry)):
        data = _resign(_resize(entry[:cut]))
        batch = RecordBatch(data)
        batch.ensure_valid()
        with pytest.raises(EXPECTED):
            _deep(data)


@pytest.mark.parametrize("name", sorted(ENTRIES))
def test_every_single_byte_flip(name: str) -> None:
    entry = ENTRIES[name]
    is_v2 = entry[16] == 2
    for pos in range(len(entry)):
        for mask in (0x01, 0xFF):
            data = bytearray(entry)
            data[pos] ^= mask
            data = bytes(data)
            if 8 <= pos < 12:  # the size field: the entry now claims another length
                try:
                    batches = list(iter_batches(data))
                except CorruptRecordError:
                    continue
                assert all(b.size_in_bytes != len(entry) for b in batches)
                _deep_ok_or_kafkalog_error(data)
                continue
            batch = RecordBatch(data)
            # v2: the CRC covers attributes..end, plus the CRC field and magic fail by themselves;
            # legacy: the CRC covers magic..end. Base offset and leader epoch are outside.
            if pos >= (16 if is_v2 else 12):
                assert not batch.is_valid(), (name, pos, mask)
                with pytest.raises(CorruptRecordError):
                    batch.ensure_valid()
            else:  # base offset / leader epoch: outside the CRC by design
                assert batch.is_valid()
            _deep_ok_or_kafkalog_error(data)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(sorted(ENTRIES)),
    st.lists(st.tuples(st.integers(0, 10_000), st.integers(1, 255)), min_size=1, max_size=6),
    st.booleans(),
)
def test_random_damage_with_and_without_a_valid_crc(
    name: str, flips: list[tuple[int, int]], resign: bool
) -> None:
    data = bytearray(ENTRIES[name])
    for pos, mask in flips:
        p = 12 + pos % (len(data) - 12)
        data[p] ^= mask
    raw = _resign(data) if resign and data[16] in (0, 1, 2) else bytes(data)
    _deep_ok_or_kafkalog_error(raw)


@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=0, max_size=300), st.sampled_from(sorted(ENTRIES)))
def test_random_bytes_after_a_valid_entry(junk: bytes, name: str) -> None:
    data = ENTRIES[name] + junk
    try:
        _deep(data)
    except KafkaLogError as e:
        assert isinstance(e, EXPECTED), repr(e)
    try:
        for b in MemoryRecords(junk).batches():
            b.is_valid()
            list(b.records())
    except KafkaLogError as e:
        assert isinstance(e, EXPECTED), repr(e)


# --- absurd values behind a valid CRC ----------------------------------------------------------


def _v2_with_records(records_area: bytes, count: int, attributes: int = 0) -> bytes:
    header = bytearray(61)
    struct.pack_into(
        ">qiibIhiqqqhii",
        header,
        0,
        0,
        49 + len(records_area),
        0,
        2,
        0,
        attributes,
        max(count - 1, 0),
        T0,
        T0,
        -1,
        -1,
        -1,
        count,
    )
    return _resign(bytearray(header + records_area))


GOOD_RECORD = encode_record(0, 0, b"key", b"value", (Header("h", b"v"),))


def test_sanity_of_the_crafting_helper() -> None:
    batch = RecordBatch(_v2_with_records(GOOD_RECORD, 1))
    batch.ensure_valid()
    assert [(r.key, r.value) for r in batch.records()] == [(b"key", b"value")]


@pytest.mark.parametrize(
    ("area", "count", "message"),
    [
        (GOOD_RECORD, 2**31 - 1, "premature EOF"),
        (GOOD_RECORD * 3, 2, "records still remaining"),
        (GOOD_RECORD, -1, "invalid record count -1"),
        (GOOD_RECORD, -(2**31), "invalid record count"),
        # record length 2**30
        (b"\x80\x80\x80\x80\x08" + GOOD_RECORD[1:], 1, "Invalid record size"),
        # key length 2**30
        (bytes([GOOD_RECORD[0]]) + b"\x00\x00\x00" + b"\x80\x80\x80\x80\x08" + GOOD_RECORD[5:], 1, None),
        # a varint with a 6th byte
        (b"\x80\x80\x80\x80\x80\x01" + GOOD_RECORD, 1, "too long"),
        # a varlong timestamp delta with an 11th byte
        (b"\x30\x00" + b"\x80" * 10 + b"\x01" + b"\x00" * 40, 1, "too long"),
        # header count larger than the remaining bytes / negative / negative header key length
        (encode_record(0, 0, b"k", b"v")[:-1] + b"\xfe\xff\xff\xff\x07", 1, None),
        (encode_record(0, 0, b"k", b"v")[:-1] + b"\x01", 1, None),
        (encode_record(0, 0, b"k", b"v", (Header("h", b"v"),)).replace(b"\x02h", b"\x01h"), 1, None),
        (b"", 1, "premature EOF"),
        (b"\x02", 1, None),
    ],
)
def test_absurd_lengths_and_counts(area: bytes, count: int, message: str | None) -> None:
    batch = RecordBatch(_v2_with_records(area, count))
    batch.ensure_valid()
    with pytest.raises(InvalidRecordError, match=message):
        list(batch.records())
    with pytest.raises(InvalidRecordError):
        batch.decode_columns()


def test_record_length_mismatch_is_invalid() -> None:
    longer = bytes([GOOD_RECORD[0] + 2]) + GOOD_RECORD[1:] + b"\x00"
    with pytest.raises(InvalidRecordError, match="Invalid record size"):
        list(RecordBatch(_v2_with_records(longer, 1)).records())


def test_empty_count_ignores_trailing_bytes_like_kafka() -> None:
    assert list(RecordBatch(_v2_with_records(b"garbage", 0)).records()) == []


@pytest.mark.parametrize("codec_id", [5, 6, 7])
def test_unknown_v2_codec_ids(codec_id: int) -> None:
    batch = RecordBatch(_v2_with_records(GOOD_RECORD, 1, attributes=codec_id))
    batch.ensure_valid()  # the CRC does not care
    assert batch.last_offset == 0  # other shallow fields still work
    with pytest.raises(UnsupportedCompressionTypeError, match=f"Unknown compression type id: {codec_id}"):
        _ = batch.compression_type
    with pytest.raises(UnsupportedCompressionTypeError):
        list(batch.records())


def test_corrupt_compressed_payload_behind_a_valid_crc() -> None:
    for codec in (1, 2, 3, 4):
        batch = RecordBatch(_v2_with_records(b"\x00\x01\x02not compressed at all" * 3, 3, attributes=codec))
        batch.ensure_valid()
        with pytest.raises(CorruptRecordError):
            list(batch.records())


def test_v2_batch_size_field_beyond_the_data() -> None:
    data = bytearray(ENTRIES["v2-none"])
    struct.pack_into(">i", data, 8, 2**31 - 1)
    assert list(iter_batches(bytes(data))) == []
    with pytest.raises(CorruptRecordError, match="truncated"):
        RecordBatch(bytes(data))


# --- legacy ------------------------------------------------------------------------------------


def _wrapper(magic: int, codec: int, inner: bytes, offset: int, ts: int = T0) -> bytes:
    value = compress(codec, inner, magic) if codec in (1, 2, 3) else inner
    return encode_message(magic, offset, ts, None, value, codec)[0]


def _inner(magic: int, offsets: list[int], attributes: int = 0) -> bytes:
    return b"".join(encode_message(magic, o, T0 + o, b"k", b"v", attributes)[0] for o in offsets)


def test_legacy_wrapper_offset_rules() -> None:
    # v1: relative inner offsets, wrapper offset = last absolute offset
    assert [r.offset for r in RecordBatch(_wrapper(1, 1, _inner(1, [0, 1, 2]), 52)).records()] == [50, 51, 52]
    # wrapper offset 0 tolerated (old librdkafka): base 0
    assert [r.offset for r in RecordBatch(_wrapper(1, 1, _inner(1, [0, 1, 2]), 0)).records()] == [0, 1, 2]
    # non-zero wrapper offset below the last inner offset
    with pytest.raises(
        InvalidRecordError, match="wrapper offset '1' is less than the last inner message offset '2'"
    ):
        list(RecordBatch(_wrapper(1, 1, _inner(1, [0, 1, 2]), 1)).records())
    # v0: inner offsets are absolute whatever the wrapper says
    assert [r.offset for r in RecordBatch(_wrapper(0, 2, _inner(0, [7, 8]), 99)).records()] == [7, 8]


def test_legacy_wrapper_timestamps() -> None:
    create = RecordBatch(_wrapper(1, 1, _inner(1, [0, 1]), 1, ts=T0 + 1))
    assert [(r.timestamp, r.timestamp_type) for r in create.records()] == [
        (T0, TimestampType.CREATE_TIME),
        (T0 + 1, TimestampType.CREATE_TIME),
    ]
    entry = bytearray(_wrapper(1, 1, _inner(1, [0, 1]), 1, ts=T0 + 500))
    entry[17] |= 0x08  # LogAppendTime wrapper: inner records report the wrapper timestamp
    append = RecordBatch(_resign(entry))
    assert [(r.timestamp, r.timestamp_type) for r in append.records()] == [
        (T0 + 500, TimestampType.LOG_APPEND_TIME)
    ] * 2


@pytest.mark.parametrize(
    ("entry", "error", "message"),
    [
        (_wrapper(1, 1, b"", 0), InvalidRecordError, "no inner records"),
        (encode_message(1, 0, T0, None, None, 1)[0], InvalidRecordError, "null value"),
        (_wrapper(1, 1, _inner(1, [0], attributes=1), 0), InvalidRecordError, "must not be compressed"),
        (
            _wrapper(1, 1, struct.pack(">qi", 0, 13) + b"\x00" * 13, 0),
            CorruptRecordError,
            "minimum record overhead",
        ),
        (
            _wrapper(1, 1, _inner(1, [0])[:16] + b"\x03" + _inner(1, [0])[17:], 0),
            InvalidRecordError,
            "Invalid magic 3",
        ),
        (_wrapper(1, 4, _inner(1, [0]), 0), InvalidRecordError, "zstd"),
        (_wrapper(1, 5, _inner(1, [0]), 0), UnsupportedCompressionTypeError, "5"),
        (_wrapper(0, 7, _inner(0, [0]), 0), UnsupportedCompressionTypeError, "7"),
        (_wrapper(1, 1, b"\x00" * 11, 0), InvalidRecordError, "no inner records"),
        # v1 inner message shorter than the v1 overhead
        (
            _wrapper(1, 1, struct.pack(">qi", 0, 16) + _inner(1, [0])[12:28], 0),
            CorruptRecordError,
            "overhead",
        ),
    ],
)
def test_bad_legacy_wrappers(entry: bytes, error: type[Exception], message: str) -> None:
    batch = RecordBatch(entry)
    batch.ensure_valid()
    with pytest.raises(error, match=message):
        list(batch.records())


def test_truncated_last_inner_entry_ends_the_set_like_kafka() -> None:
    inner = _inner(1, [0, 1, 2])
    batch = RecordBatch(_wrapper(1, 1, inner[:-5], 1))
    assert [r.offset for r in batch.records()] == [0, 1]


@pytest.mark.parametrize("klen", [2**30, 2**31 - 1, 100])
def test_legacy_key_length_beyond_the_message(klen: int) -> None:
    entry = bytearray(encode_message(1, 0, T0, b"k", b"v", 0)[0])
    struct.pack_into(">i", entry, 26, klen)
    batch = RecordBatch(_resign(entry))
    with pytest.raises(CorruptRecordError, match="Key size"):
        list(batch.records())


def test_legacy_value_length_beyond_the_message() -> None:
    entry = bytearray(encode_message(0, 0, T0, None, b"value", 0)[0])
    struct.pack_into(">i", entry, 22, 2**30)
    with pytest.raises(CorruptRecordError, match="Value size"):
        list(RecordBatch(_resign(entry)).records())


def test_v1_message_shorter_than_its_overhead() -> None:
    entry = bytearray(struct.pack(">qiIbb", 0, 14, 0, 1, 0) + b"\x00" * 8)  # size 14 with magic 1
    data = _resign(entry)
    batch = RecordBatch(data)
    assert not batch.is_valid()
    with pytest.raises(CorruptRecordError, match="overhead"):
        batch.ensure_valid()
    with pytest.raises(CorruptRecordError):
        list(batch.records())


def test_negative_magic() -> None:
    entry = bytearray(encode_message(0, 0, T0, None, b"value", 0)[0])
    entry[16] = 0xFE
    batch = RecordBatch(_resign(entry))
    assert batch.magic == -2 and not batch.is_valid()
    with pytest.raises(CorruptRecordError):
        list(batch.records())
