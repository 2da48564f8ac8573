"""Storage throughput and latency, each as a ratio against a reference measured in the same run.

The machine is shared and noisy, so no absolute figure is a result; every row compares kafkalog with
the simplest thing that does the same I/O, both measured interleaved (best of N rounds, or medians of
many samples):

* **append** — ``Log.append_as_leader`` (validate, assign offsets, maybe roll, write, index) of
  pre-built v2 uncompressed batches of ~1 KiB and ~64 KiB, vs ``os.write`` of the same bytes to a plain
  file. Nothing is fsynced by either. Bar: ≥ 0.4x raw for 64 KiB batches.
* **lookup** — median latency of ``Log.read(offset, 1)`` (one batch), ``LogSegment.translate_offset``
  and ``Log.offset_for_timestamp`` at random targets, on a log of 10^4 records vs one of 10^7 records
  (1000-record batches of tiny values, several segments). Bar: the big log costs ≤ 2x the small one.
* **sequential read** — a fetch loop over the whole log with ``Log.read(offset, 1 MiB)``, taking the
  bytes and walking the batch headers in them to find the next offset (what a fetch client does), vs
  reading the same segment files in 1 MiB chunks with ``os.read``; batches of ~16 KiB and ~64 KiB.
  Bar: ≥ 0.5x.
* **recovery** — ``LogSegment.recover()`` of a 1 GiB segment of 64 KiB batches (CRC of every batch,
  offset and time index rebuilt) vs ``os.read`` of the same file in 1 MiB chunks. Bar: ≥ 0.3x. With
  less than 5 GiB free the segment is 256 MiB (the row says so).

Both sides of every comparison read warm page-cache data (files just written); the figures are CPU
cost of the storage layer relative to the kernel's copy, not disk speed. Data goes to ``bench-data/``
in the repository and is removed afterwards.

Run: ``.venv/bin/python benchmarks/bench_storage.py`` (about a minute).
"""

from __future__ import annotations

import os
import random
import shutil
import statistics
import struct
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import crc32c

from kafkalog.records.memory import MemoryRecords
from kafkalog.records.types import LOG_OVERHEAD, RECORD_BATCH_OVERHEAD, CompressionType, SimpleRecord
from kafkalog.storage.config import LogConfig
from kafkalog.storage.log import Log
from kafkalog.storage.log_segment import LogSegment

REPO_ROOT = Path(__file__).resolve().parents[1]
BENCH_DATA = REPO_ROOT / "bench-data"
T0 = 1_700_000_000_000
KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB
CHUNK = MIB

# v2 batch header fields patched when copies of one template batch are laid end to end.
_BASE_OFFSET = struct.Struct(">q")
_BASE_TS_AT, _MAX_TS_AT, _CRC_AT, _ATTRS_AT = 27, 35, 17, 21


@contextmanager
def _workdir() -> Iterator[Path]:
    BENCH_DATA.mkdir(exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="storage-", dir=BENCH_DATA))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)
        try:
            BENCH_DATA.rmdir()  # only if nothing else lives there
        except OSError:
            pass


def _template(records: int, value_size: int, key: bool = True) -> bytes:
    """One v2 uncompressed batch at base offset 0 with timestamps T0, T0+1, ..."""
    rng = random.Random(records * 7919 + value_size)
    recs = [SimpleRecord(rng.randbytes(value_size), b"key-%06d" % i if key else None, T0 + i)
            for i in range(records)]
    return MemoryRecords.with_records(2, CompressionType.NONE, recs).to_bytes()


def _relocated(template: bytes, base_offset: int, base_timestamp: int) -> bytearray:
    """A copy of ``template`` moved to ``base_offset`` with timestamps from ``base_timestamp`` (same
    deltas), CRC recomputed — so a log of copies has increasing offsets and timestamps."""
    out = bytearray(template)
    _BASE_OFFSET.pack_into(out, 0, base_offset)
    old_base, old_max = struct.unpack_from(">qq", out, _BASE_TS_AT)
    struct.pack_into(">qq", out, _BASE_TS_AT, base_timestamp, base_timestamp + (old_max - old_base))
    struct.pack_into(">I", out, _CRC_AT, crc32c.crc32c(bytes(out[_ATTRS_AT:])))
    return out


