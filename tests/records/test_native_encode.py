"""``MemoryRecordsBuilder.append_many`` (the C encoder ``encode_v2`` and its pure-Python loop)
against as many ``append`` calls, the reference: same bytes, same builder state, same errors with
the same records appended before them."""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import ModuleType

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalog.records import memory
from kafkalog.records.memory import MemoryRecordsBuilder
from kafkalog.records.types import CompressionType, Header, TimestampType

T0 = 1_700_000_000_000

# Built by `make`; these tests need it even when KAFKALOG_PURE_PYTHON is set.
_native = importlib.import_module("kafkalog.records._native")

ENCODERS = {"c": _native, "python": None}


@contextmanager
def _encoder(module: ModuleType | None) -> Iterator[None]:
    """append_many with the C encoder (a module) or the Python loop (None)."""
    saved = memory.native
    memory.native = module
    try:
        yield
    finally:
        memory.native = saved


def _builder(magic: int = 2, base_offset: int = 0, codec: CompressionType = CompressionType.NONE,
             **kwargs: object) -> MemoryRecordsBuilder:
    ts_type = TimestampType.NO_TIMESTAMP_TYPE if magic == 0 else TimestampType.CREATE_TIME
    return MemoryRecordsBuilder(magic, codec, ts_type, base_offset, **kwargs)  # type: ignore[arg-type]


def _outcome(fn: Callable[[], object]) -> tuple[str, object]:
    try:
        return ("ok", fn())
    except Exception as e:  # the reference and the subject must fail alike, whatever the error
        # b"".join of the parts names the bad part's index; append_many has fewer, bigger parts
        return (type(e).__name__, re.sub(r"sequence item \d+", "sequence item N", str(e)))


def _state(b: MemoryRecordsBuilder) -> tuple:
    """Everything append changes, and what the built batch looks like."""
    common = (b.num_records, b.last_offset, b.max_timestamp, b.offset_of_max_timestamp,
              _outcome(b.info), b.uncompressed_records_size_in_bytes)
    if b.magic < 2:
        return common
    return (*common, b._next, b._first_ts, _outcome(lambda: b"".join(b._parts)))  # type: ignore[attr-defined]


def _looped(b: MemoryRecordsBuilder, timestamps, keys, values, headers) -> None:  # type: ignore[no-untyped-def]
    """The reference: one append per record."""
    for i in range(len(timestamps)):
        hs = () if headers is None or headers[i] is None else headers[i]
        b.append(timestamps[i], keys[i], values[i], hs)


def _check(make: Callable[[], MemoryRecordsBuilder], timestamps, keys, values, headers,  # type: ignore[no-untyped-def]
           prepare: Callable[[MemoryRecordsBuilder], None] = lambda b: None) -> tuple:
    """append_many on both encoders == the loop of appends: error, state, built bytes."""
    ref = make()
    prepare(ref)
    expected = (_outcome(lambda: _looped(ref, timestamps, keys, values, headers)), _state(ref),
                _outcome(lambda: ref.build().to_bytes()))
    for name, module in ENCODERS.items():
        b = make()
        prepare(b)
        with _encoder(module):
            got = (_outcome(lambda b=b: b.append_many(timestamps, keys, values, headers)), _state(b),
                   _outcome(lambda b=b: b.build().to_bytes()))
        assert got == expected, name
    return expected


# --- strategies ----------------------------------------------------------------------------------

# Sizes on both sides of the 1/2/3-byte varint boundaries (63/64, 8191/8192).
_big = st.sampled_from([63, 64, 8191, 8192, 70_000]).map(lambda n: b"\xab" * n)
_payload = st.one_of(st.none(), st.just(b""), st.binary(max_size=40), _big)
_header_key = st.text(max_size=8)  # any code point: UTF-8 of 1-4 bytes (no lone surrogates)
_header = st.one_of(
    st.builds(Header, _header_key, st.one_of(st.none(), st.binary(max_size=20), _big)),
    st.tuples(_header_key, st.one_of(st.none(), st.binary(max_size=8))),
)
_headers = st.one_of(
    st.none(), st.just(()), st.lists(_header, max_size=3), st.lists(_header, max_size=2).map(tuple)
)
_timestamp = st.one_of(
    st.just(-1),
    st.integers(0, 2**63 - 1),
    st.integers(-(2**20), 2**20).map(lambda d: max(T0 + d, -1)),
)


