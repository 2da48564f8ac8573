"""One writer, many readers: readers only ever see whole, valid batches in offset order.

A writer thread appends v2 batches (several codecs, random sizes, small segments so they roll) to one
partition. Every record's key, value and timestamp are a pure function of its offset, so a reader
can check anything it sees without talking to the writer. While the writer runs:

* reader threads in the same process fetch with ``Log.read`` (like a consumer, from where they left
  off and from random offsets), iterate ``Log.batches``/``Log.records``, and look up offsets and
  timestamps;
* a reader in another process opens the data directory read-only, again and again, follows the
  writer on each open for a few polls, and reads everything up to the end it sees.

Segments roll every few batches and keep Kafka's default index size (10 MiB, preallocated and
trimmed at each roll), so the other process keeps meeting files that change length under it.

Each check: contiguous offsets, CRC-valid batches, values matching the offset function, never a
partial batch at the end of what a read returned (unless ``max_length`` cut it), never an exception.
"""

from __future__ import annotations

import hashlib
import json
import random
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import pytest

from kafkalog.records.memory import MemoryRecords
from kafkalog.records.types import CompressionType, SimpleRecord
from kafkalog.storage.log_manager import LogManager
from kafkalog.storage.log_segment import LogSegment

REPO_ROOT = Path(__file__).resolve().parents[2]
TOPIC = "concurrent"
T0 = 1_700_000_000_000
WRITE_SECONDS = 4.0
CONFIGS = {"segment.bytes": "65536", "index.interval.bytes": "1024"}
CODECS = (CompressionType.NONE, CompressionType.NONE, CompressionType.LZ4, CompressionType.ZSTD,
          CompressionType.GZIP, CompressionType.SNAPPY)


# --- the offset function ------------------------------------------------------------------------------


def key_for(offset: int) -> bytes:
    return b"k%d" % offset


def value_for(offset: int) -> bytes:
    digest = hashlib.blake2b(offset.to_bytes(8, "big"), digest_size=16).digest()
    return digest * (1 + offset % 13)


def timestamp_for(offset: int) -> int:
    return T0 + offset


def records_for(first: int, count: int, codec: CompressionType) -> MemoryRecords:
    """One v2 batch holding the records of offsets [first, first + count)."""
    return MemoryRecords.with_records(2, codec, [
        SimpleRecord(value_for(o), key_for(o), timestamp_for(o)) for o in range(first, first + count)])


def check_batch(batch, expected_first: int | None, where: str) -> int:
    """Check one batch against the offset function; return its next offset."""
    assert batch.is_valid(), f"{where}: batch at {batch.base_offset} fails its CRC"
    if expected_first is not None:
        assert batch.base_offset == expected_first, (
            f"{where}: batch starts at {batch.base_offset}, expected {expected_first}")
    offset = batch.base_offset
    for record in batch.records():
        assert record.offset == offset, f"{where}: record offset {record.offset}, expected {offset}"
        assert record.key == key_for(offset), f"{where}: wrong key at {offset}"
        assert record.value == value_for(offset), f"{where}: wrong value at {offset}"
        assert record.timestamp == timestamp_for(offset), f"{where}: wrong timestamp at {offset}"
        offset += 1
    assert offset == batch.last_offset + 1, f"{where}: batch [{batch.base_offset}, {batch.last_offset}] " \
                                            f"holds {offset - batch.base_offset} records"
    return offset


def check_fetch(fetch, start: int, max_length: int, expected_first: int | None, where: str) -> int | None:
    """Check what one ``Log.read`` returned; return the next offset after its whole batches (None if
    it returned none)."""
    records = fetch.records
    size = records.size_in_bytes
    whole = 0
    next_offset = None
    for batch in records.batches():
        if next_offset is None:
            assert batch.base_offset <= start <= batch.last_offset or batch.base_offset >= start, (
                f"{where}: read({start}) starts with batch [{batch.base_offset}, {batch.last_offset}]")
        next_offset = check_batch(batch, next_offset if next_offset is not None else expected_first, where)
        whole += batch.size_in_bytes
    if size < max_length:
        # Not cut by max_length, so everything returned must be whole batches: a reader must never
        # see the beginning of a batch the writer is still writing.
        assert whole == size, f"{where}: read({start}) returned {size - whole} bytes of a partial batch"
    return next_offset


# --- the reader in another process --------------------------------------------------------------------