def _fill_as_follower(log: Log, template: bytes, batches: int) -> None:
    """Append ``batches`` copies of ``template`` with their offsets already assigned (the follower path:
    no per-record validation, so building a 10^7-record log takes seconds, not minutes)."""
    count = struct.unpack_from(">i", template, 57)[0]
    for _ in range(batches):
        leo = log.log_end_offset
        log.append_as_follower(MemoryRecords(_relocated(template, leo, T0 + leo)))
    assert log.log_end_offset % count == 0


def _raw_read(paths: list[Path]) -> int:
    total = 0
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            while True:
                data = os.read(fd, CHUNK)
                if not data:
                    break
                total += len(data)
        finally:
            os.close(fd)
    return total


def _best_of(rounds: int, fns: list[Callable[[], object]]) -> list[float]:
    """Best wall time of each function over ``rounds`` rounds, the functions interleaved in each round."""
    best = [float("inf")] * len(fns)
    for _ in range(rounds):
        for i, fn in enumerate(fns):
            start = time.perf_counter()
            fn()
            best[i] = min(best[i], time.perf_counter() - start)
    return best


def _row(name: str, ratio: float, bar: str, ok: bool, **figures: object) -> dict:
    return {"benchmark": name, "ratio": round(ratio, 3), "bar": bar, "ok": ok, **figures}


# --- append ------------------------------------------------------------------------------------------


def _kafkalog_appender(directory: Path, template: bytes, count: int) -> tuple[Callable[[], None],
                                                                             Callable[[], None]]:
    """(timed, cleanup): append ``count`` copies of ``template`` through the leader path. The
    ``MemoryRecords`` are built here, outside the clock (each is used once: offsets are assigned in place)."""
    log = Log.open(directory / "bench-0", LogConfig())
    batches = [MemoryRecords(bytearray(template)) for _ in range(count)]

    def timed() -> None:
        append = log.append_as_leader
        for batch in batches:
            append(batch)

    def cleanup() -> None:
        log.close()
        shutil.rmtree(directory)

    return timed, cleanup