@st.composite
def _columns(draw: st.DrawFn, min_size: int = 0, max_size: int = 30) -> tuple[list, list, list, list | None]:
    n = draw(st.integers(min_size, max_size))
    timestamps = draw(st.lists(_timestamp, min_size=n, max_size=n))
    keys = draw(st.lists(_payload, min_size=n, max_size=n))
    values = draw(st.lists(_payload, min_size=n, max_size=n))
    headers = None if draw(st.booleans()) else draw(st.lists(_headers, min_size=n, max_size=n))
    return timestamps, keys, values, headers


# --- parity ----------------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_columns(), st.integers(0, 2**40), st.lists(_timestamp, max_size=3),
       st.sampled_from([CompressionType.NONE, CompressionType.LZ4]))
def test_append_many_writes_what_appends_write(columns: tuple, base_offset: int, before: list[int],
                                                codec: CompressionType) -> None:
    """Also after earlier appends (first timestamp, max timestamp and next offset already set)."""

    def prepare(b: MemoryRecordsBuilder) -> None:
        for i, ts in enumerate(before):
            b.append(ts, b"k%d" % i, b"v")

    outcome, _, built = _check(lambda: _builder(2, base_offset, codec), *columns, prepare=prepare)
    assert outcome == ("ok", None)
    assert built[0] == "ok" or not (before or columns[0])  # an empty builder cannot build a batch


def test_thousands_of_records_reach_3_byte_offset_deltas() -> None:
    n = 20_000
    timestamps = [T0 + (i * 7919) % 100_000 - 50_000 for i in range(n)]
    keys = [None if i % 5 == 0 else b"key-%d" % i for i in range(n)]
    values = [b"v" * (i % 200) for i in range(n)]
    headers = [(Header("h\u00e9", b"%d" % i),) if i % 3 == 0 else () for i in range(n)]
    for hs in (headers, None):
        outcome, state, built = _check(lambda: _builder(2, 10**12), timestamps, keys, values, hs)
        assert outcome == ("ok", None) and built[0] == "ok"
        assert state[0] == n


def test_round_trip_through_decode_columns() -> None:
    timestamps = [T0, -1, T0 + 5, T0 - 9, 0, T0 + 5]
    keys = [b"a", None, b"", b"k" * 9000, bytearray(b"ba"), None]
    values = [None, b"v", b"", b"x" * 70_000, b"y", bytearray()]
    headers = [None, [Header("\U0001f600 key", None), ("\u00fcber", b"1")], (), [Header("", b"")], None,
               (Header("k", b"z" * 200),)]
    b = _builder(2, 500)
    with _encoder(_native):
        b.append_many(timestamps, keys, values, headers)
    (batch,) = b.build().batches()
    cols = batch.decode_columns()
    assert cols.offsets == list(range(500, 506))
    assert cols.timestamps == timestamps
    assert cols.keys == [None if k is None else bytes(k) for k in keys]
    assert cols.values == [None if v is None else bytes(v) for v in values]
    assert [list(h) for h in cols.headers] == [
        [], [Header("\U0001f600 key", None), Header("\u00fcber", b"1")], [], [Header("", b"")], [],
        [Header("k", b"z" * 200)],
    ]
    assert batch.base_timestamp == T0 and batch.max_timestamp == T0 + 5


def test_the_c_encoder_is_used_for_ordinary_records(monkeypatch: pytest.MonkeyPatch) -> None:
    b = _builder()
    monkeypatch.setattr(type(b), "append", lambda *a, **k: pytest.fail("the Python append was used"))
    with _encoder(_native):
        b.append_many([T0] * 3, [b"k", None, b""], [b"v"] * 3, [None, [Header("h", None)], ()])
    assert b.num_records == 3 and len(b._parts) == 1  # type: ignore[attr-defined]


# --- errors: the same error at the same record, the records before it appended -----------------------


