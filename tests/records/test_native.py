"""The C record walker against the pure-Python one: same results, same errors, for valid and
damaged records areas alike (the Python walk is the reference; it follows Kafka's
``DefaultRecord.readFrom``, which test_corruption and test_default_batch check)."""

from __future__ import annotations

import importlib
import struct
from collections.abc import Callable
from functools import partial

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalog.errors import InvalidRecordError
from kafkalog.records import columnar, default_batch
from kafkalog.records.columnar import ColumnAccumulator, ColumnChunk
from kafkalog.records.default_batch import (
    decode_records_area,
    decode_records_area_native,
    encode_record,
    summarize_records_area,
)
from kafkalog.records.memory import MemoryRecords
from kafkalog.records.native import native, native_disabled
from kafkalog.records.types import CompressionType, Header, SimpleRecord, TimestampType

T0 = 1_700_000_000_000

# The extension is built by `make` (setup.py); the parity tests need it even when
# KAFKALOG_PURE_PYTHON makes the rest of the suite use the Python walk.
_native = importlib.import_module("kafkalog.records._native")


def test_the_extension_is_in_use() -> None:
    if native_disabled():
        assert native is None
    else:
        assert native is _native, "kafkalog.records._native was built but is not used"


@pytest.fixture(autouse=True)
def _c_walker(monkeypatch: pytest.MonkeyPatch) -> None:
    """The C walker in use for these tests, whatever KAFKALOG_PURE_PYTHON says."""
    monkeypatch.setattr(default_batch, "native", _native)
    monkeypatch.setattr(columnar, "native", _native)


# --- strategies ----------------------------------------------------------------------------------

# Lengths of one, two and three varint bytes: the walkers take records of short varints and no
# headers a faster way than the others, and must read both kinds (and their damage) alike.
_payload = st.one_of(st.none(), st.binary(max_size=40), st.binary(min_size=60, max_size=300),
                     st.binary(min_size=8200, max_size=8300))
_header = st.builds(Header, st.text(max_size=6), _payload)
_record = st.tuples(
    # timestamp delta: about the two- and three-byte varints' limits, and any
    st.one_of(st.integers(-8200, 8200), st.integers(-(2**20) - 2, -(2**20) + 2),
              st.integers(2**20 - 2, 2**20 + 2), st.integers(-(2**40), 2**40)),
    _payload,
    _payload,
    st.one_of(st.just([]), st.lists(_header, max_size=3)),
)


@st.composite
def _areas(draw: st.DrawFn) -> tuple[bytes, int]:
    """(records area, record count); offset deltas mostly 0, 1, 2, ... but not always."""
    records = draw(st.lists(_record, max_size=12))
    sequential = draw(st.booleans())
    parts = []
    for i, (ts_delta, key, value, headers) in enumerate(records):
        delta = i if sequential else draw(st.integers(-(2**31), 2**31 - 1))
        parts.append(encode_record(delta, ts_delta, key, value, headers))
    return b"".join(parts), len(records)


def _damage(data: bytes, draw: st.DrawFn) -> bytes:
    out = bytearray(data)
    kind = draw(st.sampled_from(["flip", "cut", "junk", "none"]))
    if kind == "flip" and out:
        for _ in range(draw(st.integers(1, 3))):
            i = draw(st.integers(0, len(out) - 1))
            out[i] ^= draw(st.integers(1, 255))
    elif kind == "cut" and out:
        del out[draw(st.integers(0, len(out) - 1)):]
    elif kind == "junk":
        out += draw(st.binary(min_size=1, max_size=8))
    return bytes(out)


def _category(message: str) -> str:
    """What kind of error a message reports (the Python walk names EOF inside a long varint
    slightly differently from EOF at a field start; both are 'premature')."""
    m = message.lower()
    for key in ("premature", "too long", "invalid record size", "still remaining", "header"):
        if key in m:
            return key
    return m


def _outcome(fn: Callable[[], object]) -> tuple[str, object]:
    try:
        return ("ok", fn())
    except InvalidRecordError as e:
        return ("error", _category(str(e)))


