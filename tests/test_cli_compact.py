"""``kafkalog compact`` end to end: a compacted topic produced and consumed through the CLI, cleaned
in several rounds, with a summary, JSON output, progress only on a terminal and one-line errors."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

from tests.test_cli import consume, error_line, jsonl, ok

KEYS = 40


def make_topic(data: Path, *, produce: bool = True) -> None:
    ok("topics", "create", "--data-dir", data, "--topic", "state", "--partitions", "2",
       "--config", "cleanup.policy=compact", "--config", "segment.bytes=2000",
       "--config", "delete.retention.ms=0")
    ok("topics", "create", "--data-dir", data, "--topic", "plain")
    if not produce:
        return
    lines = [{"key": f"k{i % KEYS}", "value": f"v{i}"} for i in range(600)]
    lines.append({"key": "k1", "value": None})
    ok("produce", "--data-dir", data, "--topic", "state", "--batch-size", "7", stdin=jsonl(lines))


def latest_by_key(records: list[dict]) -> dict[tuple[int, str], str | None]:
    latest: dict[tuple[int, str], str | None] = {}
    for r in records:
        latest[(r["partition"], r["key"])] = r["value"]
    return latest


def test_compact_removes_superseded_records(tmp_path: Path) -> None:
    data = tmp_path / "data"
    make_topic(data)
    before = consume(data, "state")
    out = ok("compact", "--data-dir", data, "--dedupe-buffer-size", str(1024 * 1024))
    assert "state-0:" in out and "state-1:" in out and "plain" not in out
    summary = out.strip().splitlines()[-1]
    assert summary.startswith("Compacted 2 partition(s)") and "records removed" in summary
    after = consume(data, "state")
    removed = sum(int(line.split("removed ")[1].split()[0]) for line in out.splitlines()
                  if line.startswith("state-"))
    assert len(after) == len(before) - removed and removed > 0
    # Every key's latest value survives at its original offset; offsets still increase per partition.
    assert latest_by_key(after) == latest_by_key(before)
    by_offset = {(r["partition"], r["offset"]): r for r in before}
    for r in after:
        assert by_offset[(r["partition"], r["offset"])] == r
    for p in (0, 1):
        offsets = [r["offset"] for r in after if r["partition"] == p]
        assert offsets == sorted(set(offsets))
    assert ok("verify", "--data-dir", data).startswith("OK")
    # The progress of cleaning is kept in Kafka's text checkpoint.
    lines = (data / "cleaner-offset-checkpoint").read_text().splitlines()
    assert lines[:2] == ["0", "2"] and {line.split()[0] for line in lines[2:]} == {"state"}
    # Nothing dirty is left: a second run removes nothing.
    again = json.loads(ok("compact", "--data-dir", data, "--topic", "state", "--json"))
    assert [p["recordsRemoved"] for p in again] == [0, 0] and [p["rounds"] for p in again] == [0, 0]


def test_compact_says_why_the_active_segment_stays(tmp_path: Path) -> None:
    data = tmp_path / "data"
    ok("topics", "create", "--data-dir", data, "--topic", "fresh", "--config", "cleanup.policy=compact")
    ok("produce", "--data-dir", data, "--topic", "fresh", stdin=jsonl([{"key": "a", "value": "1"},
                                                                          {"key": "a", "value": "2"}]))
    out = ok("compact", "--data-dir", data)
    assert "fresh-0: 0 round(s)" in out
    assert "offsets 0..1 are in the active segment, which is never cleaned" in out
    [result] = json.loads(ok("compact", "--data-dir", data, "--json"))
    assert (result["activeSegmentBaseOffset"], result["logEndOffset"]) == (0, 2)
    assert len(consume(data, "fresh")) == 2


def test_compact_errors_are_one_line(tmp_path: Path) -> None:
    data = tmp_path / "data"
    make_topic(data, produce=False)
    assert "is not compacted" in error_line("compact", "--data-dir", data, "--topic", "plain")
    assert "does not exist" in error_line("compact", "--data-dir", data, "--topic", "nope")
    assert "does not exist" in error_line("compact", "--data-dir", tmp_path / "missing")
    assert "1 MiB" in error_line("compact", "--data-dir", data, "--dedupe-buffer-size", "10", status=2)


def test_progress_only_on_a_terminal(tmp_path: Path) -> None:
    data = tmp_path / "data"
    make_topic(data)
    master, slave = pty.openpty()
    try:
        proc = subprocess.run([sys.executable, "-m", "kafkalog.cli", "compact", "--data-dir", str(data)],
                              stdout=subprocess.PIPE, stderr=slave, timeout=60, check=False)
        os.close(slave)
        slave = -1
        drawn = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            drawn += chunk
    finally:
        if slave >= 0:
            os.close(slave)
        os.close(master)
    assert proc.returncode == 0
    assert b"compacting" in drawn
    piped = subprocess.run([sys.executable, "-m", "kafkalog.cli", "compact", "--data-dir", str(data)],
                           capture_output=True, text=True, timeout=60, check=False)
    assert piped.returncode == 0 and piped.stderr == ""