def reader_process_main(data_dir: str, stop_file: str, max_seconds: float) -> None:
    """Follow the writer from another process: open ``data_dir`` read-only, poll the log end offset a
    few times on the same open (a read-only log follows appends and rolls), read up to it each time,
    then reopen; print a JSON summary. Exit status 1 on any failed check or exception."""
    summary = {"opens": 0, "polls": 0, "records": 0, "max_end": 0, "errors": []}
    deadline = time.monotonic() + max_seconds
    next_offset = 0
    stop = Path(stop_file)
    try:
        stopping = False
        while not stopping and time.monotonic() < deadline:
            with LogManager(data_dir, read_only=True) as manager:
                log = manager.get_log(TOPIC, 0)
                summary["opens"] += 1
                # Tell the writer how far we are: under load this process may start late, and the
                # writer keeps going until we have opened the log a few times while it grows.
                Path(stop_file + ".opens").write_text(str(summary["opens"]))
                for _ in range(1 + summary["opens"] % 8):
                    stopping = stop.exists()  # then read once more: everything is written
                    end = log.log_end_offset
                    summary["polls"] += 1
                    assert end >= next_offset, f"log end offset went back from {next_offset} to {end}"
                    while next_offset < end:
                        fetch = log.read(next_offset, 256 * 1024)
                        got = check_fetch(fetch, next_offset, 256 * 1024, next_offset, "reader process")
                        assert got is not None, f"read({next_offset}) below the end {end} returned nothing"
                        summary["records"] += got - next_offset
                        next_offset = got
                    summary["max_end"] = end
                    if stopping:
                        break
                    time.sleep(0.002)
        if not stopping:
            summary["errors"].append(f"no stop signal within {max_seconds}s")
    except BaseException:
        summary["errors"].append(traceback.format_exc())
    print(json.dumps(summary))
    sys.exit(1 if summary["errors"] else 0)


# --- the test ---------------------------------------------------------------------------------------


