"""The ``kafkalog`` command line end to end: real data directories, real subprocesses."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from kafka.partitioner.default import DefaultPartitioner

T0 = 1_700_000_000_000
SEGMENT_0 = "00000000000000000000"


def run(*args: str | Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kafkalog.cli", *map(str, args)],
        input=stdin, capture_output=True, text=True, timeout=60, check=False,
    )


def ok(*args: str | Path, stdin: str | None = None) -> str:
    result = run(*args, stdin=stdin)
    assert result.returncode == 0, f"{args}: {result.stderr}"
    assert "Traceback" not in result.stderr
    return result.stdout


def error_line(*args: str | Path, stdin: str | None = None, status: int = 1) -> str:
    result = run(*args, stdin=stdin)
    assert result.returncode == status, (args, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def jsonl(records: list[dict]) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


def consume(data: Path, topic: str, *extra: str) -> list[dict]:
    output = ok("consume", "--data-dir", data, "--topic", topic, *extra)
    return [json.loads(line) for line in output.splitlines()]


@pytest.fixture()
def data(tmp_path: Path) -> Path:
    return tmp_path / "data"


# --- topics -----------------------------------------------------------------------------------------


def test_topics_commands(data: Path) -> None:
    created = ok("topics", "create", "--data-dir", data, "--topic", "orders", "--partitions", "3",
                 "--config", "retention.ms=86400000", "--config", "segment.bytes=1048576")
    assert created == "Created topic orders.\n"
    ok("topics", "create", "--data-dir", data, "--topic", "audit")
    assert ok("topics", "list", "--data-dir", data).splitlines() == ["audit", "orders"]
    assert json.loads(ok("topics", "list", "--data-dir", data, "--json")) == ["audit", "orders"]
    text = ok("topics", "describe", "--data-dir", data, "--topic", "orders")
    assert "Topic: orders\tTopicId: " in text and "PartitionCount: 3" in text
    assert "Configs: retention.ms=86400000,segment.bytes=1048576" in text
    assert text.count("\tTopic: orders\tPartition: ") == 3
    described = json.loads(ok("topics", "describe", "--data-dir", data, "--topic", "orders", "--json"))
    assert described["partitionCount"] == 3 and described["configs"]["segment.bytes"] == "1048576"
    assert [p["logEndOffset"] for p in described["partitions"]] == [0, 0, 0]
    everything = ok("topics", "describe", "--data-dir", data, "--json").splitlines()
    assert [json.loads(line)["topic"] for line in everything] == ["audit", "orders"]

    ok("topics", "alter", "--data-dir", data, "--topic", "orders", "--config", "retention.ms=1000",
       "--delete-config", "segment.bytes", "--partitions", "4")
    described = json.loads(ok("topics", "describe", "--data-dir", data, "--topic", "orders", "--json"))
    assert described["configs"] == {"retention.ms": "1000"} and described["partitionCount"] == 4

    assert ok("topics", "delete", "--data-dir", data, "--topic", "orders") == "Deleted topic orders.\n"
    assert ok("topics", "list", "--data-dir", data).splitlines() == ["audit"]
    assert not any(p.name.startswith("orders") for p in data.iterdir())


def test_topic_errors_are_one_line(data: Path, tmp_path: Path) -> None:
    ok("topics", "create", "--data-dir", data, "--topic", "t")
    assert "already exists" in error_line("topics", "create", "--data-dir", data, "--topic", "t")
    assert "segment.bytes" in error_line("topics", "create", "--data-dir", data, "--topic", "u",
                                         "--config", "segment.bytes=huge")
    assert "no.such" in error_line("topics", "create", "--data-dir", data, "--topic", "u",
                                   "--config", "no.such=1")
    assert "key=value" in error_line("topics", "create", "--data-dir", data, "--topic", "u", "--config", "x")
    assert "invalid" in error_line("topics", "create", "--data-dir", data, "--topic", "a/b").lower()
    assert "'nope'" in error_line("topics", "describe", "--data-dir", data, "--topic", "nope")
    assert "'nope'" in error_line("topics", "delete", "--data-dir", data, "--topic", "nope")
    missing = tmp_path / "missing"
    assert "does not exist" in error_line("topics", "list", "--data-dir", missing)
    assert not missing.exists()
    error_line("topics", "create", "--data-dir", data, "--topic", "u", "--partitions", "0", status=2)
    error_line("topics", "frobnicate", "--data-dir", data, status=2)
    error_line(status=2)


# --- produce and consume ------------------------------------------------------------------------------

# message.format.version decides the format a topic stores (0.9.0 -> v0, 0.10.2 -> v1).
_FORMAT_VERSION = {0: "0.9.0", 1: "0.10.2", 2: "3.0-IV1"}
_CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


@pytest.mark.parametrize("magic", [0, 1, 2])
def test_produce_consume_round_trip(data: Path, magic: int) -> None:
    """Every codec the magic allows, one produce run each, into one partition; read back whole."""
    ok("topics", "create", "--data-dir", data, "--topic", "t",
       "--config", f"message.format.version={_FORMAT_VERSION[magic]}")
    codecs = [c for c in _CODECS if c != "zstd" or magic == 2]
    sent: list[dict] = []
    for n, codec in enumerate(codecs):
        records = [{"key": f"k{i}" if i % 3 else None, "value": f"välue-{i}" if i != 4 else None,
                    "timestamp": T0 + i, "partition": 0} for i in range(n * 25, n * 25 + 25)]
        if magic == 2:
            records[1]["headers"] = [["h1", codec], ["h2", None]]
        summary = json.loads(ok("produce", "--data-dir", data, "--topic", "t", "--magic", str(magic),
                                "--compression", codec, "--batch-size", "10", stdin=jsonl(records)))
        assert summary["records"] == 25 and summary["batches"] == 3
        assert summary["partitions"] == [{"partition": 0, "firstOffset": n * 25, "lastOffset": n * 25 + 24,
                                          "records": 25, "batches": 3}]
        sent += records
    got = consume(data, "t")
    assert [r["offset"] for r in got] == list(range(len(sent)))
    for want, have in zip(sent, got, strict=True):
        assert (have["topic"], have["partition"]) == ("t", 0)
        assert have["key"] == want["key"] and have["value"] == want["value"]
        assert have["headers"] == want.get("headers", [])
        if magic == 0:
            assert (have["timestamp"], have["timestampType"]) == (-1, "NoTimestampType")
        else:
            assert (have["timestamp"], have["timestampType"]) == (want["timestamp"], "CreateTime")
    dumped = json.loads(ok("dump-log", data / "t-0" / f"{SEGMENT_0}.log", "--json"))
    formats = [(b["magic"], b["compresscodec"]) for b in dumped["batches"]]
    # Uncompressed legacy data is one message per entry; compressed data one wrapper/batch per batch.
    assert set(formats) == {(magic, codec) for codec in codecs}
    assert formats[-1] == (magic, codecs[-1])
    ok("verify", "--data-dir", data)


class _SevenPartitions:
    """The slice of kafka-python's ClusterMetadata its DefaultPartitioner consults."""

    def topics(self) -> set[str]:
        return {"t"}

    def partitions_for_topic(self, topic: str) -> set[int]:
        return set(range(7))

    def available_partitions_for_topic(self, topic: str) -> set[int]:
        return set(range(7))


