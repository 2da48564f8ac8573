"""Crash safety of cleaning: a process cleaning a partition is SIGKILLed at every kind of step of the
swap (at chosen file renames) and at random moments; after the partition is reloaded (Kafka's loader
finishing or undoing the swap) it holds either the old or the cleaned records, never a mix, never a
loss, with nothing left of ``.cleaned``/``.swap`` files and ``kafkalog verify`` passing."""

from __future__ import annotations

import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kafkalog.storage.cleaner import offset_map
from kafkalog.storage.log import Log
from kafkalog.tools.verify import verify_data_dir
from tests.storage._cleaning import all_records, append, compacted_log
from tests.storage.cleaner_crash_child import CONFIG
from tests.storage.conftest import config

CHILD = Path(__file__).with_name("cleaner_crash_child.py")
SEED = 20261123


def build_template(root: Path) -> Path:
    """A compacted partition of four rolled segments (one cleaning group) with superseded records,
    a tombstone and a key only in the last segment (so the cleaned segment covers the whole group)."""
    log = compacted_log(root, **CONFIG)
    rng = random.Random(SEED)
    for segment in range(4):
        for _ in range(40):
            append(log, [(f"k{rng.randrange(15)}".encode(), rng.randbytes(rng.randrange(1, 30)))
                         for _ in range(3)])
        if segment == 1:
            append(log, [(b"k3", None)])
        log.roll()
    append(log, [(b"last", b"only here")])
    log.roll()
    append(log, [(b"active", b"a")])
    log.close()
    return root / "topic-0"


def records_of(partition: Path) -> list[tuple[int, bytes | None, bytes | None, int]]:
    log = Log.open(partition, config(**CONFIG), had_clean_shutdown=False)
    try:
        return [(r.offset, r.key, r.value, r.timestamp) for r in all_records(log)]
    finally:
        log.close()


def run_child(partition: Path, kill_at: int = 0, kill_after: float | None = None,
              io_buffer: int = 4096) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, str(CHILD), "--partition-dir", str(partition), "--kill-at-rename", str(kill_at),
           "--io-buffer", str(io_buffer)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        if kill_after is not None:
            deadline = time.monotonic() + 20
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "STARTED"
            time.sleep(kill_after)
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
            assert time.monotonic() < deadline
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


# 4 KiB: the offset-order round; 64 KiB: the overlapped one (mapping newest first while cleaning)
@pytest.mark.parametrize("io_buffer", [4096, 65536])
def test_sigkill_during_cleaning_leaves_old_or_new_segments(tmp_path: Path, io_buffer: int) -> None:
    template = build_template(tmp_path / "template")
    old = records_of(template)
    # A full clean, to know the cleaned state and how many renames the swap takes.
    reference = tmp_path / "reference" / "topic-0"
    shutil.copytree(template, reference)
    done = run_child(reference, io_buffer=io_buffer)
    assert done.returncode == 0, done.stderr
    renames = int(done.stdout.split("RENAMES")[1])
    overlapped = int(done.stdout.split("OVERLAPPED")[1].split()[0])
    # (the child inherits KAFKALOG_PURE_PYTHON: without the C map pass every round is in offset order)
    assert (overlapped > 0) == (io_buffer >= 65536 and offset_map.map_pass is not None)
    new = records_of(reference)
    assert len(new) < len(old)
    rng = random.Random(SEED)
    kill_points = sorted(rng.sample(range(1, renames + 1), min(3, renames)))
    kill_points = sorted({1, renames, *kill_points})  # the first and the last step always
    seen = {"old": 0, "new": 0}
    for round_no, kill_at in enumerate([*kill_points, None]):
        partition = tmp_path / f"round{round_no}" / "topic-0"
        shutil.copytree(template, partition)
        if kill_at is None:
            result = run_child(partition, kill_after=rng.uniform(0.05, 0.6), io_buffer=io_buffer)
        else:
            result = run_child(partition, kill_at=kill_at, io_buffer=io_buffer)
            assert result.returncode == -signal.SIGKILL, result.stderr
        after = records_of(partition)
        assert after in (old, new), f"kill at rename {kill_at}: the reloaded log is a mix or lost data"
        seen["old" if after == old else "new"] += 1
        leftovers = [p.name for p in partition.iterdir() if p.name.endswith((".cleaned", ".swap"))]
        assert leftovers == []
        report = verify_data_dir(partition.parent)
        assert report.ok, report.problems
    # Kills before the swap was durable keep the old log; kills after it, the cleaned one.
    assert seen["old"] >= 1 and seen["new"] >= 1, seen
