"""The multi-process append protocol (``kafkalog.storage.appender``) and the data directory's lock
registry (``kafkalog.storage.dir_lock``): real files, real child processes probing the locks."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from kafkalog.errors import InvalidTopicError, LogDirLockedError, UnknownTopicOrPartitionError
from kafkalog.records.memory import MemoryRecords
from kafkalog.records.types import CompressionType, SimpleRecord
from kafkalog.storage.appender import (
    APPEND_LOCK_FILE,
    AppendState,
    PartitionAppender,
    list_partitions,
    open_log_for_append,
    read_append_state,
    recovery_decision,
)
from kafkalog.storage.dir_lock import DataDirLock
from kafkalog.storage.log_manager import LOCK_FILE, LogManager

T0 = 1_700_000_000_000

# Whether another process could take the data directory's POSIX (lockf) lock right now: exactly what
# a Kafka broker's FileChannel.tryLock asks.
_PROBE = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
try:
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    print("taken")
except OSError:
    print("refused")
"""


def _other_process_can_lock(data_dir: Path) -> bool:
    done = subprocess.run([sys.executable, "-c", _PROBE, str(data_dir / LOCK_FILE)],
                          capture_output=True, text=True, timeout=30, check=True)
    return done.stdout.strip() == "taken"


def _records(*values: bytes) -> MemoryRecords:
    return MemoryRecords.with_records(2, CompressionType.NONE, [SimpleRecord(v, None, T0) for v in values])


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    with LogManager(tmp_path) as lm:
        lm.create_topic("t", 2)
    return tmp_path


def test_a_refused_appender_leaves_the_owners_posix_lock_in_place(data_dir: Path) -> None:
    with LogManager(data_dir):
        assert not _other_process_can_lock(data_dir)
        with pytest.raises(LogDirLockedError, match="this process"), open_log_for_append(data_dir, "t", 0):
            pass
        with pytest.raises(LogDirLockedError, match="this process"):
            DataDirLock(data_dir, exclusive=False)
        # The owner's lock survived both refusals: a broker still cannot take the directory.
        assert not _other_process_can_lock(data_dir)
    assert _other_process_can_lock(data_dir)


def test_an_appender_excludes_an_owner_and_a_broker(data_dir: Path) -> None:
    with open_log_for_append(data_dir, "t", 0) as log:
        log.append_as_leader(_records(b"a"), leader_epoch=0)
        assert not _other_process_can_lock(data_dir)
        with pytest.raises(LogDirLockedError, match="this process"):
            LogManager(data_dir)
        # shared holders in one process share one descriptor: a second appender to another
        # partition works, and its end does not drop the first one's lock
        with open_log_for_append(data_dir, "t", 1) as other:
            other.append_as_leader(_records(b"b"), leader_epoch=0)
        assert not _other_process_can_lock(data_dir)
    assert not DataDirLock.held_by_this_process(data_dir)
    with LogManager(data_dir) as lm:
        assert [lm.get_log("t", p).log_end_offset for p in (0, 1)] == [1, 1]


def test_clean_state_after_a_close_and_no_recovery_needed(data_dir: Path) -> None:
    partition_dir = data_dir / "t-0"
    for i in range(3):
        with open_log_for_append(data_dir, "t", 0) as log:
            assert read_append_state(partition_dir) == AppendState(False, i)  # dirty while appending
            log.append_as_leader(_records(b"v%d" % i), leader_epoch=0)
        assert read_append_state(partition_dir) == AppendState(True, i + 1)
    assert (partition_dir / APPEND_LOCK_FILE).read_bytes() == b"clean 3\n"