# --- decode ---------------------------------------------------------------------------------------


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_areas(), st.data(), st.integers(-3, 3), st.booleans())
def test_decode_matches_the_python_walk(area: tuple[bytes, int], data: st.DataObject, count_shift: int,
                                         log_append_time: bool) -> None:
    raw, count = area
    damaged = _damage(raw, data.draw)
    count = max(count + count_shift, 0) if data.draw(st.booleans()) else count
    prefix = data.draw(st.binary(max_size=5))
    buf = prefix + damaged
    lat = T0 + 5 if log_append_time else None
    args = (len(prefix), count, 1000, T0, lat, "batch W")
    expected = _outcome(lambda: decode_records_area(buf, *args))
    got = _outcome(lambda: decode_records_area_native(memoryview(buf), *args))
    assert got == expected


@pytest.mark.parametrize("junk", [b"\x80" * 5, b"\x80" * 6, b"\x00\x80\x80\x80\x80\x80"])
def test_an_area_too_short_for_its_count_reports_what_the_walk_meets(junk: bytes) -> None:
    """Fewer bytes than even one record needs: the C walks used to say "premature EOF" from their
    room check before reading anything; the Python walk (and Kafka's) reads the record and reports
    what it meets first, here a length varint longer than 5 bytes. Found by the property above."""
    args = (0, 1, 1000, T0, None, "batch W")
    expected = _outcome(lambda: decode_records_area(junk, *args))
    assert _outcome(lambda: decode_records_area_native(memoryview(junk), *args)) == expected
    assert expected[0] == "error"


@pytest.mark.parametrize("key_size", [9, 70, 9000])  # one-, two- and three-byte key lengths
def test_every_byte_of_a_short_record_damaged_reads_as_the_python_walk(key_size: int) -> None:
    """The walkers' short way (a record of short varints and no headers, well inside the buffer)
    gives exactly what the careful way gives, whichever byte of such a record is wrong: each byte
    of the first record set to values that change a varint's length, sign or end (of a long key,
    only its first and last bytes: the ones in between are data)."""
    raw = b"".join(encode_record(i, 3 * i, b"k" * key_size, b"v" * 48, []) for i in range(4))
    first = len(encode_record(0, 0, b"k" * key_size, b"v" * 48, []))
    args = (0, 4, 1000, T0, None, "batch W")
    kinds = set()
    for at in range(first):
        if 16 <= at < first - 64:
            continue
        for value in (0x00, 0x01, 0x02, 0x7E, 0x7F, 0x80, 0x81, 0xFF):
            damaged = bytearray(raw)
            damaged[at] = value
            buf = bytes(damaged)
            expected = _outcome(partial(decode_records_area, buf, *args))
            got = _outcome(partial(decode_records_area_native, memoryview(buf), *args))
            assert got == expected, (at, value)
            if expected[0] == "error":
                kinds.add(expected[1])
    assert {"premature", "invalid record size", "header"} <= kinds  # what a record's bytes can get wrong


def test_decode_error_messages_name_the_batch_and_record() -> None:
    good = encode_record(0, 0, b"k", b"v")
    with pytest.raises(InvalidRecordError, match=r"premature EOF reached \(batch W, record 1\)"):
        decode_records_area_native(good, 0, 2, 0, T0, None, "batch W")
    trailing = r"still remaining in file \(batch W: 9 bytes after 1 records\)"
    with pytest.raises(InvalidRecordError, match=trailing):
        decode_records_area_native(good * 2, 0, 1, 0, T0, None, "batch W")


def test_invalid_utf8_header_keys_are_replaced_like_python() -> None:
    record = encode_record(0, 0, b"k", b"v", (Header("ab", b"x"),)).replace(b"\x04ab", b"\x04\xff\xfe")
    expected = decode_records_area(record, 0, 1, 0, T0, None, "W")
    got = decode_records_area_native(record, 0, 1, 0, T0, None, "W")
    assert got == expected
    assert got[4][0][0].key == "\ufffd\ufffd"


def test_counts_are_never_trusted_for_allocation() -> None:
    good = encode_record(0, 0, b"k", b"v")
    with pytest.raises(InvalidRecordError, match="premature EOF"):
        decode_records_area_native(good, 0, 2**31 - 1, 0, T0, None, "W")
    with pytest.raises(InvalidRecordError, match="premature EOF"):
        summarize_records_area(good, 0, 2**31 - 1, T0, "W")
    acc = ColumnAccumulator(True, use_native=True)
    with pytest.raises(ValueError):
        acc._impl.add_v2(good, 0, 2**31 - 1, 0, T0, 0, None, 0, 2**62)
    assert len(acc) == 0


