"""Durability under real crashes: a writer process is SIGKILLed again and again, and every restart
must recover a log that is exactly a prefix of what was appended.

``crash_writer.py`` (a separate Python process) appends planned batches — magics 0/1/2, every codec,
random sizes — to two partitions with small segments (so they roll), flushing and checkpointing now
and then, and reports on an O_APPEND side file what each completed call returned. The test kills it
with SIGKILL at random moments (during startup and recovery too), then restarts by opening the data
directory without a clean-shutdown marker, and checks after every restart:

* offsets are contiguous from 0; every batch is CRC-valid and follows the previous one;
* keys, values and timestamps are exactly the appended ones, in order, ending at a batch boundary;
* every acknowledged append survives (SIGKILL keeps the page cache, so nothing written may be lost),
  and in particular every flushed offset;
* lookups by offset and by timestamp find the right batches (the indexes were rebuilt correctly);
* appending continues at the recovered log end offset; after a clean close ``verify`` finds nothing.

Some rounds skip the parent's recovery (a read-only look only) so the *next writer* recovers the
crashed directory itself while appending. Finally the torn cases are made by hand on a crashed
directory: a ``.log`` cut mid-batch, garbage or zeros after the last batch, a bad CRC in an older
segment, zeroed index tails — recovery must cut to the last whole valid batch and rebuild the indexes.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from kafkalog.records.memory import iter_batches
from kafkalog.storage.checkpoint import RECOVERY_POINT_OFFSET_CHECKPOINT_FILE
from kafkalog.storage.log_manager import LogManager
from kafkalog.storage.metadata_files import CLEAN_SHUTDOWN_FILE
from tests.storage.crash_writer import PARTITION, TOPIC_CONFIGS, TOPICS, PlannedBatch, plan, planned_batches

WRITER = Path(__file__).with_name("crash_writer.py")
SEED = int(os.environ.get("KAFKALOG_CRASH_SEED", "20241025"))
ROUNDS = 30
# A fresh seed space for the batches the test process itself appends after each recovery.
PARENT_ROUND_BASE = 1_000_000

Expected = tuple[bytes | None, bytes | None, int]  # key, value, timestamp


# --- the writer process -------------------------------------------------------------------------------


def spawn_writer(data_dir: Path, events: Path, round_no: int, *, fill: int | None = None,
                 max_seconds: float = 40.0) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, str(WRITER), "--data-dir", str(data_dir), "--events", str(events),
           "--seed", str(SEED), "--round", str(round_no), "--max-seconds", str(max_seconds)]
    if fill is not None:
        cmd += ["--fill", str(fill)]
    # stderr to a file, not a pipe: nobody drains a pipe while the writer runs.
    with open(events.with_suffix(".stderr"), "wb") as stderr:
        return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=stderr)


def writer_stderr(proc: subprocess.Popen[bytes]) -> str:
    events = Path(proc.args[proc.args.index("--events") + 1])
    return events.with_suffix(".stderr").read_text(errors="replace")[-4000:]


def read_events(path: Path) -> list[list[str]]:
    if not path.exists():
        return []
    lines = path.read_bytes().split(b"\n")
    # The last line can only be cut if the writer died inside write(2); ignore such a fragment.
    return [line.decode().split() for line in lines[:-1]]


def wait_for_event(proc: subprocess.Popen[bytes], events: Path, tag: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(e and e[0] == tag for e in read_events(events)):
            return
        if proc.poll() is not None:
            pytest.fail(f"writer exited with {proc.returncode} before {tag!r}: {writer_stderr(proc)}")
        time.sleep(0.005)
    proc.kill()
    proc.wait(timeout=15)
    pytest.fail(f"writer did not report {tag!r} within {timeout}s: {writer_stderr(proc)}")


def sigkill(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        pytest.fail(f"writer exited by itself with {proc.returncode}: {writer_stderr(proc)}")
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=15)
    assert proc.returncode == -signal.SIGKILL, writer_stderr(proc)


# --- bookkeeping of what the partitions must hold -----------------------------------------------------


@dataclass
class RoundReport:
    """What one writer round reported for one topic."""

    start_leo: int | None = None  # None: killed before it opened the partition
    acked: list[tuple[int, int, int]] = field(default_factory=list)  # (plan index, first, last)
    flushed: int = 0


def parse_round(events: list[list[str]]) -> dict[str, RoundReport]:
    reports = {topic: RoundReport() for topic in TOPICS}
    for event in events:
        tag = event[0]
        if tag == "S":
            reports[event[1]].start_leo = int(event[2])
        elif tag == "A":
            reports[event[1]].acked.append((int(event[2]), int(event[3]), int(event[4])))
        elif tag == "F":
            reports[event[1]].flushed = max(reports[event[1]].flushed, int(event[2]))
    return reports


def expected_of(batches: list[PlannedBatch]) -> list[Expected]:
    return [rec for b in batches for rec in b.expected()]


def match_round(before: int, leo: int, round_no: int, topic: str, report: RoundReport,
                ) -> list[PlannedBatch]:
    """The batches of ``round_no``'s plan that the recovered log holds after offset ``before``: the
    log must end exactly after one of them (whole batches only), and include every acknowledged one."""
    context = f"round {round_no}, {topic}: "
    assert leo >= before, f"{context}log end offset {leo} is below the verified {before}: data lost"
    if report.start_leo is not None:
        assert report.start_leo == before, (
            f"{context}the writer opened the partition at {report.start_leo}, expected {before}")
    assert not report.acked or report.start_leo is not None
    held: list[PlannedBatch] = []
    count = before
    acked = len(report.acked)
    for batch in plan(SEED, round_no):
        if count == leo and len(held) >= acked:
            break
        if batch.topic != topic:
            continue
        assert count < leo, (
            f"{context}log ends at {leo} but acknowledged batch {len(held)} "
            f"({report.acked[len(held)]}) is missing: an acknowledged append was lost")
        if len(held) < acked:
            index, first, last = report.acked[len(held)]
            assert (index, first, last) == (batch.index, count, count + len(batch.records) - 1), (
                f"{context}append {index} was acknowledged at [{first}, {last}], expected "
                f"[{count}, {count + len(batch.records) - 1}]")
        held.append(batch)
        count += len(batch.records)
        assert count <= leo, (
            f"{context}log end offset {leo} falls inside planned batch {batch.index} "
            f"[{count - len(batch.records)}, {count - 1}]: a partial batch survived recovery")
    assert leo >= report.flushed, f"{context}flushed offset {report.flushed} lost (log end {leo})"
    return held


# --- checks on an open partition ----------------------------------------------------------------------


def check_batches(log, context: str) -> None:
    """Every batch CRC-valid, contiguous from the log start offset to the log end offset."""
    next_offset = log.log_start_offset
    for batch in log.batches(log.log_start_offset):
        assert batch.is_valid(), f"{context}: batch at offset {batch.base_offset} fails its CRC"
        assert batch.base_offset == next_offset, (
            f"{context}: batch starts at {batch.base_offset}, expected {next_offset}")
        next_offset = batch.last_offset + 1
    assert next_offset == log.log_end_offset, (
        f"{context}: batches end at {next_offset}, log end offset is {log.log_end_offset}")


def check_records(log, start: int, expected: list[Expected], context: str) -> None:
    """Records from ``start`` to the log end are exactly ``expected``, at contiguous offsets."""
    got = list(log.records(start))
    offsets = [r.offset for r in got]
    assert offsets == list(range(start, start + len(got))), f"{context}: offsets not contiguous"
    actual = [(r.key, r.value, r.timestamp) for r in got]
    if actual != expected:
        for i, (a, e) in enumerate(zip(actual, expected, strict=False)):
            assert a == e, f"{context}: record at offset {start + i} is {a!r}, expected {e!r}"
        assert len(actual) == len(expected), (
            f"{context}: {len(actual)} records from {start}, expected {len(expected)}")


def check_lookups(log, content: list[Expected], rng: random.Random, context: str, samples: int = 12) -> None:
    """Reads at random offsets return the batch holding the offset; ``offset_for_timestamp`` returns
    the first offset (in offset order) whose timestamp reaches the target."""
    leo = log.log_end_offset
    if leo == 0:
        return
    for offset in [0, leo - 1, *(rng.randrange(leo) for _ in range(samples))]:
        fetch = log.read(offset, 1)
        first = next(iter(fetch.records.batches()), None)
        assert first is not None, f"{context}: read({offset}) returned no whole batch"
        assert first.base_offset <= offset <= first.last_offset, (
            f"{context}: read({offset}) returned batch [{first.base_offset}, {first.last_offset}]")
    stamped = [(ts, o) for o, (_, _, ts) in enumerate(content) if ts >= 0]
    for _ in range(samples // 2):
        if not stamped:
            break
        target = rng.choice(stamped)[0] + rng.choice((0, 0, 1, -1))
        want = next((o for ts, o in stamped if ts >= target), None)
        found = log.offset_for_timestamp(target)
        got = None if found is None else found.offset
        assert got == want, f"{context}: offset_for_timestamp({target}) = {got}, expected {want}"


def verify_dir(data_dir: Path, context: str) -> None:
    from kafkalog.tools.verify import verify_data_dir

    report = verify_data_dir(data_dir)
    assert report.ok, f"{context}: verify found " + "; ".join(map(str, report.problems))


def verify_cli(data_dir: Path) -> None:
    """``kafkalog verify --data-dir`` as a user runs it: a separate process, exit status 0."""
    result = subprocess.run([sys.executable, "-c", "import sys; from kafkalog.cli import main; "
                             "sys.exit(main(sys.argv[1:]))", "verify", "--data-dir", str(data_dir)],
                            capture_output=True, timeout=60)
    assert result.returncode == 0, (result.stdout + result.stderr).decode()


def create_topics(data_dir: Path) -> None:
    with LogManager(data_dir) as manager:
        for topic in TOPICS:
            manager.create_topic(topic, 1, TOPIC_CONFIGS[topic])


# --- the crash loop ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_sigkill_rounds_recover_a_prefix_of_what_was_appended(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    data_dir = tmp_path / "data"
    create_topics(data_dir)
    content: dict[str, list[Expected]] = {topic: [] for topic in TOPICS}
    recovered_by_writer = False  # the previous round left the crashed directory to the next writer
    saw_appends = saw_rolls = 0
    for round_no in range(ROUNDS):
        events_path = tmp_path / f"events-{round_no}"
        proc = spawn_writer(data_dir, events_path, round_no)
        if rng.random() < 0.15:
            time.sleep(rng.uniform(0.0, 0.5))  # anywhere, including while it loads and recovers
        else:
            wait_for_event(proc, events_path, "R", timeout=30)
            time.sleep(rng.uniform(0.0, 0.35))
        sigkill(proc)
        reports = parse_round(read_events(events_path))
        saw_appends += sum(len(r.acked) for r in reports.values())

        context = f"seed {SEED} round {round_no}"
        full_check = round_no % 6 == 5 or round_no == ROUNDS - 1
        leave_to_writer = round_no % 4 == 2 and round_no < ROUNDS - 1
        marker = (data_dir / CLEAN_SHUTDOWN_FILE).exists()
        # The previous clean close left a marker; a writer deletes it before it loads anything.
        assert not (marker and any(r.start_leo is not None for r in reports.values())), (
            f"{context}: the clean-shutdown marker survived a writer that opened partitions")
        with LogManager(data_dir, read_only=leave_to_writer) as manager:
            assert manager.had_clean_shutdown == marker
            for topic in TOPICS:
                log = manager.get_log(topic, PARTITION)
                where = f"{context} {topic}"
                before = len(content[topic])
                held = match_round(before, log.log_end_offset, round_no, topic, reports[topic])
                new = expected_of(held)
                check_batches(log, where)
                if full_check:
                    check_records(log, 0, content[topic] + new, where)
                else:
                    check_records(log, before, new, where)
                content[topic].extend(new)
                check_lookups(log, content[topic], rng, where)
                saw_rolls = max(saw_rolls, len(log.segments))
                if not leave_to_writer:
                    # The restarted log takes appends at its recovered end.
                    extra = planned_batches(SEED, PARENT_ROUND_BASE + round_no, topic, rng.randrange(1, 3))
                    for batch in extra:
                        info = log.append_as_leader(batch.memory_records())
                        assert info.first_offset == len(content[topic]), f"{where}: append after recovery"
                        content[topic].extend(batch.expected())
                    check_records(log, before, new + expected_of(extra), where)
        if not leave_to_writer:
            verify_dir(data_dir, context)
            if round_no in (0, ROUNDS - 1) or round_no % 10 == 3:
                verify_cli(data_dir)
        recovered_by_writer = recovered_by_writer or leave_to_writer
    # The rounds must have exercised what they claim to.
    assert saw_appends > ROUNDS * 5, f"only {saw_appends} appends acknowledged in {ROUNDS} rounds"
    assert saw_rolls >= 3, "segments never rolled"
    assert recovered_by_writer


# --- torn files made by hand --------------------------------------------------------------------------

FILL_BATCHES = 400


@dataclass(frozen=True)
class Crashed:
    """A data directory left by a SIGKILLed writer after ``FILL_BATCHES`` flushed appends."""

    data_dir: Path
    content: dict[str, list[Expected]]


@pytest.fixture(scope="module")
def crashed(tmp_path_factory: pytest.TempPathFactory) -> Crashed:
    root = tmp_path_factory.mktemp("crashed")
    data_dir = root / "data"
    events = root / "events"
    proc = spawn_writer(data_dir, events, 0, fill=FILL_BATCHES)
    wait_for_event(proc, events, "D", timeout=60)
    sigkill(proc)
    reports = parse_round(read_events(events))
    content = {}
    for topic in TOPICS:
        held = match_round(0, reports[topic].flushed, 0, topic, reports[topic])
        content[topic] = expected_of(held)
    return Crashed(data_dir, content)


def segment_logs(partition_dir: Path) -> list[Path]:
    return sorted(partition_dir.glob("*.log"))


def entries_of(log_path: Path) -> list[tuple[int, int, int, int]]:
    """(position, size, first offset, last offset) of each whole entry of a ``.log`` file."""
    return [(b.position, b.size_in_bytes, b.base_offset, b.last_offset)
            for b in iter_batches(log_path.read_bytes())]


def zero_tail(path: Path, entry_size: int, entries: int) -> None:
    """Zero the last ``entries`` non-zero entries of an index file (as a crash with a partially
    written mmap page would leave them) and leave its preallocated zeros in place."""
    data = bytearray(path.read_bytes())
    end = len(data) - len(data) % entry_size
    while end >= entry_size and not any(data[end - entry_size:end]):
        end -= entry_size
    start = max(0, end - entries * entry_size)
    data[start:end] = bytes(end - start)
    data.extend(bytes(entry_size * 64))
    path.write_bytes(bytes(data))


def tamper_cut_last_batch(partition: Path, rng: random.Random) -> int:
    active = segment_logs(partition)[-1]
    position, size, first, _ = entries_of(active)[-1]
    os.truncate(active, position + rng.randrange(1, size))
    return first


def tamper_cut_inside_header(partition: Path, rng: random.Random) -> int:
    active = segment_logs(partition)[-1]
    entries = entries_of(active)
    position, _, first, _ = entries[len(entries) // 2]
    os.truncate(active, position + rng.randrange(1, 17))  # cut within the first 17 bytes of an entry
    return first


def tamper_random_garbage(partition: Path, rng: random.Random) -> int | None:
    active = segment_logs(partition)[-1]
    with open(active, "ab") as f:
        f.write(rng.randbytes(rng.randrange(100, 5000)))
    return None


def tamper_small_size_field(partition: Path, rng: random.Random) -> int | None:
    active = segment_logs(partition)[-1]
    with open(active, "ab") as f:  # a header claiming 3 bytes: below the minimum of 14 -> corrupt
        f.write(struct.pack(">qi", 123456, 3) + rng.randbytes(200))
    return None


def tamper_bad_crc_copy(partition: Path, rng: random.Random) -> int | None:
    """A complete, well-framed copy of the last batch with one payload byte flipped: whole, but not
    valid; recovery must drop it although iteration sees it."""
    active = segment_logs(partition)[-1]
    data = active.read_bytes()
    position, size, _, _ = entries_of(active)[-1]
    copy = bytearray(data[position:position + size])
    copy[-1] ^= 0x5A  # the last byte is CRC-covered in every format
    with open(active, "ab") as f:
        f.write(bytes(copy))
    return None


def tamper_zero_filled_tail(partition: Path, rng: random.Random) -> int | None:
    active = segment_logs(partition)[-1]
    with open(active, "ab") as f:  # an untrimmed preallocated file after a crash
        f.write(bytes(rng.randrange(20, 9000)))
    return None


def tamper_zero_index_tails(partition: Path, rng: random.Random) -> int | None:
    base = segment_logs(partition)[-1].with_suffix("")
    zero_tail(base.with_suffix(".index"), 8, rng.randrange(1, 4))
    zero_tail(base.with_suffix(".timeindex"), 12, rng.randrange(1, 4))
    return None


def tamper_bad_crc_older_segment(partition: Path, rng: random.Random) -> int:
    """A flipped byte inside a batch of an older segment, with no recovery-point checkpoint (so every
    segment is recovered): the log is cut at that batch and every later segment is deleted."""
    logs = segment_logs(partition)
    assert len(logs) >= 3, "the fill run must roll segments"
    older = logs[len(logs) // 2 - 1]
    entries = entries_of(older)
    position, size, first, _ = entries[len(entries) // 2]
    with open(older, "r+b") as f:
        f.seek(position + size - 1)
        byte = f.read(1)
        f.seek(position + size - 1)
        f.write(bytes([byte[0] ^ 0xFF]))
    (partition.parent / RECOVERY_POINT_OFFSET_CHECKPOINT_FILE).unlink(missing_ok=True)
    return first


TAMPERS: dict[str, Callable[[Path, random.Random], int | None]] = {
    "cut_mid_last_batch": tamper_cut_last_batch,
    "cut_inside_a_header": tamper_cut_inside_header,
    "random_garbage_appended": tamper_random_garbage,
    "size_below_minimum_appended": tamper_small_size_field,
    "bad_crc_batch_appended": tamper_bad_crc_copy,
    "zeros_appended": tamper_zero_filled_tail,
    "index_tails_zeroed": tamper_zero_index_tails,
    "bad_crc_in_older_segment": tamper_bad_crc_older_segment,
}


@pytest.mark.parametrize("topic", TOPICS)
@pytest.mark.parametrize("tamper", list(TAMPERS))
def test_torn_files_recover_to_the_last_whole_batch(crashed: Crashed, tmp_path: Path, tamper: str,
                                                    topic: str) -> None:
    rng = random.Random(f"{SEED}:{tamper}:{topic}")
    data_dir = tmp_path / "data"
    shutil.copytree(crashed.data_dir, data_dir)
    partition = data_dir / f"{topic}-{PARTITION}"
    active_path = segment_logs(partition)[-1]
    active_size = active_path.stat().st_size
    cut_at = TAMPERS[tamper](partition, rng)
    full = crashed.content[topic]
    expected_leo = len(full) if cut_at is None else cut_at
    # Recovery is batch-granular with respect to *stored* entries; a cut inside a legacy multi-message
    # append keeps its whole messages, so the expected end is the stored entry's start.
    context = f"{tamper} on {topic}"

    with LogManager(data_dir) as manager:
        assert not manager.had_clean_shutdown
        log = manager.get_log(topic, PARTITION)
        assert log.log_end_offset == expected_leo, (
            f"{context}: recovered log end offset {log.log_end_offset}, expected {expected_leo}")
        if cut_at is None:  # whatever was added after the last batch is gone from the file too
            assert active_path.stat().st_size == active_size, f"{context}: tail not truncated"
        check_batches(log, context)
        check_records(log, 0, full[:expected_leo], context)
        check_lookups(log, full[:expected_leo], rng, context, samples=30)
        other = next(t for t in TOPICS if t != topic)
        assert manager.get_log(other, PARTITION).log_end_offset == len(crashed.content[other])
        extra = planned_batches(SEED, PARENT_ROUND_BASE, topic, 3)
        for batch in extra:
            info = log.append_as_leader(batch.memory_records())
            assert info.first_offset == log.log_end_offset - len(batch.records)
        check_records(log, 0, full[:expected_leo] + expected_of(extra), context)
        after_append = log.log_end_offset
    verify_dir(data_dir, context)
    # A clean restart changes nothing.
    with LogManager(data_dir) as manager:
        assert manager.had_clean_shutdown
        log = manager.get_log(topic, PARTITION)
        assert log.log_end_offset == after_append
        check_batches(log, context)
    if tamper == "bad_crc_in_older_segment":
        assert len(segment_logs(partition)) < len(segment_logs(crashed.data_dir / partition.name))


def test_crashed_directory_verifies_after_plain_recovery(crashed: Crashed, tmp_path: Path) -> None:
    """No tampering: the SIGKILLed fill run loses nothing, and recovery leaves the files verifiable
    (zero-padded preallocated indexes trimmed, indexes rebuilt)."""
    data_dir = tmp_path / "data"
    shutil.copytree(crashed.data_dir, data_dir)
    with LogManager(data_dir) as manager:
        for topic in TOPICS:
            log = manager.get_log(topic, PARTITION)
            assert log.log_end_offset == len(crashed.content[topic])
            check_batches(log, topic)
            check_records(log, 0, crashed.content[topic], topic)
    verify_cli(data_dir)