def test_keyed_records_go_where_kafka_puts_them(data: Path) -> None:
    ok("topics", "create", "--data-dir", data, "--topic", "t", "--partitions", "7")
    keys = [f"customer-{i}" for i in range(60)] + ["", "ünïcode", "a" * 300]
    ok("produce", "--data-dir", data, "--topic", "t", stdin=jsonl([{"key": k, "value": k} for k in keys]))
    got = consume(data, "t")
    assert sorted(r["key"] for r in got) == sorted(keys)
    oracle, cluster = DefaultPartitioner(), _SevenPartitions()
    for record in got:
        key = record["key"].encode()
        assert record["partition"] == oracle.partition("t", key, key, None, None, cluster), record["key"]


def test_keyless_records_stick_to_one_partition_per_batch(data: Path) -> None:
    ok("topics", "create", "--data-dir", data, "--topic", "t", "--partitions", "3")
    summary = json.loads(ok("produce", "--data-dir", data, "--topic", "t", "--batch-size", "10",
                            stdin=jsonl([{"value": str(i)} for i in range(60)])))
    assert summary["batches"] == 6
    partition_of = {int(r["value"]): r["partition"] for r in consume(data, "t")}
    assert len(partition_of) == 60
    for b in range(6):
        assert len({partition_of[i] for i in range(b * 10, b * 10 + 10)}) == 1
    # Kafka's (pre-3.3) sticky partitioner never picks the same partition twice in a row.
    assert all(partition_of[b * 10] != partition_of[b * 10 + 10] for b in range(5))