def _raw_appender(path: Path, template: bytes, count: int) -> tuple[Callable[[], None], Callable[[], None]]:
    """(timed, cleanup): ``os.write`` the same bytes, one write per batch, to a new O_APPEND file."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
    buffers = [bytes(template) for _ in range(count)]

    def timed() -> None:
        write = os.write
        for buffer in buffers:
            write(fd, buffer)

    def cleanup() -> None:
        os.close(fd)
        path.unlink()

    return timed, cleanup


def bench_append(root: Path) -> list[dict]:
    rows = []
    shapes = [("append 1 KiB batches", _template(8, 100), 4000),
              ("append 64 KiB batches", _template(64, 1000), 600)]
    for name, template, count in shapes:
        best = {"kafkalog": float("inf"), "raw": float("inf")}
        for trial in range(5):
            for label in ("kafkalog", "raw"):
                if label == "kafkalog":
                    timed, cleanup = _kafkalog_appender(root / f"append-{trial}", template, count)
                else:
                    timed, cleanup = _raw_appender(root / "raw-append.log", template, count)
                start = time.perf_counter()
                timed()
                best[label] = min(best[label], time.perf_counter() - start)
                cleanup()
        total = len(template) * count
        ratio = best["raw"] / best["kafkalog"]
        large = "64 KiB" in name
        rows.append(_row(
            name, ratio, ">= 0.4x raw" if large else "(informational)", ratio >= 0.4 if large else True,
            batch_bytes=len(template), kafkalog_MiB_s=round(total / best["kafkalog"] / MIB, 1),
            raw_MiB_s=round(total / best["raw"] / MIB, 1),
            kafkalog_us_per_batch=round(best["kafkalog"] / count * 1e6, 1),
            raw_us_per_batch=round(best["raw"] / count * 1e6, 1)))
    return rows


# --- lookups -----------------------------------------------------------------------------------------


def _median_latencies(logs: dict[str, Log], op: Callable[[Log, int], object], targets: dict[str, list[int]],
                      chunk: int = 100) -> dict[str, float]:
    """Median seconds per call of ``op(log, target)`` for each log, alternating logs every ``chunk``
    calls so that noise hits both alike."""
    samples: dict[str, list[float]] = {name: [] for name in logs}
    clock = time.perf_counter_ns
    for name, log in logs.items():  # warm-up
        for target in targets[name][:chunk]:
            op(log, target)
    n = len(next(iter(targets.values())))
    for lo in range(0, n, chunk):
        for name, log in logs.items():
            out = samples[name]
            for target in targets[name][lo:lo + chunk]:
                start = clock()
                op(log, target)
                out.append(clock() - start)
    return {name: statistics.median(s) / 1e9 for name, s in samples.items()}


def _read_one(log: Log, offset: int) -> None:
    fetch = log.read(offset, 1)
    assert fetch.records.size_in_bytes > 0


def _translate(log: Log, offset: int) -> None:
    found = log.segments.floor_segment(offset).translate_offset(offset)
    assert found is not None and found.offset >= offset


def _by_timestamp(log: Log, timestamp: int) -> None:
    found = log.offset_for_timestamp(timestamp)
    assert found is not None and found.offset == timestamp - T0


def bench_lookup(root: Path) -> list[dict]:
    template = _template(1000, 4, key=False)
    per_batch = 1000
    sizes = {"small": 10**4, "big": 10**7}
    # Several segments in each log: 32 MiB for the big one (4), 48 KiB for the small one (3).
    configs = {"small": LogConfig.from_props({"segment.bytes": str(48 * KIB)}),
               "big": LogConfig.from_props({"segment.bytes": str(32 * MIB)})}
    logs = {}
    for name, records in sizes.items():
        log = Log.open(root / f"lookup-{name}" / "bench-0", configs[name])
        _fill_as_follower(log, template, records // per_batch)
        logs[name] = log
    rng = random.Random(11)
    samples = 4000
    offsets = {name: [rng.randrange(sizes[name]) for _ in range(samples)] for name in sizes}
    stamps = {name: [T0 + o for o in offsets[name]] for name in sizes}
    rows = []
    try:
        for label, op, targets in (("Log.read(offset, 1)", _read_one, offsets),
                                   ("LogSegment.translate_offset", _translate, offsets),
                                   ("Log.offset_for_timestamp", _by_timestamp, stamps)):
            medians = _median_latencies(logs, op, targets, chunk=100)
            ratio = medians["big"] / medians["small"]
            rows.append(_row(
                f"lookup {label}: 10^7 vs 10^4 records", ratio, "<= 2x (big/small)", ratio <= 2.0,
                small_us=round(medians["small"] * 1e6, 1), big_us=round(medians["big"] * 1e6, 1),
                segments=f"{len(logs['small'].segments)}/{len(logs['big'].segments)}"))
    finally:
        for log in logs.values():
            log.close()
        for name in sizes:
            shutil.rmtree(root / f"lookup-{name}", ignore_errors=True)
    return rows


# --- sequential read ---------------------------------------------------------------------------------


_ENTRY_HEAD = struct.Struct(">qi")
_LAST_OFFSET_DELTA = struct.Struct(">i")


def _fetch_all(log: Log, max_length: int = MIB) -> int:
    """Consume the whole log with fetches: take the bytes, walk the batch headers in them (as a fetch
    client does) to find where the whole batches end and the next offset. Returns the bytes of whole
    batches consumed."""
    offset = log.log_start_offset
    end = log.log_end_offset
    total = 0
    head = _ENTRY_HEAD.unpack_from
    delta = _LAST_OFFSET_DELTA.unpack_from
    while offset < end:
        data = log.read(offset, max_length).records.read_bytes()
        position, size, next_offset = 0, len(data), None
        while size - position >= RECORD_BATCH_OVERHEAD:  # v2 batches only in this benchmark
            base, length = head(data, position)
            if position + LOG_OVERHEAD + length > size:
                break  # a fetch cut by max_length ends in a fragment, fetched again next time
            next_offset = base + delta(data, position + 23)[0] + 1
            position += LOG_OVERHEAD + length
        if next_offset is None:
            raise AssertionError(f"fetch at {offset} returned no whole batch")
        total += position
        offset = next_offset
    return total


def bench_sequential_read(root: Path) -> list[dict]:
    rows = []
    for name, template, batches in (("16 KiB", _template(100, 150), 16384),
                                    ("64 KiB", _template(64, 1000), 4096)):
        log = Log.open(root / "seq" / "bench-0", LogConfig.from_props({"segment.bytes": str(64 * MIB)}))
        try:
            _fill_as_follower(log, template, batches)
            log.flush()
            paths = [segment.log.path for segment in log.segments]
            total = log.size_in_bytes
            assert _fetch_all(log) == total == _raw_read(paths)
            t_log, t_raw = _best_of(9, [lambda log=log: _fetch_all(log),
                                        lambda paths=paths: _raw_read(paths)])
        finally:
            log.close()
            shutil.rmtree(root / "seq", ignore_errors=True)
        ratio = t_raw / t_log
        rows.append(_row(
            f"sequential Log.read 1 MiB fetches ({name} batches)", ratio, ">= 0.5x raw", ratio >= 0.5,
            log_MiB=round(total / MIB), segments=len(paths),
            kafkalog_MiB_s=round(total / t_log / MIB), raw_MiB_s=round(total / t_raw / MIB)))
    return rows


# --- recovery ----------------------------------------------------------------------------------------


def bench_recovery(root: Path) -> list[dict]:
    free = shutil.disk_usage(root).free
    size = GIB if free >= 5 * GIB else 256 * MIB
    note = "" if size == GIB else f"only {free / GIB:.1f} GiB free: 256 MiB segment instead of 1 GiB"
    template = _template(64, 1000)
    batches = size // len(template) + 1
    directory = root / "recover" / "bench-0"
    config = LogConfig.from_props({"segment.bytes": str(size + 64 * MIB)})
    log = Log.open(directory, config)
    try:
        _fill_as_follower(log, template, batches)
        assert len(log.segments) == 1
        expected_leo = log.log_end_offset
    finally:
        log.close()
    path = directory / "00000000000000000000.log"
    file_size = path.stat().st_size

    def recover() -> None:
        segment = LogSegment.open(directory, 0, file_already_exists=True,
                                  index_interval_bytes=config.index_interval_bytes,
                                  max_index_size=config.segment_index_bytes)
        try:
            truncated = segment.recover()
            assert truncated == 0 and segment.read_next_offset() == expected_leo
        finally:
            segment.close()

    try:
        _raw_read([path])  # both sides start from a warm page cache
        t_recover, t_raw = _best_of(3, [recover, lambda: _raw_read([path])])
    finally:
        shutil.rmtree(root / "recover", ignore_errors=True)
    ratio = t_raw / t_recover
    row = _row(f"LogSegment.recover of a {file_size / GIB:.2f} GiB segment", ratio, ">= 0.3x raw read",
               ratio >= 0.3, batch_bytes=len(template), recover_MiB_s=round(file_size / t_recover / MIB),
               raw_MiB_s=round(file_size / t_raw / MIB), recover_s=round(t_recover, 2))
    if note:
        row["note"] = note
    return [row]


def run() -> list[dict]:
    with _workdir() as root:
        return [*bench_append(root), *bench_lookup(root), *bench_sequential_read(root), *bench_recovery(root)]


def _print_table(rows: list[dict]) -> None:
    print(f"{'benchmark':<62} {'ratio':>7}  {'bar':<18} ok   details")
    for row in rows:
        details = "  ".join(f"{k}={v}" for k, v in row.items()
                            if k not in ("benchmark", "ratio", "bar", "ok"))
        ok = "yes" if row["ok"] else "NO"
        print(f"{row['benchmark']:<62} {row['ratio']:>7.3f}  {row['bar']:<18} {ok:<4} {details}")


if __name__ == "__main__":
    started = time.perf_counter()
    _print_table(run())
    print(f"({time.perf_counter() - started:.0f} s)")
