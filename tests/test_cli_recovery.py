"""Data cut by recovery is always reported: one line per partition on stderr from every writable
command (no -v needed), a WARNING through ``logging`` and a structured ``RecoveryReport`` for
library users. Damaged copies of Kafka's own golden segments, real CLI subprocesses."""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kafkalog.storage.log_manager import LogManager
from kafkalog.storage.recovery_report import CutKind, DataCut, RecoveryReport

SEGMENT_0 = "00000000000000000000"
SEGMENT_30 = "00000000000000000030"


def run(*args: str | Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kafkalog.cli", *map(str, args)], input=stdin,
                          capture_output=True, text=True, timeout=60, check=False)


def _damaged(kafka_golden_dir: Path, data: Path, damaged_log: str, *, second_segment: bool = False) -> Path:
    """A data directory holding Kafka's rolled s1 segment as ``golden-0``, its .log replaced by a
    damaged golden copy; no clean-shutdown marker, so a writable open recovers it."""
    partition = data / "golden-0"
    partition.mkdir(parents=True)
    for path in (kafka_golden_dir / "s1_v2_single" / "rolled").iterdir():
        shutil.copyfile(path, partition / path.name)
    shutil.copyfile(kafka_golden_dir / damaged_log, partition / f"{SEGMENT_0}.log")
    if second_segment:
        # A later segment (its bytes are whole): recovery deletes it after the corrupt one.
        for path in (kafka_golden_dir / "s1_v2_single" / "rolled").iterdir():
            shutil.copyfile(path, partition / path.name.replace(SEGMENT_0, SEGMENT_30))
    return partition


def _warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("kafkalog: warning: ")]


def test_a_writable_command_reports_a_torn_tail_it_cuts(kafka_golden_dir: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    partition = _damaged(kafka_golden_dir, data, "s4_recovery_input_torn_tail.log")
    result = run("topics", "alter", "--data-dir", data, "--topic", "golden", "--config", "retention.ms=-1")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Altered topic golden.\n"
    assert _warnings(result.stderr) == [
        f"kafkalog: warning: golden-0: recovery cut data: truncated 40 bytes of {SEGMENT_0}.log at byte "
        "2440 (offsets 30 and later) (an incomplete batch at the end, a torn write)"]
    assert (partition / f"{SEGMENT_0}.log").stat().st_size == 2440
    # Nothing left to cut: nothing reported.
    again = run("topics", "alter", "--data-dir", data, "--topic", "golden", "--config", "retention.ms=1")
    assert again.returncode == 0 and again.stderr == ""


def test_produce_reports_a_corrupt_batch_and_the_segments_it_deletes(kafka_golden_dir: Path,
                                                                     tmp_path: Path) -> None:
    data = tmp_path / "data"
    partition = _damaged(kafka_golden_dir, data, "s5_recovery_input_bad_crc_batch12.log", second_segment=True)
    result = run("produce", "--data-dir", data, "--topic", "golden", stdin='{"value": "after"}\n')
    assert result.returncode == 0, result.stderr
    assert '"firstOffset":12' in result.stdout
    [line] = result.stderr.splitlines()
    assert line.startswith(
        f"kafkalog: warning: golden-0: recovery cut data: truncated 1476 bytes of {SEGMENT_0}.log at byte "
        f"964 (offsets 12 and later); deleted {SEGMENT_30}.log (2440 bytes, offsets 30 and later) (")
    assert "is corrupt (stored crc" in line
    assert not (partition / f"{SEGMENT_30}.log").exists()


def test_recover_reports_on_stderr_as_well(kafka_golden_dir: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    _damaged(kafka_golden_dir, data, "s4_recovery_input_torn_tail.log")
    result = run("recover", "--data-dir", data)
    assert result.returncode == 0, result.stderr
    assert "truncated 40 bytes" in result.stdout
    assert len(_warnings(result.stderr)) == 1 and "truncated 40 bytes" in result.stderr


def test_library_users_get_a_warning_and_a_structured_report(kafka_golden_dir: Path, tmp_path: Path,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    data = tmp_path / "data"
    _damaged(kafka_golden_dir, data, "s5_recovery_input_bad_crc_batch12.log", second_segment=True)
    with caplog.at_level(logging.WARNING, logger="kafkalog"), LogManager(data) as lm:
        [report] = lm.recovery_reports()
        assert lm.get_log("golden", 0).recovery_report == report
    assert isinstance(report, RecoveryReport)
    assert (report.topic, report.partition, report.cut_bytes) == ("golden", 0, 1476 + 2440)
    truncated, deleted = report.cuts
    assert truncated == DataCut(CutKind.TRUNCATED, f"{SEGMENT_0}.log", 1476, 964, 12, truncated.reason)
    assert deleted == DataCut(CutKind.DELETED, f"{SEGMENT_30}.log", 2440, 0, 30, deleted.reason)
    assert f"follows the corrupt segment {SEGMENT_0}.log" in deleted.reason
    summaries = [r for r in caplog.records
                 if r.levelno == logging.WARNING and "recovery cut data" in r.getMessage()]
    assert len(summaries) == 1 and report.describe() in summaries[0].getMessage()
    # reopened: nothing more is cut
    with LogManager(data) as lm:
        assert lm.recovery_reports() == []
        assert lm.get_log("golden", 0).recovery_report.cuts == ()
