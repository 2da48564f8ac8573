"""Property tests: whatever the builder writes, the reader gives back (any magic, any codec)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalog.records import (
    CompressionType,
    Header,
    MemoryRecords,
    MemoryRecordsBuilder,
    SimpleRecord,
    TimestampType,
)

COMBOS = [(m, c) for m in (0, 1, 2) for c in CompressionType if not (c is CompressionType.ZSTD and m < 2)]

maybe_bytes = st.one_of(st.none(), st.binary(max_size=300), st.just(b"abc" * 700))
headers = st.lists(
    st.builds(Header, st.text(max_size=12), st.one_of(st.none(), st.binary(max_size=40))), max_size=4
).map(tuple)
timestamps = st.one_of(st.just(-1), st.integers(0, 2**62), st.integers(1_700_000_000_000, 1_700_000_100_000))


@st.composite
def record_sets(
    draw: st.DrawFn,
) -> tuple[int, CompressionType, TimestampType, int, list[SimpleRecord], list[int]]:
    magic, codec = draw(st.sampled_from(COMBOS))
    ts_type = (
        TimestampType.NO_TIMESTAMP_TYPE if magic == 0 else draw(st.sampled_from(list(TimestampType)[1:]))
    )
    base = draw(st.integers(0, 2**62))
    n = draw(st.integers(1, 30))
    recs = [
        SimpleRecord(
            draw(maybe_bytes), draw(maybe_bytes), draw(timestamps), draw(headers) if magic == 2 else ()
        )
        for _ in range(n)
    ]
    gaps = draw(st.lists(st.integers(1, 1000), min_size=n, max_size=n))
    return magic, codec, ts_type, base, recs, gaps


@settings(max_examples=150, deadline=None)
@given(record_sets(), st.integers(0, 2**40))
def test_build_then_read(case: tuple, log_append_time: int) -> None:
    magic, codec, ts_type, base, recs, gaps = case
    builder = MemoryRecordsBuilder(magic, codec, ts_type, base, log_append_time=log_append_time)
    offsets = []
    offset = base
    for r, gap in zip(recs, gaps, strict=True):
        builder.append_with_offset(offset, r.timestamp, r.key, r.value, r.headers)
        offsets.append(offset)
        offset += gap
    built = builder.build()
    batches = list(built.batches())
    for b in batches:
        b.ensure_valid()
        assert b.magic == magic
    got = list(built.records())
    assert [r.offset for r in got] == offsets
    assert [(r.key, r.value, r.headers) for r in got] == [(r.key, r.value, r.headers) for r in recs]
    if magic == 0:
        assert all(r.timestamp == -1 and r.timestamp_type is TimestampType.NO_TIMESTAMP_TYPE for r in got)
    elif ts_type is TimestampType.LOG_APPEND_TIME:
        assert all(r.timestamp == log_append_time for r in got)
    else:
        assert [r.timestamp for r in got] == [r.timestamp for r in recs]
    assert batches[-1].last_offset == offsets[-1]
    assert batches[0].base_offset == offsets[0]
    info = builder.info()
    if magic > 0 and ts_type is TimestampType.CREATE_TIME:
        assert info.max_timestamp == max(r.timestamp for r in recs)
        assert max(b.max_timestamp for b in batches) == info.max_timestamp
    assert [r for b in batches for r in b.decode_columns().to_records()] == got
    assert MemoryRecords(built.to_bytes() + built.to_bytes()[:20]).valid_bytes == built.size_in_bytes


@settings(max_examples=50, deadline=None)
@given(st.sampled_from(COMBOS), st.lists(st.tuples(maybe_bytes, maybe_bytes), min_size=1, max_size=20))
def test_with_records_consecutive_offsets(combo: tuple[int, CompressionType], kvs: list[tuple]) -> None:
    magic, codec = combo
    records = MemoryRecords.with_records(
        magic, codec, [SimpleRecord(v, k, 5) for k, v in kvs], base_offset=77
    )
    assert [(r.offset, r.key, r.value) for r in records.records()] == [
        (77 + i, k, v) for i, (k, v) in enumerate(kvs)
    ]