def test_consume_options(data: Path) -> None:
    ok("topics", "create", "--data-dir", data, "--topic", "t", "--partitions", "2")
    ok("produce", "--data-dir", data, "--topic", "t", "--partition", "1", "--batch-size", "4",
       stdin=jsonl([{"value": f"v{i}", "timestamp": T0 + 1000 * i} for i in range(12)]))
    ok("produce", "--data-dir", data, "--topic", "t", stdin=jsonl([{"value": "p0", "partition": 0}]))
    everything = consume(data, "t")
    assert [(r["partition"], r["offset"]) for r in everything] == [(0, 0)] + [(1, i) for i in range(12)]
    from_offset = consume(data, "t", "--partition", "1", "--offset", "5")
    assert [r["offset"] for r in from_offset] == list(range(5, 12))
    assert [r["value"] for r in consume(data, "t", "--partition", "1", "--timestamp", str(T0 + 6500))] == [
        f"v{i}" for i in range(7, 12)]
    assert consume(data, "t", "--partition", "1", "--timestamp", str(T0 + 10**6)) == []
    assert [r["offset"] for r in consume(data, "t", "--partition", "1", "--from-beginning",
                                         "--max-records", "3")] == [0, 1, 2]
    assert len(consume(data, "t", "--max-records", "5")) == 5
    assert consume(data, "t", "--max-records", "0") == []
    committed = consume(data, "t", "--partition", "1", "--isolation-level", "read_committed")
    assert len(committed) == 12
    assert "out of range" in error_line("consume", "--data-dir", data, "--topic", "t", "--offset", "99")
    error_line("consume", "--data-dir", data, "--topic", "t", "--offset", "1", "--timestamp", "5", status=2)


def test_binary_keys_and_values(data: Path) -> None:
    ok("topics", "create", "--data-dir", data, "--topic", "t")
    raw = bytes(range(256))
    encoded = base64.b64encode(raw).decode()
    ok("produce", "--data-dir", data, "--topic", "t", "--binary",
       stdin=jsonl([{"key": encoded, "value": encoded, "headers": [["bin", encoded]]}]))
    message = error_line("consume", "--data-dir", data, "--topic", "t")
    assert "--binary" in message
    (record,) = consume(data, "t", "--binary")
    assert base64.b64decode(record["key"]) == raw == base64.b64decode(record["value"])
    assert record["headers"] == [["bin", encoded]]
    assert "base64" in error_line("produce", "--data-dir", data, "--topic", "t", "--binary",
                                  stdin=jsonl([{"value": "not base64!"}]))


def test_bad_input_lines_are_reported_and_not_half_written(data: Path) -> None:
    ok("topics", "create", "--data-dir", data, "--topic", "t")
    lines = jsonl([{"value": f"v{i}"} for i in range(5)]) + "{broken\n" + jsonl([{"value": "after"}])
    message = error_line("produce", "--data-dir", data, "--topic", "t", "--batch-size", "3", stdin=lines)
    assert "line 6" in message and "invalid JSON" in message
    # The first full batch (3 records) was appended; the batch holding the bad line was not.
    assert [r["value"] for r in consume(data, "t")] == ["v0", "v1", "v2"]
    assert "line 2" in error_line("produce", "--data-dir", data, "--topic", "t",
                                  stdin='{"value": "ok"}\n[1, 2]\n')
    assert "timestamp" in error_line("produce", "--data-dir", data, "--topic", "t",
                                     stdin='{"value": "x", "timestamp": "soon"}\n')
    assert "partition 5" in error_line("produce", "--data-dir", data, "--topic", "t",
                                       stdin='{"value": "x", "partition": 5}\n')
    assert "headers" in error_line("produce", "--data-dir", data, "--topic", "t", "--magic", "1",
                                   stdin='{"value": "x", "headers": [["a", "b"]]}\n')
    assert "zstd" in error_line("produce", "--data-dir", data, "--topic", "t", "--magic", "1",
                                "--compression", "zstd", stdin="")
    assert [r["value"] for r in consume(data, "t")] == ["v0", "v1", "v2"]
    assert "'missing'" in error_line("produce", "--data-dir", data, "--topic", "missing", stdin="{}\n")
    assert "'missing'" in error_line("consume", "--data-dir", data, "--topic", "missing")
    assert "does not exist" in error_line("consume", "--data-dir", data / "nowhere", "--topic", "t")
    assert "does not exist" in error_line("produce", "--data-dir", data / "nowhere", "--topic", "t",
                                          stdin="{}\n")