_CRASHING_APPENDER = """
import os, sys
from pathlib import Path
from kafkalog.records.memory import MemoryRecords
from kafkalog.records.types import CompressionType, SimpleRecord
from kafkalog.storage.appender import open_log_for_append
with open_log_for_append(sys.argv[1], "t", 0) as log:
    log.append_as_leader(MemoryRecords.with_records(2, CompressionType.NONE, [SimpleRecord(b"whole")]),
                         leader_epoch=0)
    log.flush()
    segment = sorted(Path(sys.argv[1], "t-0").glob("*.log"))[-1]
    with open(segment, "ab") as f:
        f.write(b"\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x01\\x00\\x00\\x01\\x00torn")  # half a batch
    os._exit(3)  # dies mid-append: no close, the state stays dirty
"""


def _crash_an_appender(data_dir: Path) -> None:
    done = subprocess.run([sys.executable, "-c", _CRASHING_APPENDER, str(data_dir)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 3, done.stderr
    assert read_append_state(data_dir / "t-0") == AppendState(False, 0)


def test_the_next_appender_recovers_after_a_crashed_one(data_dir: Path) -> None:
    _crash_an_appender(data_dir)
    with open_log_for_append(data_dir, "t", 0) as log:
        assert log.log_end_offset == 1  # the whole batch kept, the torn one cut
        log.append_as_leader(_records(b"after"), leader_epoch=0)
    with LogManager(data_dir, read_only=True) as lm:
        assert [r.value for r in lm.get_log("t", 0).records(0)] == [b"whole", b"after"]


def test_an_owner_recovers_a_dirty_partition_despite_its_clean_shutdown_marker(data_dir: Path) -> None:
    assert (data_dir / ".kafka_cleanshutdown").exists()
    _crash_an_appender(data_dir)
    with LogManager(data_dir) as lm:
        assert lm.had_clean_shutdown
        log = lm.get_log("t", 0)
        assert log.log_end_offset == 1
        segment = sorted((data_dir / "t-0").glob("*.log"))[-1]
        assert segment.stat().st_size == log.size_in_bytes  # the torn bytes are gone
    # the owner's clean close is recorded for the next appender
    assert read_append_state(data_dir / "t-0") == AppendState(True, 1)


def test_a_dirty_state_alone_makes_the_owner_recover(data_dir: Path) -> None:
    # Indexes trimmed by a clean close, so nothing but the append state says the tail is torn (an
    # appender that died between its write and its close).
    with open_log_for_append(data_dir, "t", 0) as log:
        log.append_as_leader(_records(b"whole"), leader_epoch=0)
    segment = sorted((data_dir / "t-0").glob("*.log"))[-1]
    whole = segment.stat().st_size
    with open(segment, "ab") as f:
        f.write(bytes(12) + b"torn")
    (data_dir / "t-0" / APPEND_LOCK_FILE).write_bytes(b"dirty 1\n")
    with LogManager(data_dir) as lm:
        assert lm.had_clean_shutdown
        assert lm.get_log("t", 0).log_end_offset == 1
    assert segment.stat().st_size == whole


def test_appenders_to_one_partition_wait_for_each_other_with_a_bound(data_dir: Path) -> None:
    entered = threading.Event()
    release = threading.Event()

    def hold() -> None:
        with open_log_for_append(data_dir, "t", 0) as log:
            log.append_as_leader(_records(b"first"), leader_epoch=0)
            entered.set()
            release.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert entered.wait(30)
        started = time.monotonic()
        with (pytest.raises(LogDirLockedError, match="Timed out waiting for the append lock"),
              open_log_for_append(data_dir, "t", 0, timeout_s=0.3)):
            pass
        assert 0.3 <= time.monotonic() - started < 5
        # another partition is not held up
        with open_log_for_append(data_dir, "t", 1, timeout_s=0.3) as log:
            log.append_as_leader(_records(b"other"), leader_epoch=0)
    finally:
        release.set()
        holder.join(30)
    with open_log_for_append(data_dir, "t", 0, timeout_s=5) as log:
        assert log.log_end_offset == 1


def test_a_locked_but_unused_partition_does_not_force_recovery(data_dir: Path) -> None:
    with PartitionAppender(data_dir, "t", [0, 1]) as appender:
        appender.log(0).append_as_leader(_records(b"only 0"), leader_epoch=0)
    assert (data_dir / "t-1" / APPEND_LOCK_FILE).read_bytes() == b""
    assert read_append_state(data_dir / "t-1") is None
    assert recovery_decision(data_dir / "t-1", 5, True) == (5, True)
    assert recovery_decision(data_dir / "t-0", 5, True) == (5, True)  # clean 1
    (data_dir / "t-0" / APPEND_LOCK_FILE).write_bytes(b"dirty 1\n")
    assert recovery_decision(data_dir / "t-0", 5, True) == (1, False)
    (data_dir / "t-0" / APPEND_LOCK_FILE).write_bytes(b"garbage")
    assert recovery_decision(data_dir / "t-0", 5, True) == (0, False)


def test_partition_directory_names_cannot_escape_the_data_dir(data_dir: Path) -> None:
    # The directory name comes from log_file_utils, which validates the topic: a name like "../x"
    # must be refused, not resolved to a directory beside the data directory.
    outside = data_dir.parent / "x-0"
    outside.mkdir()
    with pytest.raises(InvalidTopicError), open_log_for_append(data_dir, "../x", 0):
        pass
    assert list(outside.iterdir()) == []  # nothing locked or written there


def test_unknown_partitions_and_partition_listing(data_dir: Path) -> None:
    assert list_partitions(data_dir, "t") == [0, 1]
    assert list_partitions(data_dir, "missing") == []
    with pytest.raises(UnknownTopicOrPartitionError), open_log_for_append(data_dir, "t", 7):
        pass
    assert not (data_dir / "t-7").exists()  # nothing created
    with PartitionAppender(data_dir, "t", [1]) as appender, pytest.raises(UnknownTopicOrPartitionError):
        appender.log(0)  # not locked by this appender


_CREATOR = """
import sys
from kafkalog.storage.appender import create_topic_if_missing
config, partitions = create_topic_if_missing(sys.argv[1], "created", 3, timeout_s=30)
print(partitions)
"""


def test_concurrent_creators_make_one_topic(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    children = [subprocess.Popen([sys.executable, "-c", _CREATOR, str(data_dir)], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True) for _ in range(4)]
    try:
        outputs = [child.communicate(timeout=60) for child in children]
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
    assert [(child.returncode, out.strip()) for child, (out, _) in zip(children, outputs, strict=True)] == \
        [(0, "3")] * 4, [err for _, err in outputs]
    assert list_partitions(data_dir, "created") == [0, 1, 2]


def test_creation_waits_for_appends_with_a_bound(data_dir: Path) -> None:
    from kafkalog.storage.appender import create_topic_if_missing

    with PartitionAppender(data_dir, "t", [0]):  # an append running: .lock is held shared
        started = time.monotonic()
        with pytest.raises(LogDirLockedError):
            create_topic_if_missing(data_dir, "other", 1, timeout_s=0.5)
        assert 0.5 <= time.monotonic() - started < 5
    config, partitions = create_topic_if_missing(data_dir, "other", 2)  # the appender is gone
    assert config.segment_bytes > 0
    assert partitions == 2 and list_partitions(data_dir, "other") == [0, 1]
    assert create_topic_if_missing(data_dir, "other", 5)[1] == 2  # an existing topic is left as it is


def test_clients_may_not_append_to_internal_topics(data_dir: Path) -> None:
    """The appender's writers (``kafkalog produce``, the Spark sink) are clients: like Kafka's broker,
    it refuses their appends to ``__consumer_offsets``, with one clear error and nothing written."""
    with LogManager(data_dir) as manager:
        manager.create_topic("__consumer_offsets", 1)
    with pytest.raises(InvalidTopicError, match="Cannot append to internal topic __consumer_offsets"), \
            open_log_for_append(data_dir, "__consumer_offsets", 0):
        pass
    with LogManager(data_dir) as manager:
        assert manager.get_log("__consumer_offsets", 0).log_end_offset == 0