class Workers:
    """Threads that record their exceptions instead of dying silently."""

    def __init__(self) -> None:
        self.errors: list[str] = []
        self.threads: list[threading.Thread] = []
        self.stop = threading.Event()

    def start(self, name: str, target: Callable[[], None]) -> None:
        def run() -> None:
            try:
                target()
            except BaseException:
                self.errors.append(f"{name}:\n{traceback.format_exc()}")
                self.stop.set()

        thread = threading.Thread(target=run, name=name, daemon=True)
        thread.start()
        self.threads.append(thread)

    def join(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for thread in self.threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        alive = [t.name for t in self.threads if t.is_alive()]
        assert not alive, f"threads still running after {timeout}s: {alive}"


@pytest.mark.slow
def test_one_writer_many_readers_threads_and_another_process(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    stop_file = tmp_path / "writer-done"
    rng = random.Random(7)
    with LogManager(data_dir) as manager:
        log = manager.create_topic(TOPIC, 1, CONFIGS)[0]
        # Something to read from the start, so the other process sees segments at once.
        log.append_as_leader(records_for(0, 5, CompressionType.NONE))
        out_path, err_path = tmp_path / "reader.out", tmp_path / "reader.err"
        with open(out_path, "wb") as out_file, open(err_path, "wb") as err_file:  # files: never block it
            other = subprocess.Popen(
                [sys.executable, "-X", "faulthandler", "-c",
                 "import sys; from tests.storage.test_concurrency import reader_process_main; "
                 "reader_process_main(*sys.argv[1:3], float(sys.argv[3]))",
                 str(data_dir), str(stop_file), "40"],
                cwd=REPO_ROOT, stdout=out_file, stderr=err_file)
        workers = Workers()
        stats = {"appends": 0, "fetches": 0, "scans": 0, "lookups": 0}

        opens_file = Path(str(stop_file) + ".opens")

        def reader_opens() -> int:
            try:
                return int(opens_file.read_text() or 0)
            except (FileNotFoundError, ValueError):
                return 0

        def writer() -> None:
            start = time.monotonic()
            # At least WRITE_SECONDS, and until the other process has reopened the log 3 times while
            # it grows (it may start late on a loaded machine); never longer than WRITE_SECONDS + 30.
            while (not workers.stop.is_set() and time.monotonic() < start + WRITE_SECONDS + 30
                   and (time.monotonic() < start + WRITE_SECONDS or reader_opens() < 3)):
                leo = log.log_end_offset
                count = rng.choice((1, 2, rng.randrange(1, 60), rng.randrange(1, 300)))
                batch = records_for(leo, count, rng.choice(CODECS))
                info = log.append_as_leader(batch)
                assert info.first_offset == leo and info.last_offset == leo + count - 1
                stats["appends"] += 1
                if rng.random() < 0.05:
                    log.flush()
                time.sleep(0.0005 if rng.random() < 0.5 else 0)
            stop_file.touch()
            workers.stop.set()

        def fetcher(seed: int) -> None:
            """Consumer-like: continue from where the last fetch ended; now and then jump."""
            r = random.Random(seed)
            next_offset = 0
            while True:
                done = workers.stop.is_set()
                end = log.log_end_offset
                if r.random() < 0.1 and end > 0:
                    next_offset = r.randrange(end)  # mid-batch starts return the holding batch
                    expected_first = None
                else:
                    expected_first = next_offset
                max_length = r.choice((1, 500, 4096, 65536, 1 << 20))
                while next_offset < end:
                    fetch = log.read(next_offset, max_length)
                    got = check_fetch(fetch, next_offset, max_length, expected_first, f"fetcher {seed}")
                    stats["fetches"] += 1
                    assert got is not None and got > next_offset, f"read({next_offset}) made no progress"
                    next_offset = expected_first = got
                assert log.log_end_offset >= end
                if done:
                    return

        def scanner() -> None:
            """Iterate batches and records over the whole log while it grows."""
            r = random.Random(3)
            while True:
                done = workers.stop.is_set()
                before = log.log_end_offset
                start = r.randrange(before) if before else 0
                expected = None
                for batch in log.batches(start):
                    expected = check_batch(batch, expected, "scanner batches")
                assert expected is None or expected >= before, "batches() ended before the log end offset"
                offset = start
                for record in log.records(start, min(before, start + 2000)):
                    assert record.offset == offset and record.value == value_for(offset), "records()"
                    offset += 1
                assert offset == min(before, start + 2000), f"records() stopped at {offset}"
                stats["scans"] += 1
                if done:
                    return

        def looker() -> None:
            """Lookups by timestamp (timestamps increase with offsets) and by offset."""
            r = random.Random(4)
            while True:
                done = workers.stop.is_set()
                end = log.log_end_offset
                for _ in range(20):
                    target = r.randrange(end)
                    found = log.offset_for_timestamp(timestamp_for(target))
                    assert found is not None and found.offset == target, (
                        f"offset_for_timestamp({timestamp_for(target)}) = {found}, expected {target}")
                    fetch = log.read(target, 1)
                    first = next(iter(fetch.records.batches()))
                    assert first.base_offset <= target <= first.last_offset
                    stats["lookups"] += 1
                if done:
                    return

        workers.start("writer", writer)
        for seed in (1, 2):
            workers.start(f"fetcher-{seed}", lambda seed=seed: fetcher(seed))
        workers.start("scanner", scanner)
        workers.start("looker", looker)
        workers.join(timeout=WRITE_SECONDS + 70)
        stop_file.touch()
        try:
            other.wait(timeout=45)
        except subprocess.TimeoutExpired:
            other.kill()
            other.wait()
            pytest.fail(f"reader process did not finish: {err_path.read_text()[-4000:]}")
        out, err = out_path.read_bytes(), err_path.read_bytes()
        assert not workers.errors, "\n".join(workers.errors)
        final_end = log.log_end_offset
        assert len(log.segments) >= 3, "segments never rolled"

    if other.returncode < 0:  # faulthandler wrote where it died to stderr
        killer = signal.Signals(-other.returncode).name
        pytest.fail(f"reader process killed by {killer}:\n{err.decode()[-4000:]}")
    summary = json.loads(out.decode().strip().splitlines()[-1]) if out.strip() else {}
    assert other.returncode == 0, f"reader process failed: {summary or err.decode()[-4000:]}"
    assert summary["opens"] >= 3 and summary["max_end"] == final_end, summary
    assert summary["records"] == final_end
    assert stats["appends"] >= 50 and stats["fetches"] >= 50, stats
    assert stats["scans"] >= 2 and stats["lookups"] >= 20, stats


def test_read_only_open_racing_appends_never_moves_the_end_backwards(tmp_path: Path) -> None:
    """The race the other-process reader above can hit, made deterministic: a read-only open captures
    the ``.log`` size first and maps the offset index later, while the writer keeps appending (and
    indexing) in between. The end offset it computes must be the end of the data it sees — never the
    segment's base offset because the index already points past that data."""
    data_dir = tmp_path / "data"
    with LogManager(data_dir) as manager:
        log = manager.create_topic(TOPIC, 1, {"index.interval.bytes": "0"})[0]

        def append(count: int) -> None:
            log.append_as_leader(records_for(log.log_end_offset, count, CompressionType.NONE))

        for _ in range(3):
            append(10)
        reader = LogSegment.open(log.dir, 0, read_only=True)  # sees 30 records' worth of bytes
        try:
            for _ in range(2):
                append(10)  # each adds an offset-index entry beyond what the reader's size covers
            assert reader.read_next_offset() == 30
        finally:
            reader.close()
