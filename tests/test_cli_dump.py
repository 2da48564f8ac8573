"""``kafkalog dump-log`` and ``kafkalog verify`` over segments written by Apache Kafka (golden data),
run as real subprocesses; corrupted copies must be reported with file and position."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

T0 = 1_700_000_000_000
SEGMENT_0 = "00000000000000000000"
SEGMENT_100 = "00000000000000000100"


def run(*args: str | Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kafkalog.cli", *map(str, args)],
        input=stdin, capture_output=True, text=True, timeout=60, check=False,
    )


def assert_one_line_error(result: subprocess.CompletedProcess[str], status: int = 1) -> str:
    assert result.returncode == status, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def batch_lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith(("baseOffset:", "offset:"))]


def record_lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith("| ")]


def fields(line: str) -> dict[str, str]:
    """``name: value`` pairs of a dump line (values without spaces)."""
    tokens = line.lstrip("| ").split(" ")
    return {tokens[i].rstrip(":"): tokens[i + 1] for i in range(0, len(tokens) - 1, 2)}


@pytest.fixture(scope="module")
def expected(kafka_golden_dir: Path) -> dict:
    return json.loads((kafka_golden_dir / "expected.json").read_text())


def copy_segment(source: Path, target: Path) -> Path:
    target.mkdir(parents=True, exist_ok=True)
    for path in source.iterdir():
        shutil.copyfile(path, target / path.name)
    return target


@pytest.fixture()
def golden_data_dir(kafka_golden_dir: Path, tmp_path: Path) -> Path:
    """A data directory holding four of Kafka's golden segments as partitions."""
    data = tmp_path / "data"
    copy_segment(kafka_golden_dir / "s1_v2_single" / "rolled", data / "rolled-0")
    copy_segment(kafka_golden_dir / "s1_v2_single" / "active", data / "active-0")
    copy_segment(kafka_golden_dir / "s2_v2_mixed", data / "mixed-0")
    copy_segment(kafka_golden_dir / "s3_legacy", data / "legacy-0")
    return data


# --- dump-log: .log ---------------------------------------------------------------------------------


