"""Log compaction throughput and memory, as ratios against references measured in the same run.

* **cleaning throughput** — ``Cleaner.clean`` of a compacted partition of 1 M records over 10 k
  keys (100-record uncompressed v2 batches of ~70-byte records, 8 MiB segments, everything but the
  empty active segment cleanable, one round) vs ``os.read`` of the same segment files in 1 MiB
  chunks. MB/s are of *input* bytes. Bar: >= 0.3x. The clean runs in a fresh process that has
  first cleaned a small log (as a broker's cleaner thread has: see ``_warm_up``), with a new offset
  map. Also shown, for information: a full decode of
  every record of the same bytes (``RecordBatch.decode_columns``, the C walker), the least any
  per-record reader pays.
* **peak memory** — the cleaning runs in a fresh process; the growth of its peak RSS from just
  before the offset map is allocated to the end of the clean is compared with
  ``log.cleaner.dedupe.buffer.size``, for a 16 MiB and a 64 MiB buffer. Bar: growth <= 1.5 x buffer
  + 16 MiB (the map, zeros while it is cleared where pages cannot be dropped, I/O buffers and one
  batch's objects), whatever the log size.

Data goes to ``bench-data/`` in the repository and is removed afterwards.
Run: ``.venv/bin/python benchmarks/bench_compact.py``.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kafkalog.records.memory import MemoryRecordsBuilder
from kafkalog.records.types import CompressionType, TimestampType
from kafkalog.storage.config import LogConfig
from kafkalog.storage.log import Log

REPO_ROOT = Path(__file__).resolve().parents[1]
BENCH_DATA = REPO_ROOT / "bench-data"
T0 = 1_700_000_000_000
MIB = 1024 * 1024
RECORDS = 1_000_000
KEYS = 10_000
BATCH = 100

CONFIG = LogConfig.from_props({"cleanup.policy": "compact", "segment.bytes": str(8 * MIB)})


def build(directory: Path, records: int = RECORDS, keys: int = KEYS) -> int:
    """The partition; returns its cleanable bytes."""
    rng = random.Random(42)
    log = Log.open(directory, CONFIG)
    try:
        for base in range(0, records, BATCH):
            builder = MemoryRecordsBuilder(2, CompressionType.NONE, TimestampType.CREATE_TIME, base)
            ks = [b"key-%05d" % rng.randrange(keys) for _ in range(BATCH)]
            builder.append_many([T0 + base + i for i in range(BATCH)], ks,
                                [rng.randbytes(48) for _ in range(BATCH)])
            log.append_as_follower(builder.build())
        log.roll()
        return log.size_in_bytes
    finally:
        log.close()


def _raw_read(paths: list[Path], buffer: bytearray | None = None) -> int:
    """The reference: the files read front to back, 1 MiB at a time, into one buffer (what ``cat``
    does; a new ``bytes`` per read would also time the allocator: in a fresh process every read's
    pages faulted in and zeroed made the reference ~40 % slower than in a long-running one)."""
    view = memoryview(buffer if buffer is not None else bytearray(MIB))
    total = 0
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            while n := os.readv(fd, [view]):
                total += n
        finally:
            os.close(fd)
    return total


def _decode_all(directory: Path) -> int:
    log = Log.open(directory, CONFIG, read_only=True)
    n = 0
    try:
        for segment in log.segments:
            for batch in segment.log.batches(load_full=True):
                n += len(batch.decode_columns().offsets)
    finally:
        log.close()
    return n


def _peak_rss() -> int:
    """This process's peak resident set size in bytes. On Linux the peak is reset first, once per
    process (see _clean): ``ru_maxrss`` keeps the peak of the process that forked this one (the
    benchmark runner, far bigger), so it cannot show growth."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _clean(directory: Path, dedupe: int) -> dict[str, float]:
    """One cleaning (in this process); returns its figures."""
    try:
        with open("/proc/self/clear_refs", "w") as clear_refs:
            clear_refs.write("5")  # reset the peak RSS to the current RSS
    except OSError:
        pass
    from kafkalog.storage.cleaner.cleaner import Cleaner
    from kafkalog.storage.cleaner.log_cleaner_manager import cleanable_offsets
    from kafkalog.storage.cleaner.log_to_clean import LogToClean
    from kafkalog.storage.cleaner.offset_map import OffsetMap

    log = Log.open(directory, CONFIG)
    try:
        offsets = cleanable_offsets(log, None, int(time.time() * 1000))
        ltc = LogToClean(log.topic, log.partition, log, offsets.first_dirty_offset,
                         offsets.first_uncleanable_dirty_offset)
        rss_before = _peak_rss()
        offset_map = OffsetMap(dedupe)  # counted: the map is most of what cleaning holds
        started = time.perf_counter()
        end, stats = Cleaner(offset_map).clean(ltc)
        elapsed = time.perf_counter() - started
        rss_after = _peak_rss()
        return {"seconds": elapsed, "bytes_read": stats.bytes_read, "bytes_written": stats.bytes_written,
                "records_removed": stats.records_removed, "rounds_end": end,
                "rss_growth": rss_after - rss_before, "map_memory": offset_map.memory}
    finally:
        log.close()