# --- summary --------------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_areas(), st.data(), st.sampled_from([T0, -1, 0]))
def test_summary_matches_the_python_walk(area: tuple[bytes, int], data: st.DataObject, base_ts: int) -> None:
    raw, count = area
    buf = _damage(raw, data.draw)
    native_result = _outcome(lambda: summarize_records_area(buf, 0, count, base_ts, "W"))
    saved = default_batch.native
    default_batch.native = None
    try:
        python_result = _outcome(lambda: summarize_records_area(buf, 0, count, base_ts, "W"))
    finally:
        default_batch.native = saved
    assert native_result == python_result


def test_summary_of_no_timestamps_and_null_keys() -> None:
    area = b"".join([encode_record(0, 0, None, b"v"), encode_record(1, 7, b"k", b"v"),
                     encode_record(3, -1, b"k", None)])
    s = summarize_records_area(area, 0, 3, -1, "W")
    # base -1: deltas 0 and 7 give -1 (no timestamp) and 6; delta -1 gives -2
    assert (s.count, s.min_timestamp, s.max_timestamp) == (3, -2, 6)
    assert s.has_no_timestamp and s.has_null_key and not s.sequential_offsets


# --- column accumulator ---------------------------------------------------------------------------


def _chunk_bytes(chunk: ColumnChunk) -> tuple:
    def col(c: object) -> tuple:
        return (bytes(c.validity), c.null_count, bytes(c.offsets), bytes(c.data))  # type: ignore[attr-defined]

    headers = None
    if chunk.headers is not None:
        h = chunk.headers
        headers = (bytes(h.validity), h.null_count, bytes(h.offsets), col(h.keys), col(h.values))
    return (chunk.rows, bytes(chunk.offsets), bytes(chunk.timestamps), bytes(chunk.timestamp_types),
            col(chunk.keys), col(chunk.values), headers)


_simple = st.builds(
    SimpleRecord,
    value=_payload,
    key=_payload,
    timestamp=st.integers(0, 10**6).map(lambda d: T0 + d),
    headers=st.lists(_header, max_size=2).map(tuple),
)


@st.composite
def _batches(draw: st.DrawFn) -> list[MemoryRecords]:
    out = []
    next_offset = draw(st.integers(0, 10**9))
    for _ in range(draw(st.integers(1, 4))):
        magic = draw(st.sampled_from([0, 1, 2, 2]))
        codec = draw(st.sampled_from([CompressionType.NONE, CompressionType.GZIP, CompressionType.LZ4,
                                      CompressionType.ZSTD if magic == 2 else CompressionType.SNAPPY]))
        records = draw(st.lists(_simple, min_size=1, max_size=8))
        if magic < 2:
            records = [SimpleRecord(r.value, r.key, r.timestamp) for r in records]
        lat = magic > 0 and draw(st.booleans())
        ts_type = TimestampType.LOG_APPEND_TIME if lat else TimestampType.CREATE_TIME
        out.append(MemoryRecords.with_records(magic, codec, records, next_offset, timestamp_type=ts_type,
                                              log_append_time=T0 + 99))
        next_offset += len(records)
    return out


@settings(max_examples=150, deadline=None)
@given(_batches(), st.booleans(), st.data())
def test_accumulators_build_identical_buffers(batches: list[MemoryRecords], include_headers: bool,
                                              data: st.DataObject) -> None:
    first = next(batches[0].batches()).base_offset
    start = first + data.draw(st.integers(0, 5))
    end = start + data.draw(st.integers(0, 30))
    c_acc = ColumnAccumulator(include_headers, use_native=True)
    py_acc = ColumnAccumulator(include_headers, use_native=False)
    for records in batches:
        for batch in records.batches():
            assert c_acc.add(batch, start, end) == py_acc.add(batch, start, end)
    assert len(c_acc) == len(py_acc)
    assert _chunk_bytes(c_acc.take()) == _chunk_bytes(py_acc.take())
    assert len(c_acc) == 0 and _chunk_bytes(c_acc.take())[0] == 0


