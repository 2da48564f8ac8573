"""``LogManager``: a data directory of topics — lock, marker, checkpoints, topic administration, and
Kafka-written partitions dropped into a data directory."""

from __future__ import annotations

import json
import select
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kafkalog.clock import SYSTEM_TIME
from kafkalog.errors import (
    InvalidConfigError,
    InvalidTopicError,
    KafkaStorageError,
    LogDirLockedError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from kafkalog.records.memory import MemoryRecords
from kafkalog.records.types import CompressionType, SimpleRecord
from kafkalog.storage.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT_FILE,
    RECOVERY_POINT_OFFSET_CHECKPOINT_FILE,
)
from kafkalog.storage.config import TOPIC_CONFIGS_FILE, LogConfig
from kafkalog.storage.log_manager import LOCK_FILE, LogManager, open_data_dir, recover_data_dir
from kafkalog.storage.metadata_files import (
    CLEAN_SHUTDOWN_FILE,
    META_PROPERTIES_FILE,
    PartitionMetadataFile,
    read_meta_properties,
)

T0 = 1_700_000_000_000
SEGMENT_0 = "00000000000000000000"
REPO_SRC = Path(__file__).resolve().parents[2] / "src"


def batch(n: int, start: int = 0, *, ts: int = T0) -> MemoryRecords:
    return MemoryRecords.with_records(2, CompressionType.NONE, [
        SimpleRecord(f"value-{i}".encode(), f"key-{i}".encode(), ts + i) for i in range(start, start + n)
    ])


def fill(lm: LogManager, topic: str, partition: int, batches: int, per_batch: int = 5) -> None:
    """Recent records, so that time-based retention (7 days by default) keeps them."""
    log = lm.get_log(topic, partition)
    now = SYSTEM_TIME.milliseconds()
    for b in range(batches):
        log.append_as_leader(batch(per_batch, b * per_batch, ts=now))


# --- topics -----------------------------------------------------------------------------------------