@pytest.mark.parametrize(
    "bad",
    [
        -2,  # timestamp
        -(2**63),
    ],
)
@pytest.mark.parametrize("at", [0, 1, 4])
def test_invalid_negative_timestamp(bad: int, at: int) -> None:
    timestamps = [T0 + i for i in range(6)]
    timestamps[at] = bad
    outcome, state, _ = _check(lambda: _builder(), timestamps, [b"k"] * 6, [b"v"] * 6, None)
    assert outcome == ("InvalidRecordError", f"Invalid negative timestamp {bad}")
    assert state[0] == at


def test_offset_delta_overflow() -> None:
    def prepare(b: MemoryRecordsBuilder) -> None:
        b.append_with_offset(2**31 - 5, T0, b"k", b"v")  # offset deltas 2^31-4 .. 2^31-1 still fit

    columns = ([T0] * 8, [b"k"] * 8, [b"v"] * 8, None)
    outcome, state, built = _check(lambda: _builder(), *columns, prepare=prepare)
    assert outcome == ("InvalidRecordError",
                       "Maximum offset delta exceeded, base offset: 0, last offset: 2147483648")
    assert state[0] == 5 and built[0] == "ok"


def test_header_errors() -> None:
    n = 3
    for bad_headers, kind in [
        ([Header(None, b"v")], "InvalidRecordError"),  # type: ignore[arg-type]
        ([Header("\udc80", b"v")], "UnicodeEncodeError"),  # a lone surrogate has no UTF-8
        ([(None, b"v")], "InvalidRecordError"),
        ([Header("k", "not bytes")], "TypeError"),  # type: ignore[arg-type]
        ([("k", b"v", b"extra")], "ValueError"),
        ([42], "TypeError"),
    ]:
        headers: list = [None] * n
        headers[1] = bad_headers
        outcome, state, _ = _check(lambda: _builder(), [T0] * n, [b"k"] * n, [b"v"] * n, headers)
        assert outcome[0] == kind
        assert state[0] == 1


def test_closed_and_control_builders_refuse_like_append() -> None:
    def close(b: MemoryRecordsBuilder) -> None:
        b.append(T0, b"k", b"v")
        b.build()

    outcome, _, _ = _check(lambda: _builder(), [T0], [b"k"], [b"v"], None, prepare=close)
    assert outcome == ("InvalidRecordError", "Tried to append a record, but MemoryRecordsBuilder is closed")
    control = lambda: _builder(producer_id=1, producer_epoch=0, is_transactional=True, is_control=True)  # noqa: E731
    outcome, _, _ = _check(control, [T0], [b"k"], [b"v"], None)
    assert outcome == ("InvalidRecordError", "Control records can only be appended to control batches")
    # no records: nothing is checked, as for zero appends
    assert _check(lambda: _builder(), [], [], [], None, prepare=close)[0] == ("ok", None)


def test_lengths_must_match_before_anything_is_appended() -> None:
    for encoder in ENCODERS.values():
        b = _builder()
        with _encoder(encoder), pytest.raises(ValueError, match=r"differ in length \(2, 1, 2\)"):
            b.append_many([T0, T0], [b"k"], [b"v", b"v"])
        with _encoder(encoder), pytest.raises(ValueError, match=r"differ in length \(1, 1, 1, 0\)"):
            b.append_many([T0], [b"k"], [b"v"], [])
        assert b.num_records == 0


# --- objects the C encoder leaves to the Python append ---------------------------------------------


class _Bytes(bytes):
    pass


class _Int(int):
    pass


def _gen_headers() -> Iterator[Header]:
    yield Header("g", b"1")