@pytest.mark.parametrize("include_headers", [True, False])
def test_buffers_refilled_after_take_start_where_the_last_ended(include_headers: bool) -> None:
    """After take() the C accumulator's buffers start about as big as they were taken (no regrowth
    from 1 KiB, copying at every doubling): chunks bigger, smaller and empty after a big one are
    still exactly the Python accumulator's."""
    c_acc = ColumnAccumulator(include_headers, use_native=True)
    py_acc = ColumnAccumulator(include_headers, use_native=False)
    for rounds in (50, 200, 3, 0, 120):
        for i in range(rounds):
            records = MemoryRecords.with_records(2, CompressionType.NONE, [
                SimpleRecord(b"v" * (i % 300), None if i % 7 == 0 else b"k%d" % i, T0 + i,
                             (Header("h", b"x"),) if i % 3 == 0 else ())] * 20)
            for batch in records.batches():
                assert c_acc.add(batch) == py_acc.add(batch)
        assert _chunk_bytes(c_acc.take()) == _chunk_bytes(py_acc.take())


@pytest.mark.parametrize("include_headers", [True, False])  # False: the C walk's fast lane
@pytest.mark.parametrize("use_native", [True, False])
def test_a_failed_add_leaves_nothing_behind(use_native: bool, include_headers: bool) -> None:
    good = MemoryRecords.with_records(2, 0, [SimpleRecord(b"v", b"k", T0, (Header("h", b"1"),))] * 3)
    acc = ColumnAccumulator(include_headers, use_native=use_native)
    ref = ColumnAccumulator(include_headers, use_native=use_native)
    for batch in good.batches():
        acc.add(batch)
        ref.add(batch)
    # the same batch with its last record's header count made too big: records 0-1 append first
    raw = bytearray(good.buffer)
    raw[-5] = 0x7E  # header count 63
    struct.pack_into(">I", raw, 17, 0)  # the CRC is not checked by a decode
    bad = next(MemoryRecords(raw).batches())
    with pytest.raises(InvalidRecordError, match=r"record 2"):
        acc.add(bad)
    assert _chunk_bytes(acc.take()) == _chunk_bytes(ref.take())


def _trailing_bytes(raw: bytearray) -> None:
    raw += b"\0\0\0"
    struct.pack_into(">i", raw, 8, struct.unpack_from(">i", raw, 8)[0] + 3)  # batchLength covers them


def _header_count_too_big(raw: bytearray) -> None:
    raw[-1] = 0x7E  # the last record's header count: 63


@pytest.mark.parametrize(("damage", "expected"), [(_trailing_bytes, r"3 bytes after 5 records"),
                                                  (_header_count_too_big, r"record 4\)")])
@pytest.mark.parametrize("include_headers", [True, False])  # False: the C walk's fast lane
def test_damage_is_the_same_error_on_every_path(include_headers: bool, damage: Callable[[bytearray], None],
                                                 expected: str) -> None:
    good = MemoryRecords.with_records(2, 0, [SimpleRecord(b"v%d" % i, b"k", T0) for i in range(5)])
    raw = bytearray(good.buffer)
    damage(raw)
    bad = next(MemoryRecords(raw).batches())
    messages = []
    for use_native in (True, False):
        acc = ColumnAccumulator(include_headers, use_native=use_native)
        with pytest.raises(InvalidRecordError, match=expected) as err:
            acc.add(bad)
        messages.append(str(err.value))
        assert len(acc) == 0
    assert messages[0] == messages[1]
    assert "batch at position 0, base offset 0" in messages[0]


def test_timestamp_deltas_wrap_like_java_longs(monkeypatch: pytest.MonkeyPatch) -> None:
    # first timestamp -1, then Long.MAX_VALUE: the delta 2**63 is Java's Long.MIN_VALUE, and
    # base + delta wraps back to Long.MAX_VALUE on read, in both walks
    assert default_batch.varlong_bytes(2**63) == default_batch.varlong_bytes(-(2**63))
    built = MemoryRecords.with_records(2, CompressionType.NONE,
                                       [SimpleRecord(b"a", None, -1), SimpleRecord(b"b", None, 2**63 - 1)])
    batch = next(built.batches())
    assert [r.timestamp for r in batch.records()] == [-1, 2**63 - 1]
    monkeypatch.setattr(default_batch, "native", None)
    assert [r.timestamp for r in batch.records()] == [-1, 2**63 - 1]