def test_consume_reads_while_a_writer_holds_the_lock(data: Path) -> None:
    ok("topics", "create", "--data-dir", data, "--topic", "t")
    ok("produce", "--data-dir", data, "--topic", "t", stdin=jsonl([{"value": "a"}, {"value": "b"}]))
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys\nfrom kafkalog.storage.log_manager import LogManager\n"
         "with LogManager(sys.argv[1]):\n    print('locked', flush=True)\n    sys.stdin.read()\n", str(data)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        assert [r["value"] for r in consume(data, "t")] == ["a", "b"]
        assert "lock" in error_line("produce", "--data-dir", data, "--topic", "t", stdin='{"value": "c"}\n')
    finally:
        holder.communicate("", timeout=30)
    assert holder.returncode == 0, holder.stderr


# --- verify, recover, retention ----------------------------------------------------------------------


def test_verify_and_recover_a_torn_tail(data: Path) -> None:
    ok("topics", "create", "--data-dir", data, "--topic", "t", "--partitions", "2")
    ok("produce", "--data-dir", data, "--topic", "t", "--batch-size", "7",
       stdin=jsonl([{"key": f"k{i}", "value": "x" * i} for i in range(40)]))
    assert ok("verify", "--data-dir", data).startswith("OK: 2 partitions, 2 segments")
    log = data / "t-1" / f"{SEGMENT_0}.log"
    good = log.stat().st_size
    with log.open("ab") as f:
        f.write(log.read_bytes()[:50])  # a write cut short by a crash
    (data / ".kafka_cleanshutdown").unlink()
    result = run("verify", "--data-dir", data)
    assert result.returncode == 1
    assert f"{log} (position {good})" in result.stdout

    report = ok("recover", "--data-dir", data)
    assert "t-1: log end offset" in report and "truncated 50 bytes" in report
    assert "t-0: log end offset" in report and "nothing to repair" in report
    assert log.stat().st_size == good
    ok("verify", "--data-dir", data)
    assert (data / ".kafka_cleanshutdown").exists()
    recovered = json.loads(ok("recover", "--data-dir", data, "--full", "--json"))
    assert [r["truncatedBytes"] for r in recovered] == [0, 0]


def test_what_verify_finds_dump_log_reports_and_recover_repairs(data: Path) -> None:
    ok("topics", "create", "--data-dir", data, "--topic", "t", "--config", "index.interval.bytes=1")
    ok("produce", "--data-dir", data, "--topic", "t", "--batch-size", "1",
       stdin=jsonl([{"key": "k", "value": f"v{i}"} for i in range(6)]))
    index = data / "t-0" / f"{SEGMENT_0}.index"
    good = index.read_bytes()
    assert len(good) == 5 * 8  # an entry for each batch after the first, trimmed by the clean shutdown
    damaged = bytearray(good)
    damaged[8:12] = bytes(4)  # entry 1's relative offset zeroed: it now reads as the end of the entries
    index.write_bytes(bytes(damaged))
    first_nonzero = 8 + len(damaged[8:]) - len(damaged[8:].lstrip(b"\0"))  # in entry 1's position
    where = f"{index} (position {first_nonzero})"

    dump = run("dump-log", index, "--verify-index-only")
    assert dump.returncode == 1, dump.stdout + dump.stderr
    assert dump.stdout.strip() == f"Dumping {index}"
    assert where in dump.stderr and "Traceback" not in dump.stderr
    verify = run("verify", "--data-dir", data)
    assert verify.returncode == 1 and f"PROBLEM: {where}" in verify.stdout

    # The partition is below its recovery point (clean shutdown): Kafka's recovery alone would skip it.
    report = ok("recover", "--data-dir", data)
    assert report.startswith("verify found 1 problems: recovered every segment (as with --full)\n")
    assert f"t-0: log end offset 6, rebuilt {SEGMENT_0}.index" in report
    assert index.read_bytes() == good
    assert ok("verify", "--data-dir", data).startswith("OK: 1 partitions, 1 segments, 6 batches")
    assert "verify found" not in ok("recover", "--data-dir", data)