def test_other_objects_give_what_append_gives() -> None:
    """memoryviews, subclasses, str keys (append takes them; build fails), huge ints, lists as
    header pairs: the C encoder encodes the records before such a record
    and the Python append takes it and the rest."""
    for i, (ts, key, value, hs) in enumerate([
        (T0, memoryview(b"mv"), b"v", None),
        (T0, b"k", _Bytes(b"sub"), None),
        (T0, "str key", b"v", None),
        (_Int(T0), b"k", b"v", None),
        (True, b"k", b"v", None),
        (2**63, b"k", b"v", None),
        (2**63 - 1, b"k", b"v", None),  # first timestamp -1: the delta 2^63 does not fit a long
        (T0, b"k", b"v", [["list", b"pair"]]),
        (T0, b"k", b"v", [Header("k", bytearray(b"ba")), Header("k", memoryview(b"mv"))]),
    ]):
        timestamps = [-1, T0 + 1, ts, T0 + 2]
        headers = [None, [Header("h", b"x")], hs, None]
        outcome, state, _ = _check(lambda: _builder(), timestamps, [b"a", None, key, b"b"],
                                   [b"v", b"w", value, None], headers)
        assert state[0] == 4 and outcome == ("ok", None), i


def test_generators_of_headers_are_left_to_append() -> None:
    def headers() -> list:
        return [None, [Header("h", b"x")], _gen_headers(), None]

    columns = ([T0] * 4, [b"k"] * 4, [b"v"] * 4)
    ref = _builder()
    _looped(ref, *columns, headers())
    for encoder in ENCODERS.values():
        b = _builder()
        with _encoder(encoder):
            b.append_many(*columns, headers())
        assert _state(b) == _state(ref)


def test_iterables_are_read_once() -> None:
    columns = ([T0, T0 + 1], [b"a", None], [b"v", b"w"], [None, (Header("h", None),)])
    ref = _builder()
    _looped(ref, *columns)
    for encoder in ENCODERS.values():
        b = _builder()
        with _encoder(encoder):
            b.append_many(*(iter(c) for c in columns))
        assert _state(b) == _state(ref)


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_magic_is_a_loop_of_appends(magic: int) -> None:
    columns = ([T0, -1, T0 + 3], [b"a", None, b""], [b"v", b"w", None], None)
    outcome, state, built = _check(lambda: _builder(magic, 7), *columns)
    assert outcome == ("ok", None) and built[0] == "ok" and state[0] == 3
    outcome, state, _ = _check(lambda: _builder(magic, 7), *columns[:3], [None, [Header("h", b"")], None])
    assert outcome[0] == "UnsupportedForMessageFormatError" and state[0] == 1


# --- encode_v2 itself ------------------------------------------------------------------------------


def test_encode_v2_refuses_with_the_record_index() -> None:
    with pytest.raises(ValueError) as e:
        _native.encode_v2([T0, T0, -5], [b"k"] * 3, [b"v"] * 3, None, None, 0)
    assert e.value.args[1] == 2 and "-5" in e.value.args[0]
    with pytest.raises(ValueError) as e:
        _native.encode_v2([T0, T0], [b"k", "s"], [b"v"] * 2, None, None, 0)
    assert e.value.args[1] == 1
    with pytest.raises(ValueError) as e:
        _native.encode_v2([T0, T0], [b"k"] * 2, [b"v"] * 2, None, None, 2**31 - 1)
    assert e.value.args[1] == 1
    with pytest.raises(ValueError) as e:  # the builder's state, when it does not fit a long
        _native.encode_v2([T0], [b"k"], [b"v"], None, 2**64, 0)
    assert e.value.args[1] == 0
    with pytest.raises(ValueError, match="differ in length"):
        _native.encode_v2([T0], [], [b"v"], None, None, 0)
    assert _native.encode_v2([], [], [], None, None, 0) == (b"", -1, -1)
    assert _native.encode_v2([-1, -1], [None] * 2, [None] * 2, None, None, 0)[1:] == (-1, -1)
    assert _native.encode_v2([3, 9, 9, 1], [None] * 4, [None] * 4, None, None, 0)[1:] == (9, 1)


def test_encode_v2_bytes_of_one_record() -> None:
    data, max_ts, index = _native.encode_v2([T0 + 1], [b"k"], [None], [[Header("h", b"1")]], T0, 3)
    # length 11 | attributes 0 | ts delta 1 | offset delta 3 | key len 1, "k" | value -1 |
    # 1 header: key len 1, "h", value len 1, "1"
    assert data == bytes([11 * 2, 0, 2, 6, 2]) + b"k" + bytes([1, 2, 2]) + b"h" + bytes([2]) + b"1"
    assert (max_ts, index) == (T0 + 1, 0)
