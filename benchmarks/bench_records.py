"""Records codec throughput: kafkalog vs kafka-python's ``kafka.record`` in the same run.

Workload: v2 batches of 100 records, key ~10 bytes, value ~90 bytes (compressible text), for the
codecs none, lz4 and zstd. *Encode* = append 100 records to a builder and build the batch bytes
(one ``append`` per record, and all 100 in one ``append_many`` call: the C encoder when built).
*Decode* = deep iteration yielding offset, timestamp, key and value of every record (kafkalog via
its columnar path ``RecordBatch.decode_columns``, which is what bulk readers use; the per-record
``RecordBatch.records()`` path is reported too, and so are the same columnar decode on the
pure-Python record walk, and ``ColumnAccumulator`` filling Arrow-layout buffers, Spark's path).

Run: ``.venv/bin/python benchmarks/bench_records.py``.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from kafkalog.records import CompressionType, MemoryRecordsBuilder, RecordBatch, TimestampType, default_batch
from kafkalog.records.columnar import ColumnAccumulator

RECORDS_PER_BATCH = 100
T0 = 1_700_000_000_000
CODECS = (CompressionType.NONE, CompressionType.LZ4, CompressionType.ZSTD)


def _payload() -> list[tuple[bytes, bytes, int]]:
    out = []
    for i in range(RECORDS_PER_BATCH):
        key = b"key-%06d" % i
        value = (b"value %06d of the benchmark payload; " % i) * 2 + b"x" * 8
        out.append((key, value[:90], T0 + i))
    return out


def _time_per_call(fn: Callable[[], object], min_time: float) -> float:
    calls = 0
    start = time.perf_counter()
    while True:
        fn()
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_time:
            return elapsed / calls


def _best_rates(fns: list[Callable[[], object]], records_per_call: int, rounds: int = 9) -> list[float]:
    """Records per second of each function: the best of several short rounds, with the functions
    interleaved in every round so that machine noise hits all of them alike."""
    for fn in fns:
        fn()  # warm up
    best = [float("inf")] * len(fns)
    for _ in range(rounds):
        for i, fn in enumerate(fns):
            best[i] = min(best[i], _time_per_call(fn, 0.04))
    return [records_per_call / b for b in best]


def _kafkalog_encode(codec: CompressionType, recs: list[tuple[bytes, bytes, int]]) -> bytes:
    builder = MemoryRecordsBuilder(2, codec, TimestampType.CREATE_TIME, 0)
    append = builder.append
    for key, value, ts in recs:
        append(ts, key, value)
    return builder.build().to_bytes()


def _kafkalog_encode_many(codec: CompressionType, columns: tuple[list[int], list[bytes], list[bytes]]
                          ) -> bytes:
    builder = MemoryRecordsBuilder(2, codec, TimestampType.CREATE_TIME, 0)
    builder.append_many(*columns)
    return builder.build().to_bytes()


def _kp_encode(codec: CompressionType, recs: list[tuple[bytes, bytes, int]]) -> bytes:
    builder = DefaultRecordBatchBuilder(2, int(codec), False, -1, -1, -1, 1 << 22)
    append = builder.append
    for i, (key, value, ts) in enumerate(recs):
        append(i, ts, key, value, [])
    return bytes(builder.build())


def _kafkalog_decode_columns(data: bytes) -> int:
    cols = RecordBatch(data).decode_columns()
    n = 0
    for _o, _t, _k, _v in zip(cols.offsets, cols.timestamps, cols.keys, cols.values, strict=True):
        n += 1
    return n


def _kafkalog_decode_python_walk(data: bytes) -> int:
    saved, default_batch.native = default_batch.native, None
    try:
        return _kafkalog_decode_columns(data)
    finally:
        default_batch.native = saved


def _kafkalog_decode_buffers(data: bytes, acc: ColumnAccumulator) -> int:
    acc.add(RecordBatch(data))
    return acc.take().rows


def _kafkalog_decode_records(data: bytes) -> int:
    n = 0
    for r in RecordBatch(data).records():
        r.offset, r.timestamp, r.key, r.value  # noqa: B018
        n += 1
    return n


def _kp_decode(data: bytes) -> int:
    n = 0
    for r in DefaultRecordBatch(data):
        r.offset, r.timestamp, r.key, r.value  # noqa: B018
        n += 1
    return n


def run() -> list[dict[str, object]]:
    recs = _payload()
    rows: list[dict[str, object]] = []
    for codec in CODECS:
        ours = _kafkalog_encode(codec, recs)
        theirs = _kp_encode(codec, recs)
        columns = ([ts for _, _, ts in recs], [k for k, _, _ in recs], [v for _, v, _ in recs])
        assert _kafkalog_encode_many(codec, columns) == ours
        # Both must decode each other's batch to the same records before we time anything.
        assert _kp_decode(ours) == RECORDS_PER_BATCH
        assert _kafkalog_decode_columns(theirs) == RECORDS_PER_BATCH
        assert RecordBatch(ours).compression_type is codec
        enc_ours, enc_kp, enc_many = _best_rates(
            [
                lambda c=codec: _kafkalog_encode(c, recs),
                lambda c=codec: _kp_encode(c, recs),
                lambda c=codec, cols=columns: _kafkalog_encode_many(c, cols),
            ],
            RECORDS_PER_BATCH,
        )
        acc = ColumnAccumulator()
        assert _kafkalog_decode_buffers(theirs, acc) == RECORDS_PER_BATCH
        dec_cols, dec_recs, dec_kp, dec_py, dec_buf = _best_rates(
            [
                lambda d=ours: _kafkalog_decode_columns(d),
                lambda d=ours: _kafkalog_decode_records(d),
                lambda d=ours: _kp_decode(d),
                lambda d=ours: _kafkalog_decode_python_walk(d),
                lambda d=ours, a=acc: _kafkalog_decode_buffers(d, a),
            ],
            RECORDS_PER_BATCH,
        )
        rows.append(
            {
                "codec": str(codec),
                "batch_bytes": len(ours),
                "encode_kafkalog_rps": enc_ours,
                "encode_kafka_python_rps": enc_kp,
                "encode_ratio": enc_ours / enc_kp,
                "encode_many_rps": enc_many,
                "encode_many_ratio": enc_many / enc_kp,
                "decode_kafkalog_rps": dec_cols,
                "decode_kafkalog_records_rps": dec_recs,
                "decode_kafka_python_rps": dec_kp,
                "decode_ratio": dec_cols / dec_kp,
                "decode_records_ratio": dec_recs / dec_kp,
                "decode_python_walk_ratio": dec_py / dec_kp,
                "decode_buffers_rps": dec_buf,
                "decode_buffers_ratio": dec_buf / dec_kp,
            }
        )
    return rows


def _main() -> None:
    rows = run()
    print(
        f"{'codec':<6} {'bytes':>6} | {'enc kafkalog':>13} {'enc kafka-py':>13} {'ratio':>6} "
        f"{'enc many':>12} {'ratio':>6} | "
        f"{'dec columns':>12} {'dec records':>12} {'dec kafka-py':>13} {'ratio':>6} {'rec ratio':>9} "
        f"{'py-walk ratio':>13} {'buffers':>12} {'ratio':>6}"
    )
    for r in rows:
        print(
            f"{r['codec']:<6} {r['batch_bytes']:>6} | {r['encode_kafkalog_rps']:>13,.0f} "
            f"{r['encode_kafka_python_rps']:>13,.0f} {r['encode_ratio']:>6.2f} "
            f"{r['encode_many_rps']:>12,.0f} {r['encode_many_ratio']:>6.2f} | "
            f"{r['decode_kafkalog_rps']:>12,.0f} {r['decode_kafkalog_records_rps']:>12,.0f} "
            f"{r['decode_kafka_python_rps']:>13,.0f} {r['decode_ratio']:>6.2f} "
            f"{r['decode_records_ratio']:>9.2f} {r['decode_python_walk_ratio']:>13.2f} "
            f"{r['decode_buffers_rps']:>12,.0f} {r['decode_buffers_ratio']:>6.2f}"
        )
    print("(records per second; ratio = kafkalog / kafka-python)")


if __name__ == "__main__":
    _main()