def test_verify_and_recover_golden_copies(kafka_golden_dir: Path, data: Path) -> None:
    (data / "golden-0").mkdir(parents=True)
    for path in (kafka_golden_dir / "s1_v2_single" / "rolled").iterdir():
        shutil.copyfile(path, data / "golden-0" / path.name)
    ok("verify", "--data-dir", data)
    assert [r["value"] for r in consume(data, "golden", "--max-records", "2")] == ["value-0", "value-1"]
    bad = data / "golden-0" / f"{SEGMENT_0}.log"
    shutil.copyfile(kafka_golden_dir / "s5_recovery_input_bad_crc_batch12.log", bad)
    assert run("verify", "--data-dir", data).returncode == 1
    report = json.loads(ok("recover", "--data-dir", data, "--full", "--json"))
    assert report == [{"topic": "golden", "partition": 0, "logEndOffset": 12, "truncatedBytes": 1476,
                       "deletedSegments": [], "rebuiltIndexes": report[0]["rebuiltIndexes"],
                       "cuts": [{"kind": "truncated", "file": f"{SEGMENT_0}.log", "bytes": 1476,
                                 "position": 964, "firstOffset": 12,
                                 "reason": report[0]["cuts"][0]["reason"]}]}]
    assert "is corrupt (stored crc" in report[0]["cuts"][0]["reason"]
    ok("verify", "--data-dir", data)


def test_read_committed_hides_aborted_transactions(kafka_golden_dir: Path, data: Path) -> None:
    (data / "mixed-0").mkdir(parents=True)
    for path in (kafka_golden_dir / "s2_v2_mixed").iterdir():
        shutil.copyfile(path, data / "mixed-0" / path.name)
    # Kafka's segment came without its .txnindex: recovery rebuilds it from the ABORT marker.
    report = ok("recover", "--data-dir", data)
    assert "00000000000000000100.txnindex" in report
    everything = consume(data, "mixed")
    assert [r["offset"] for r in everything] == [100, 101, 102, 103, 104, 105, 106, 108, 109]  # no marker
    committed = consume(data, "mixed", "--isolation-level", "read_committed")
    assert [r["offset"] for r in committed] == [100, 101, 102, 103, 104, 108, 109]
    assert everything[0]["headers"] == [["h1", "v1"], ["h-null", None]]
    assert [r["timestamp"] for r in everything[-2:]] == [T0 + 50, T0 + 50]
    assert everything[-1]["timestampType"] == "LogAppendTime"


def test_retention_command(data: Path) -> None:
    ok("topics", "create", "--data-dir", data, "--topic", "t", "--config", "segment.bytes=300",
       "--config", "retention.bytes=400")
    ok("produce", "--data-dir", data, "--topic", "t", "--batch-size", "2",
       stdin=jsonl([{"value": "v" * 20} for _ in range(20)]))
    before = len(list((data / "t-0").glob("*.log")))
    output = ok("retention", "--data-dir", data)
    deleted = int(output.split()[1])
    assert deleted > 0 and len(list((data / "t-0").glob("*.log"))) == before - deleted
    described = json.loads(ok("topics", "describe", "--data-dir", data, "--topic", "t", "--json"))
    assert described["partitions"][0]["logStartOffset"] > 0
    assert "does not exist" in error_line("retention", "--data-dir", data / "nowhere")


def test_retention_command_covers_compact_delete_topics(data: Path) -> None:
    # Offline there is no log cleaner: the command gives compact,delete topics the retention a broker's
    # cleaner would, and leaves compact-only topics alone (LogManager.cleanup_logs alone skips both).
    for topic, policy in (("both", "compact,delete"), ("keys", "compact")):
        ok("topics", "create", "--data-dir", data, "--topic", topic, "--config", "segment.bytes=300",
           "--config", "retention.bytes=400", "--config", f"cleanup.policy={policy}")
        ok("produce", "--data-dir", data, "--topic", topic, "--batch-size", "2",
           stdin=jsonl([{"key": f"k{i}", "value": "v" * 20} for i in range(20)]))
    keys_before = sorted(p.name for p in (data / "keys-0").glob("*.log"))
    both_before = len(list((data / "both-0").glob("*.log")))
    deleted = int(ok("retention", "--data-dir", data).split()[1])
    assert deleted > 0 and len(list((data / "both-0").glob("*.log"))) == both_before - deleted
    assert sorted(p.name for p in (data / "keys-0").glob("*.log")) == keys_before