def test_dump_s1_batches_match_kafka(kafka_golden_dir: Path, expected: dict) -> None:
    path = kafka_golden_dir / "s1_v2_single" / "rolled" / f"{SEGMENT_0}.log"
    result = run("dump-log", path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"Dumping {path}"
    assert lines[1] == "Log starting offset: 0"
    batches = [fields(line) for line in batch_lines(result.stdout)]
    assert len(batches) == 30
    translated = {offset: found for offset, found in expected["s1_translate_offsets"] if found}
    for i, batch in enumerate(batches):
        ts = {10: T0 + 2500, 20: T0 + 40000}.get(i, T0 + i * 1000)
        assert batch["baseOffset"] == batch["lastOffset"] == str(i)
        assert batch["CreateTime"] == str(ts)
        assert [int(batch["lastOffset"]), int(batch["position"]), int(batch["size"])] == translated[i]
        assert (batch["count"], batch["magic"], batch["compresscodec"], batch["isvalid"]) == (
            "1", "2", "none", "true")
        assert (batch["producerId"], batch["partitionLeaderEpoch"], batch["isTransactional"]) == (
            "-1", "0", "false")
        assert batch["deleteHorizonMs"] == "OptionalLong.empty"
    assert record_lines(result.stdout) == []


def test_dump_s2_deep_iteration_shows_every_kind_of_batch(kafka_golden_dir: Path) -> None:
    path = kafka_golden_dir / "s2_v2_mixed" / f"{SEGMENT_100}.log"
    result = run("dump-log", path, "--print-data-log")
    assert result.returncode == 0, result.stderr
    assert "Log starting offset: 100" in result.stdout
    batches = [fields(line) for line in batch_lines(result.stdout)]
    assert [b["baseOffset"] for b in batches] == ["100", "103", "105", "107", "108"]
    assert [b["partitionLeaderEpoch"] for b in batches] == ["3"] * 5
    assert batches[1]["compresscodec"] == "gzip"
    txn = batches[2]
    assert (txn["producerId"], txn["producerEpoch"], txn["baseSequence"], txn["lastSequence"],
            txn["isTransactional"], txn["isControl"]) == ("4242", "7", "0", "1", "true", "false")
    assert (batches[3]["isTransactional"], batches[3]["isControl"]) == ("true", "true")
    assert batches[4]["LogAppendTime"] == str(T0 + 50)
    records = record_lines(result.stdout)
    assert len(records) == 10
    assert "headerKeys: [h1,h-null]" in records[0] and records[0].endswith("key: a payload: alpha")
    assert "keySize: -1" in records[1] and records[1].endswith("payload: no-key")
    assert "valueSize: -1" in records[2] and records[2].endswith("key: tomb")
    assert records[4].endswith("key: g2 payload: gzip-two")
    assert "sequence: 1" in records[6]
    assert "endTxnMarker: ABORT coordinatorEpoch: 11" in records[7]
    assert "payload" not in records[7]  # control records print no data, as in Kafka
    for line in records[8:]:
        assert f"LogAppendTime: {T0 + 50}" in line  # every record reports the batch's append time


def test_dump_s3_legacy_messages(kafka_golden_dir: Path) -> None:
    path = kafka_golden_dir / "s3_legacy" / f"{SEGMENT_0}.log"
    result = run("dump-log", path, "--deep-iteration")
    assert result.returncode == 0, result.stderr
    batches = [fields(line) for line in batch_lines(result.stdout)]
    assert [(b["offset"], b["magic"], b["compresscodec"]) for b in batches] == [
        ("0", "0", "none"), ("1", "0", "none"), ("3", "0", "gzip"),
        ("4", "1", "none"), ("5", "1", "none"), ("8", "1", "gzip")]
    assert batches[0]["NoTimestampType"] == "-1"
    assert batches[5]["CreateTime"] == str(T0 + 8)  # wrapper timestamp = max inner timestamp
    records = [fields(line) for line in record_lines(result.stdout)]
    assert [r["offset"] for r in records] == [str(o) for o in range(9)]
    assert all(r["isValid"] == "true" for r in records)
    assert (records[5]["keySize"], records[5]["valueSize"]) == ("-1", "-1")


def test_dump_torn_tail_and_bad_crc(kafka_golden_dir: Path, tmp_path: Path) -> None:
    torn = tmp_path / f"{SEGMENT_0}.log"
    shutil.copyfile(kafka_golden_dir / "s4_recovery_input_torn_tail.log", torn)
    result = run("dump-log", torn)
    assert result.returncode == 0  # a dump reports findings without failing, like Kafka's
    assert len(batch_lines(result.stdout)) == 30
    assert f"Found 40 invalid bytes at the end of {torn.name}" in result.stdout

    bad = tmp_path / "bad" / f"{SEGMENT_0}.log"
    bad.parent.mkdir()
    shutil.copyfile(kafka_golden_dir / "s5_recovery_input_bad_crc_batch12.log", bad)
    batches = [fields(line) for line in batch_lines(run("dump-log", bad).stdout)]
    invalid = [b for b in batches if b["isvalid"] == "false"]
    assert [(b["baseOffset"], b["position"]) for b in invalid] == [("12", "964")]


def test_dump_json_one_document_per_file(kafka_golden_dir: Path) -> None:
    files = [
        kafka_golden_dir / "s2_v2_mixed" / f"{SEGMENT_100}.log",
        kafka_golden_dir / "s2_v2_mixed" / f"{SEGMENT_100}.index",
        kafka_golden_dir / "s2_v2_mixed" / f"{SEGMENT_100}.timeindex",
        kafka_golden_dir / f"s6_{SEGMENT_100}.txnindex",
        kafka_golden_dir / "s6_00000000000000000108.snapshot",
    ]
    result = run("dump-log", *files, "--deep-iteration", "--json")
    assert result.returncode == 0, result.stderr
    docs = [json.loads(line) for line in result.stdout.splitlines()]
    assert [d["type"] for d in docs] == ["log", "index", "timeindex", "txnindex", "snapshot"]
    log_doc, index_doc, time_doc, txn_doc, snapshot_doc = docs
    assert log_doc["startOffset"] == 100 and log_doc["trailingBytes"] == 0 and log_doc["problems"] == []
    control = log_doc["batches"][3]
    assert control["isControl"] is True and control["records"][0]["endTxnMarker"] == "ABORT"
    assert control["records"][0]["coordinatorEpoch"] == 11
    assert log_doc["batches"][1]["compresscodec"] == "gzip"
    assert [r["offset"] for b in log_doc["batches"] for r in b["records"]] == list(range(100, 110))
    assert index_doc["entries"] == [{"offset": 104, "position": 112}, {"offset": 106, "position": 223},
                                    {"offset": 107, "position": 316}, {"offset": 109, "position": 394}]
    assert index_doc["mismatches"] == []
    assert time_doc["entries"][-1] == {"timestamp": T0 + 50, "offset": 109}
    assert [e["producerId"] for e in txn_doc["entries"]] == [4242, 99]
    assert txn_doc["entries"][0] == {"version": 0, "producerId": 4242, "firstOffset": 105, "lastOffset": 107,
                                     "lastStableOffset": 100}
    assert {p["producerId"] for p in snapshot_doc["producers"]} == {77, 4242}


# --- dump-log: indexes, txn index, snapshot -------------------------------------------------------------


def test_dump_offset_index_and_time_index(kafka_golden_dir: Path, expected: dict) -> None:
    active = kafka_golden_dir / "s1_v2_single" / "active"
    result = run("dump-log", active / f"{SEGMENT_0}.index", active / f"{SEGMENT_0}.timeindex")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    entries = [fields(line) for line in result.stdout.splitlines() if line.startswith("offset:")]
    # The active image is preallocated: the dump stops at the zero-filled tail, as Kafka's does.
    assert len(entries) == expected["s1_active_offset_index_entries"]
    assert entries[0] == {"offset": "2", "position": "160"}
    times = [fields(line) for line in result.stdout.splitlines() if line.startswith("timestamp:")]
    assert len(times) == expected["s1_active_time_index_entries"]
    assert times[4] == {"timestamp": str(T0 + 9000), "offset": "9"}
    assert [int(times[-1]["timestamp"]), int(times[-1]["offset"])] == expected["s1_rolled_time_index_last"]


def test_dump_index_checks(kafka_golden_dir: Path, tmp_path: Path) -> None:
    segment = copy_segment(kafka_golden_dir / "s1_v2_single" / "rolled", tmp_path / "seg")
    index = segment / f"{SEGMENT_0}.index"
    ok = run("dump-log", index, "--verify-index-only")
    assert ok.returncode == 0 and ok.stdout.strip() == f"Dumping {index}"
    sanity = run("dump-log", index, segment / f"{SEGMENT_0}.timeindex", "--index-sanity-check")
    assert sanity.returncode == 0
    assert f"{index} passed sanity check." in sanity.stdout

    data = bytearray(index.read_bytes())
    data[12:16] = (240).to_bytes(4, "big")  # entry 1 (offset 4) now points at batch 3
    index.write_bytes(bytes(data))
    bad = run("dump-log", index, "--verify-index-only")
    assert bad.returncode == 1
    assert f"Mismatches in :{index.resolve()}" in bad.stderr
    assert "Index offset: 4, log offset: 3" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_dump_time_index_without_its_offset_index(kafka_golden_dir: Path, tmp_path: Path,
                                                  expected: dict) -> None:
    segment = copy_segment(kafka_golden_dir / "s1_v2_single" / "rolled", tmp_path / "seg")
    (segment / f"{SEGMENT_0}.index").unlink()  # the log is then scanned from its start
    result = run("dump-log", segment / f"{SEGMENT_0}.timeindex")
    assert result.returncode == 0 and result.stderr == "", result.stderr
    last = result.stdout.splitlines()[-1]
    assert last == "timestamp: {} offset: {}".format(*expected["s1_rolled_time_index_last"])


def test_dump_txn_index_and_snapshot_text(kafka_golden_dir: Path) -> None:
    result = run("dump-log", kafka_golden_dir / f"s6_{SEGMENT_100}.txnindex",
                 kafka_golden_dir / "s6_00000000000000000108.snapshot")
    assert result.returncode == 0, result.stderr
    assert ("version: 0 producerId: 4242 firstOffset: 105 lastOffset: 107 lastStableOffset: 100"
            in result.stdout)
    assert "producerId: 4242 producerEpoch: 7 coordinatorEpoch: 11" in result.stdout
    assert "currentTxnFirstOffset: OptionalLong[110]" in result.stdout


def test_dump_errors_are_one_line(tmp_path: Path) -> None:
    missing = assert_one_line_error(run("dump-log", tmp_path / f"{SEGMENT_0}.log"))
    assert "kafkalog: error:" in missing and SEGMENT_0 in missing
    (tmp_path / "notes.txt").write_text("hello")
    # As kafka-dump-log.sh: named on stdout, passed over on stderr, not a failure.
    unknown = run("dump-log", tmp_path / "notes.txt")
    assert unknown.returncode == 0 and unknown.stdout == f"Dumping {tmp_path / 'notes.txt'}\n"
    assert unknown.stderr == f"Ignoring unknown file {tmp_path / 'notes.txt'}\n"
    orphan = tmp_path / f"{SEGMENT_0}.index"
    orphan.write_bytes(b"\0" * 16)
    assert "does not exist" in assert_one_line_error(run("dump-log", orphan))
    assert_one_line_error(run("dump-log"), status=2)
    assert_one_line_error(run("dump-log", orphan, "--max-bytes", "zero"), status=2)


# --- verify -----------------------------------------------------------------------------------------


def test_verify_passes_on_kafka_written_partitions(golden_data_dir: Path) -> None:
    result = run("verify", "--data-dir", golden_data_dir)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("OK: 4 partitions, 4 segments, 71 batches, 79 records")
    report = json.loads(run("verify", "--data-dir", golden_data_dir, "--json").stdout)
    assert report["ok"] is True and report["problems"] == []


def test_verify_reports_a_flipped_byte(golden_data_dir: Path) -> None:
    log = golden_data_dir / "rolled-0" / f"{SEGMENT_0}.log"
    data = bytearray(log.read_bytes())
    data[964 + 70] ^= 0xFF  # inside batch 12's records: only its CRC can tell
    log.write_bytes(bytes(data))
    result = run("verify", "--data-dir", golden_data_dir)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    problems = [line for line in result.stdout.splitlines() if line.startswith("PROBLEM:")]
    assert len(problems) == 1, result.stdout
    assert str(log) in problems[0] and "position 964" in problems[0] and "crc" in problems[0]
    assert result.stderr.strip() == f"kafkalog: error: verify found 1 problems in {golden_data_dir}"


def test_verify_reports_a_torn_tail(golden_data_dir: Path) -> None:
    log = golden_data_dir / "mixed-0" / f"{SEGMENT_100}.log"
    size = log.stat().st_size
    with log.open("ab") as f:
        f.write(log.read_bytes()[:40])
    result = run("verify", "--data-dir", golden_data_dir)
    assert result.returncode == 1
    assert f"{log} (position {size}): 40 bytes of an incomplete batch" in result.stdout


def test_verify_reports_a_corrupted_index(golden_data_dir: Path) -> None:
    index = golden_data_dir / "legacy-0" / f"{SEGMENT_0}.index"
    time_index = golden_data_dir / "active-0" / f"{SEGMENT_0}.timeindex"
    entries = bytearray(index.read_bytes())
    assert entries, "the golden legacy segment has offset-index entries"
    entries[4:8] = (75).to_bytes(4, "big")  # one byte after a batch start
    index.write_bytes(bytes(entries))
    times = bytearray(time_index.read_bytes())
    times[0:8] = (T0 + 2001).to_bytes(8, "big")  # claims a timestamp no batch has
    time_index.write_bytes(bytes(times))
    result = run("verify", "--data-dir", golden_data_dir)
    assert result.returncode == 1
    assert f"{index} (position 0, offset" in result.stdout and "not the start of a batch" in result.stdout
    assert f"{time_index} (position 0, offset 2)" in result.stdout


def test_verify_errors_are_one_line(tmp_path: Path) -> None:
    line = assert_one_line_error(run("verify", "--data-dir", tmp_path / "nowhere"))
    assert "nowhere" in line and "does not exist" in line
    assert_one_line_error(run("verify"), status=2)


def test_verify_takes_a_preallocated_index_for_no_entries(tmp_path: Path) -> None:
    """A segment open in a broker (or left open by a crash) has zero-filled, preallocated indexes:
    no entry yet, not an entry for the base offset that no batch matches."""
    from kafkalog.records.memory import MemoryRecordsBuilder
    from kafkalog.records.types import CompressionType, TimestampType
    from kafkalog.storage.log_manager import LogManager

    with LogManager(tmp_path) as manager:
        manager.create_topic("empty", 1)
        manager.create_topic("small", 1)
        builder = MemoryRecordsBuilder(2, CompressionType.NONE, TimestampType.CREATE_TIME, 0)
        for i in range(3):  # one batch of three records, far below index.interval.bytes
            builder.append(T0 + i, b"k", b"v")
        manager.get_log("small", 0).append_as_leader(builder.build(), leader_epoch=0)
        index = tmp_path / "small-0" / f"{SEGMENT_0}.index"
        assert index.stat().st_size > 0 and not index.read_bytes().strip(b"\0")  # preallocated, empty
        result = run("verify", "--data-dir", tmp_path)  # while the logs are open
        assert result.returncode == 0, result.stdout + result.stderr
        assert result.stdout.startswith("OK: 2 partitions, 2 segments, 1 batches, 3 records")
    # Any other first slot is checked as before: this one names offset 5 at position 0, where the
    # batch ends at offset 2.
    index.write_bytes((5).to_bytes(4, "big") + bytes(4))
    result = run("verify", "--data-dir", tmp_path)
    assert result.returncode == 1 and "ends at offset 2" in result.stdout


def test_dump_takes_kafka_dump_logs_flags(kafka_golden_dir: Path) -> None:
    """``--files a,b`` (kafka-dump-log.sh's form), its StringDecoder classes (which turn on
    --print-data-log), and --max-message-size 0."""
    log = kafka_golden_dir / "s2_v2_mixed" / f"{SEGMENT_100}.log"
    index = kafka_golden_dir / "s2_v2_mixed" / f"{SEGMENT_100}.index"
    positional = run("dump-log", log, index)
    kafka_style = run("dump-log", "--files", f"{log},{index}")
    assert kafka_style.returncode == 0 and kafka_style.stdout == positional.stdout
    decoded = run("dump-log", "--value-decoder-class", "kafka.serializer.StringDecoder", log)
    assert decoded.stdout == run("dump-log", "--print-data-log", log).stdout
    assert "payload:" in decoded.stdout
    other = assert_one_line_error(run("dump-log", "--key-decoder-class", "com.example.Avro", log), status=2)
    assert "kafka.serializer.StringDecoder" in other
    assert run("dump-log", "--max-message-size", "0", index).returncode == 0


def test_dump_exits_1_where_kafkas_tool_stops_with_an_exception(tmp_path: Path) -> None:
    """A corrupt batch header or an unknown transaction index version: everything readable is
    reported, and the exit status is 1 (kafka-dump-log.sh throws there). A producer snapshot entry
    without a batch prints without batch fields, as Kafka's tool prints it."""
    from kafkalog.records import CompressionType, MemoryRecords, SimpleRecord
    from kafkalog.storage.producer_snapshot import ProducerSnapshot, ProducerSnapshotEntry
    from kafkalog.storage.txn_index import AbortedTxn

    log = tmp_path / f"{SEGMENT_0}.log"
    batch = MemoryRecords.with_records(2, CompressionType.NONE, [SimpleRecord(b"v", None, 1)]).buffer
    bad_header = bytes(8) + (5).to_bytes(4, "big") + bytes(20)  # a batch "5 bytes" long
    log.write_bytes(bytes(batch) + bad_header)
    result = run("dump-log", log)
    assert result.returncode == 1 and len(batch_lines(result.stdout)) == 1
    assert "smaller than minimum record overhead" in result.stderr

    txn = tmp_path / f"{SEGMENT_0}.txnindex"
    entry = bytearray(AbortedTxn(7, 1, 2, 3).to_bytes())
    entry[0] = 1
    txn.write_bytes(bytes(entry))
    result = run("dump-log", txn)
    assert result.returncode == 1 and "version: 1 producerId: 7" in result.stdout
    assert "Unexpected aborted transaction version 1" in result.stderr

    snapshot = tmp_path / "00000000000000000030.snapshot"
    ProducerSnapshot((ProducerSnapshotEntry(5, 1, -1, -1, 0, 1_700_000_000_000, 3),)).write(snapshot)
    result = run("dump-log", snapshot)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == ("producerId: 5 producerEpoch: 1 coordinatorEpoch: 3 "
                                              "currentTxnFirstOffset: OptionalLong.empty "
                                              "lastTimestamp: 1700000000000")
