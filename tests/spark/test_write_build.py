"""The sink's batching (``_WriteTask._build``, one ``append_many`` per batch) against the row-by-row
loop it replaced: the same batch boundaries, the same bytes, the same errors. No Spark session."""

from __future__ import annotations

import importlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalog.errors import UnsupportedForMessageFormatError
from kafkalog.records import (
    MAGIC_V0,
    MAGIC_V2,
    CompressionType,
    Header,
    MemoryRecordsBuilder,
    TimestampType,
    memory,
)
from kafkalog.spark.options import SinkOptions
from kafkalog.spark.writer import (
    BATCH_OVERHEAD,
    RECORD_OVERHEAD_ESTIMATE,
    WriteSchema,
    _Pending,
    _TopicInfo,
    _WriteTask,
)
from kafkalog.storage.config import LogConfig
from kafkalog.storage.partitioner import StickyPartitioner

T0 = 1_700_000_000_000
_native = importlib.import_module("kafkalog.records._native")


def _row_by_row(task: _WriteTask, info: _TopicInfo, pend: _Pending) -> list:
    """The sink's batching before append_many (one append per row), as the reference."""
    config = info.config
    magic = config.target_magic
    codec = task.codec
    if codec is CompressionType.ZSTD and magic < MAGIC_V2:
        codec = CompressionType.NONE
    ts_type = TimestampType.NO_TIMESTAMP_TYPE if magic == MAGIC_V0 else TimestampType.CREATE_TIME
    limit = int(config.max_message_bytes * 0.9) - BATCH_OVERHEAD
    out = []
    builder = None
    size = 0
    for ts, key, value, hs in zip(pend.timestamps, pend.keys, pend.values, pend.headers, strict=True):
        if hs and magic < MAGIC_V2:
            raise UnsupportedForMessageFormatError(
                f"kafkalog sink: record headers need message format v2, but the topic is written in "
                f"v{magic} "
                f"(message.format.version={config.message_format_version})"
            )
        rec = len(value or b"") + len(key or b"") + RECORD_OVERHEAD_ESTIMATE + sum(
            len(h.key) + len(h.value or b"") + 8 for h in hs)
        if builder is not None and size + rec > limit:
            out.append(builder.build())
            builder = None
        if builder is None:
            builder = MemoryRecordsBuilder(magic, codec, ts_type, 0)
            size = 0
        builder.append(ts if magic > MAGIC_V0 else -1, key, value, hs)
        size += rec
    if builder is not None:
        out.append(builder.build())
    return out


def _task(with_headers: bool, codec: str = "none") -> _WriteTask:
    return _WriteTask(SinkOptions(path="/nonexistent", topic="t", compression_type=codec),
                      WriteSchema(True, with_headers, False, False, True))


def _outcome(fn) -> tuple:  # type: ignore[no-untyped-def]
    try:
        return ("ok", [r.to_bytes() for r in fn()])
    except Exception as e:
        return (type(e).__name__, str(e))


_payload = st.one_of(st.none(), st.binary(max_size=50), st.integers(0, 3000).map(lambda n: b"p" * n))
_headers = st.one_of(
    st.just(()),
    st.lists(st.builds(Header, st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=9))),
             min_size=1, max_size=2).map(tuple),
)


@settings(max_examples=150, deadline=None)
@given(
    rows=st.lists(st.tuples(st.integers(-3, 10**6), _payload, _payload, _headers), min_size=1, max_size=60),
    with_headers=st.booleans(),
    version=st.sampled_from(["3.0-IV1", "3.0-IV1", "0.10.2", "0.9.0"]),
    max_message_bytes=st.integers(200, 20_000),
    codec=st.sampled_from(["none", "gzip", "zstd"]),
    encoder=st.sampled_from([_native, None]),
)
def test_batches_are_those_of_the_row_by_row_loop(
    rows: list, with_headers: bool, version: str, max_message_bytes: int, codec: str, encoder: object
) -> None:
    config = LogConfig.from_props({"max.message.bytes": str(max_message_bytes),
                                   "message.format.version": version})
    info = _TopicInfo(config, 1, StickyPartitioner(1))
    task = _task(with_headers, codec)
    pend = _Pending()
    for ts, key, value, hs in rows:
        pend.timestamps.append(T0 + ts if ts >= 0 else ts)  # a few invalid negative timestamps
        pend.keys.append(key)
        pend.values.append(value)
        pend.headers.append(hs if with_headers else ())
    expected = _outcome(lambda: _row_by_row(task, info, pend))
    saved, memory.native = memory.native, encoder
    try:
        got = _outcome(lambda: task._build(info, pend))
    finally:
        memory.native = saved
    assert got == expected


def test_an_oversized_row_gets_a_batch_of_its_own() -> None:
    config = LogConfig.from_props({"max.message.bytes": "1000"})
    info = _TopicInfo(config, 1, StickyPartitioner(1))
    task = _task(False)
    pend = _Pending([T0] * 4, [b"k"] * 4, [b"a" * 10, b"b" * 5000, b"c" * 10, b"d" * 10], [()] * 4)
    batches = task._build(info, pend)
    assert [sum(1 for _ in b.records()) for b in batches] == [1, 1, 2]
    assert batches == _row_by_row(task, info, pend)


@pytest.mark.parametrize("version", ["0.10.2", "0.9.0"])
def test_headers_on_an_old_format_fail_like_row_by_row(version: str) -> None:
    config = LogConfig.from_props({"message.format.version": version})
    info = _TopicInfo(config, 1, StickyPartitioner(1))
    task = _task(True)
    pend = _Pending([T0, T0], [b"k", b"k"], [b"v", b"v"], [(), (Header("h", b"1"),)])
    with pytest.raises(UnsupportedForMessageFormatError, match="record headers need message format v2"):
        task._build(info, pend)