def _warm_up(template: Path, dedupe: int) -> None:
    """Clean a copy of a small log (``template``) first: a broker's cleaner thread is a long-running
    process, and so is the one the reference read runs in. Without it the measured clean also paid
    this process's first steps (code paged in, allocator arenas, first thread starts): 3-4 ms of a
    ~37 ms clean, measured."""
    with tempfile.TemporaryDirectory(prefix="warm-", dir=template.parent.parent) as scratch:
        work = Path(scratch) / template.name
        shutil.copytree(template, work)
        _clean(work, dedupe)


def _clean_in_child(directory: Path, dedupe: int, warm_up: Path | None = None) -> dict[str, float]:
    args = [sys.executable, __file__, "--clean", str(directory), str(dedupe)]
    if warm_up is not None:
        args.append(str(warm_up))
    out = subprocess.run(args, capture_output=True, text=True, timeout=900, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _row(name: str, ratio: float, bar: str, ok: bool, **figures: object) -> dict:
    return {"benchmark": name, "ratio": round(ratio, 3), "bar": bar, "ok": ok, **figures}


def run() -> list[dict]:
    BENCH_DATA.mkdir(exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="compact-", dir=BENCH_DATA))
    rows = []
    try:
        template = root / "template" / "t-0"
        size = build(template)
        small = root / "small" / "t-0"
        build(small, records=20_000, keys=1_000)
        segments = sorted(template.glob("*.log"))
        work = root / "work" / "t-0"
        t_raw = t_decode = float("inf")
        t_clean = float("inf")
        cleans: list[float] = []
        result: dict[str, float] = {}
        read_buffer = bytearray(MIB)
        for _ in range(9):  # best of nine, interleaved (the machine is shared: see BENCHMARKS.md)
            shutil.rmtree(work.parent, ignore_errors=True)
            shutil.copytree(template, work)
            os.sync()  # the copy's writeback is not the cleaner's work
            _raw_read(segments, read_buffer)  # warm the copies' source in the page cache
            started = time.perf_counter()
            _raw_read(segments, read_buffer)
            t_raw = min(t_raw, time.perf_counter() - started)
            started = time.perf_counter()
            _decode_all(template)
            t_decode = min(t_decode, time.perf_counter() - started)
            result = _clean_in_child(work, 16 * MIB, warm_up=small)
            t_clean = min(t_clean, result["seconds"])
            cleans.append(result["seconds"])
        ratio = t_raw / t_clean
        rows.append(_row(f"clean {RECORDS:,} records over {KEYS:,} keys", ratio, ">= 0.3x raw read",
                         ratio >= 0.3,
                         input_MiB=round(size / MIB, 1), clean_MB_s=round(size / t_clean / 1e6, 1),
                         clean_median_MB_s=round(size / sorted(cleans)[len(cleans) // 2] / 1e6, 1),
                         raw_read_MB_s=round(size / t_raw / 1e6), decode_MB_s=round(size / t_decode / 1e6, 1),
                         vs_decode=round(t_decode / t_clean, 3), kept_bytes=int(result["bytes_written"])))
        for dedupe in (16 * MIB, 64 * MIB):
            shutil.rmtree(work.parent, ignore_errors=True)
            shutil.copytree(template, work)
            result = _clean_in_child(work, dedupe)
            growth = result["rss_growth"]
            rows.append(_row(f"peak RSS growth while cleaning, dedupe buffer {dedupe // MIB} MiB",
                             growth / dedupe, "<= 1.5x buffer + 16 MiB", growth <= 1.5 * dedupe + 16 * MIB,
                             rss_growth_MiB=round(growth / MIB, 1), input_MiB=round(size / MIB, 1)))
    finally:
        shutil.rmtree(root, ignore_errors=True)
        try:
            BENCH_DATA.rmdir()
        except OSError:
            pass
    return rows


if __name__ == "__main__":
    if len(sys.argv) in (4, 5) and sys.argv[1] == "--clean":
        if len(sys.argv) == 5:
            _warm_up(Path(sys.argv[4]), int(sys.argv[3]))
        print(json.dumps(_clean(Path(sys.argv[2]), int(sys.argv[3]))))
    else:
        for row in run():
            print(row)