def test_create_list_describe_delete(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with LogManager(data) as lm:
        assert lm.topics() == []
        logs = lm.create_topic("orders", 3, {"segment.bytes": "1048576", "retention.ms": 3600000})
        assert [log.partition for log in logs] == [0, 1, 2]
        lm.create_topic("audit.events")
        assert lm.topics() == ["audit.events", "orders"]
        assert lm.partitions("orders") == [0, 1, 2]
        assert lm.topic_config("orders").segment_bytes == 1048576
        assert lm.topic_config("audit.events") == LogConfig()
        fill(lm, "orders", 1, 2)
        described = lm.describe_topic("orders")
        assert [(p.partition, p.log_start_offset, p.log_end_offset, p.segment_count)
                for p in described.partitions] == [(0, 0, 0, 1), (1, 0, 10, 1), (2, 0, 0, 1)]
        assert described.partitions[1].size_in_bytes == lm.get_log("orders", 1).size_in_bytes > 0
        assert described.config_overrides == {"segment.bytes": "1048576", "retention.ms": "3600000"}
        assert json.loads(json.dumps(described.to_json()))["partitionCount"] == 3

        with pytest.raises(TopicExistsError, match="orders"):
            lm.create_topic("orders")
        with pytest.raises(InvalidTopicError):
            lm.create_topic("bad/name")
        with pytest.raises(InvalidTopicError, match="collides"):
            lm.create_topic("audit_events")
        with pytest.raises(InvalidConfigError, match=r"segment\.bytes"):
            lm.create_topic("other", 1, {"segment.bytes": "lots"})
        with pytest.raises(InvalidConfigError, match=r"no\.such\.config"):
            lm.create_topic("other", 1, {"no.such.config": "1"})
        with pytest.raises(InvalidConfigError):
            lm.create_topic("other", 0)
        assert lm.topics() == ["audit.events", "orders"]  # failed creates leave nothing behind
        with pytest.raises(UnknownTopicOrPartitionError):
            lm.get_log("orders", 3)
        with pytest.raises(UnknownTopicOrPartitionError):
            lm.get_log("nope", 0)

    assert sorted(p.name for p in data.iterdir() if p.is_dir()) == [
        "audit.events-0", "orders-0", "orders-1", "orders-2"]
    ids = {PartitionMetadataFile(data / f"orders-{p}" / "partition.metadata").read().topic_id
           for p in range(3)}
    assert len(ids) == 1  # one topic id shared by the partitions
    assert json.loads((data / TOPIC_CONFIGS_FILE).read_text()) == {
        "version": 1, "topics": {"orders": {"retention.ms": "3600000", "segment.bytes": "1048576"}}}

    with LogManager(data) as lm:  # everything survives a reopen
        assert lm.topics() == ["audit.events", "orders"]
        assert lm.get_log("orders", 1).log_end_offset == 10
        assert lm.topic_config("orders").retention_ms == 3600000
        assert str(lm.topic_id("orders")) == str(next(iter(ids)))
        lm.delete_topic("orders")
        assert lm.topics() == ["audit.events"]
        with pytest.raises(UnknownTopicOrPartitionError):
            lm.delete_topic("orders")
    assert sorted(p.name for p in data.iterdir() if p.is_dir()) == ["audit.events-0"]
    assert json.loads((data / TOPIC_CONFIGS_FILE).read_text()) == {"version": 1, "topics": {}}
    assert "orders" not in (data / RECOVERY_POINT_OFFSET_CHECKPOINT_FILE).read_text()


def test_add_partitions_alter_config_and_retention(tmp_path: Path) -> None:
    with LogManager(tmp_path / "data") as lm:
        lm.create_topic("t", 1, {"segment.bytes": "500"})
        new = lm.add_partitions("t", 3)
        assert [log.partition for log in new] == [1, 2]
        assert lm.partitions("t") == [0, 1, 2]
        assert lm.topic_config("t").segment_bytes == 500
        with pytest.raises(InvalidConfigError, match="already has 3"):
            lm.add_partitions("t", 3)
        fill(lm, "t", 0, 12)
        segments = len(lm.get_log("t", 0).segments)
        assert segments > 3
        assert lm.cleanup_logs() == 0  # nothing to delete under the default retention

        altered = lm.alter_topic_config("t", {"retention.bytes": "600"})
        assert altered.retention_bytes == 600 and lm.topic_config("t").segment_bytes == 500
        assert lm.get_log("t", 0).config.retention_bytes == 600
        deleted = lm.cleanup_logs()
        assert deleted > 0
        log = lm.get_log("t", 0)
        assert len(log.segments) == segments - deleted
        assert log.log_start_offset > 0 and log.log_end_offset == 60
        # Retention moves the start to a segment boundary, which Kafka does not checkpoint; a
        # DeleteRecords-style increment inside a segment is checkpointed.
        start = log.log_start_offset + 2
        log.maybe_increment_log_start_offset(start)
        assert log.log_start_offset == start
        with pytest.raises(InvalidConfigError):
            lm.alter_topic_config("t", {"retention.bytes": "many"})
        lm.alter_topic_config("t", {"retention.bytes": None})
        assert lm.topic_config("t").overridden_props() == {"segment.bytes": "500"}
    checkpoint = (tmp_path / "data" / LOG_START_OFFSET_CHECKPOINT_FILE).read_text()
    assert checkpoint == f"0\n1\nt 0 {start}\n"
    with LogManager(tmp_path / "data") as lm:
        assert lm.get_log("t", 0).log_start_offset == start
        assert lm.topic_config("t").retention_bytes == -1


# --- lock, marker, meta.properties, checkpoints --------------------------------------------------------

_HOLDER = textwrap.dedent("""
    import sys
    sys.path.insert(0, sys.argv[2])
    from kafkalog.storage.log_manager import LogManager
    with LogManager(sys.argv[1]):
        print("locked", flush=True)
        sys.stdin.read()
""")


def _start_holder(data: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", _HOLDER, str(data), str(REPO_SRC)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ready, _, _ = select.select([proc.stdout], [], [], 30)
    assert ready, "the lock holder did not start within 30 s"
    assert proc.stdout is not None and proc.stdout.readline().strip() == "locked", proc.stderr
    return proc


def test_lock_excludes_a_second_process(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with LogManager(data) as lm:
        lm.create_topic("t")
    holder = _start_holder(data)
    try:
        with pytest.raises(LogDirLockedError, match=r"\.lock"):
            LogManager(data)
        with LogManager(data, read_only=True) as reader:  # readers take no lock
            assert reader.topics() == ["t"]
    finally:
        holder.communicate("", timeout=30)
    assert holder.returncode == 0, holder.stderr
    with LogManager(data) as lm:  # released when the other process is done
        assert lm.topics() == ["t"]
        with pytest.raises(LogDirLockedError):
            LogManager(data)  # a second writer in the same process is refused too
    assert (data / LOCK_FILE).exists()


def test_lock_held_here_is_seen_by_another_process(tmp_path: Path) -> None:
    data = tmp_path / "data"
    # The probe takes the lock the way Kafka's FileChannel.tryLock does (a POSIX record lock), and
    # the way kafkalog does; both must be refused while this process holds the directory.
    probe_code = textwrap.dedent("""
        import fcntl, os, sys
        sys.path.insert(0, sys.argv[2])
        from kafkalog.errors import LogDirLockedError
        from kafkalog.storage.log_manager import LogManager
        fd = os.open(os.path.join(sys.argv[1], ".lock"), os.O_RDWR)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            print("kafka-style lock taken")
        except OSError:
            print("kafka-style lock refused")
        try:
            LogManager(sys.argv[1])
            print("kafkalog lock taken")
        except LogDirLockedError:
            print("kafkalog lock refused")
    """)

    def probe() -> list[str]:
        result = subprocess.run([sys.executable, "-c", probe_code, str(data), str(REPO_SRC)],
                                capture_output=True, text=True, timeout=60, check=True)
        return result.stdout.splitlines()

    with LogManager(data):
        with pytest.raises(LogDirLockedError, match="this process"):
            LogManager(data)
        # The refused second open must not have dropped this process's POSIX lock.
        assert probe() == ["kafka-style lock refused", "kafkalog lock refused"]
    assert probe() == ["kafka-style lock taken", "kafkalog lock taken"]


def test_meta_properties_and_clean_shutdown_marker(tmp_path: Path) -> None:
    data = tmp_path / "data"
    lm = LogManager(data, node_id=3)
    meta = read_meta_properties(data / META_PROPERTIES_FILE)
    assert (meta.version, meta.node_id) == (1, 3)
    assert meta.cluster_id and meta.directory_id is not None
    assert (data / META_PROPERTIES_FILE).read_text().startswith("#\n#")
    assert not (data / CLEAN_SHUTDOWN_FILE).exists()
    assert not lm.had_clean_shutdown
    lm.create_topic("t")
    lm.close()
    lm.close()  # idempotent
    assert json.loads((data / CLEAN_SHUTDOWN_FILE).read_text()) == {"version": 0, "brokerEpoch": -1}

    with LogManager(data, read_only=True) as reader:
        assert reader.had_clean_shutdown
    assert (data / CLEAN_SHUTDOWN_FILE).exists()  # a reader changes nothing

    with LogManager(data) as lm:
        assert lm.had_clean_shutdown
        assert not (data / CLEAN_SHUTDOWN_FILE).exists()  # deleted as soon as loading begins
        assert read_meta_properties(data / META_PROPERTIES_FILE) == meta  # never rewritten
    (data / CLEAN_SHUTDOWN_FILE).unlink()
    with LogManager(data) as lm:
        assert not lm.had_clean_shutdown


def test_read_only_open_creates_nothing(tmp_path: Path) -> None:
    with pytest.raises(KafkaStorageError, match="does not exist"):
        LogManager(tmp_path / "missing", read_only=True)
    assert not (tmp_path / "missing").exists()
    with open_data_dir(tmp_path / "data") as lm:
        lm.create_topic("t")
    before = sorted(p.name for p in (tmp_path / "data").rglob("*"))
    with open_data_dir(tmp_path / "data", read_only=True) as reader:
        with pytest.raises(KafkaStorageError, match="read-only"):
            reader.create_topic("u")
        assert reader.get_log("t", 0).log_end_offset == 0
    assert sorted(p.name for p in (tmp_path / "data").rglob("*")) == before
    (tmp_path / "data" / "u-0").mkdir()  # a partition a writer is creating right now
    with open_data_dir(tmp_path / "data", read_only=True) as reader:
        assert reader.topics() == ["t"]


def test_checkpoints_in_kafka_format_and_honoured(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with LogManager(data) as lm:
        lm.create_topic("t", 2, {"segment.bytes": "400"})
        fill(lm, "t", 0, 8)
    log_file = data / "t-0" / RECOVERY_POINT_OFFSET_CHECKPOINT_FILE
    assert not log_file.exists()
    assert (data / RECOVERY_POINT_OFFSET_CHECKPOINT_FILE).read_text() == "0\n2\nt 0 40\nt 1 0\n"
    assert (data / LOG_START_OFFSET_CHECKPOINT_FILE).read_text() == "0\n0\n"
    segments = sorted((data / "t-0").glob("*.log"))
    assert len(segments) >= 3

    # A flipped byte in an OLD segment after an unclean shutdown: recovery starts at the checkpointed
    # recovery point (the last segment), so Kafka does not look at it ...
    first = segments[0]
    raw = bytearray(first.read_bytes())
    raw[100] ^= 0xFF
    first.write_bytes(bytes(raw))
    (data / CLEAN_SHUTDOWN_FILE).unlink()
    with LogManager(data) as lm:
        assert lm.get_log("t", 0).log_end_offset == 40
    # ... but with an unreadable recovery checkpoint every segment is recovered.
    (data / CLEAN_SHUTDOWN_FILE).unlink()
    (data / RECOVERY_POINT_OFFSET_CHECKPOINT_FILE).write_text("garbage\n")
    with LogManager(data) as lm:
        log = lm.get_log("t", 0)
        assert log.log_end_offset < 40
        assert len(log.segments) == 1


def test_delete_records_raises_the_recovery_point_to_the_new_log_start(tmp_path: Path) -> None:
    # Kafka's updateLogStartOffset: the recovery point never stays below the log start offset.
    with LogManager(tmp_path) as lm:
        lm.create_topic("t", 2, {"segment.bytes": "400"})
        fill(lm, "t", 0, 8)
        fill(lm, "t", 1, 8)
        lm.flush()
        unflushed = lm.get_log("t", 1)
        unflushed.append_as_leader(batch(5, 40))
        unflushed.append_as_leader(batch(5, 45))
        assert unflushed.recovery_point == 40
        unflushed.delete_records_before(43)  # mid segment, above the recovery point
        assert (unflushed.log_start_offset, unflushed.recovery_point) == (43, 43)
        unflushed.delete_records_before(41)  # below: changes nothing
        lm.checkpoint()
        assert (tmp_path / RECOVERY_POINT_OFFSET_CHECKPOINT_FILE).read_text() == "0\n2\nt 0 40\nt 1 43\n"
        assert (tmp_path / LOG_START_OFFSET_CHECKPOINT_FILE).read_text() == "0\n1\nt 1 43\n"


# --- data written by Kafka, odd directories -----------------------------------------------------------


def _copy_golden(source: Path, target: Path) -> None:
    target.mkdir(parents=True)
    for path in source.iterdir():
        shutil.copyfile(path, target / path.name)


def test_a_kafka_partition_opens(kafka_golden_dir: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    _copy_golden(kafka_golden_dir / "s1_v2_single" / "rolled", data / "golden-0")
    _copy_golden(kafka_golden_dir / "s2_v2_mixed", data / "golden-1")
    with LogManager(data) as lm:
        assert lm.topics() == ["golden"]
        first, second = lm.get_log("golden", 0), lm.get_log("golden", 1)
        assert (first.log_start_offset, first.log_end_offset, first.size_in_bytes) == (0, 30, 2440)
        assert (second.log_start_offset, second.log_end_offset) == (100, 110)
        values = [r.value for r in first.records(0)]
        assert values[:2] == [b"value-0", b"value-1"] and len(values) == 30
        found = first.offset_for_timestamp(T0 + 2500)
        assert found is not None and found.offset == 3  # Kafka's answer (expected.json)
    assert (data / RECOVERY_POINT_OFFSET_CHECKPOINT_FILE).read_text() == (
        "0\n2\ngolden 0 30\ngolden 1 110\n")
    # Kafka's files had no partition.metadata: both partitions now carry one topic id.
    ids = {PartitionMetadataFile(data / f"golden-{p}" / "partition.metadata").read().topic_id for p in (0, 1)}
    assert len(ids) == 1


def test_recover_data_dir_truncates_a_torn_tail(kafka_golden_dir: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "t-0").mkdir()
    shutil.copyfile(kafka_golden_dir / "s4_recovery_input_torn_tail.log", data / "t-0" / f"{SEGMENT_0}.log")
    results = recover_data_dir(data)
    assert len(results) == 1
    result = results[0]
    assert (result.topic, result.partition, result.log_end_offset, result.truncated_bytes) == ("t", 0, 30, 40)
    assert f"{SEGMENT_0}.index" in result.rebuilt_indexes
    assert (data / "t-0" / f"{SEGMENT_0}.log").stat().st_size == 2440
    assert (data / CLEAN_SHUTDOWN_FILE).exists()
    again = recover_data_dir(data)
    assert not again[0].changed


def test_special_and_foreign_directories(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with LogManager(data) as lm:
        lm.create_topic("t")
    (data / "t-0.0123456789abcdef0123456789abcdef-delete").mkdir()
    (data / "t-1.0123456789abcdef0123456789abcdef-future").mkdir()
    (data / "t-2.0123456789abcdef0123456789abcdef-stray").mkdir()
    (data / "__cluster_metadata-0").mkdir()
    (data / "notes.txt").write_text("plain files are not partitions")
    with LogManager(data) as lm:
        assert lm.topics() == ["t"] and lm.partitions("t") == [0]
    names = sorted(p.name for p in data.iterdir() if p.is_dir())
    assert not any(name.endswith("-delete") for name in names)  # removed at load, as Kafka does
    assert any(name.endswith("-future") for name in names) and "__cluster_metadata-0" in names

    (data / "backup").mkdir()
    with pytest.raises(KafkaStorageError, match="'backup'"):
        LogManager(data)
    assert not (data / CLEAN_SHUTDOWN_FILE).exists()  # a failed open is not a clean shutdown
    # ... and it released the lock.
    shutil.rmtree(data / "backup")
    with LogManager(data) as lm:
        assert lm.topics() == ["t"]
