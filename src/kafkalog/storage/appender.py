"""Appending to a data directory that no ``LogManager`` owns: the multi-process append protocol.

Many processes (Spark tasks, ``kafkalog produce``) may append to one data directory at once, and
to one partition in turn, without a ``LogManager`` or broker holding it:

1. **Data directory, shared.** The appender holds ``<dir>/.lock`` *shared* (``DataDirLock``), so it
   is refused while a writable ``LogManager`` or a Kafka broker holds the directory exclusively
   (they keep partition state in memory: appending behind their back would corrupt it), and such
   an owner cannot open the directory while appends run.
2. **Partition, exclusive.** Appends to one partition are serialised by an exclusive ``flock`` on
   ``<dir>/<topic>-<partition>/.kafkalog-append.lock`` (``APPEND_LOCK_FILE``), taken for the whole
   open-append-close cycle. Waits are bounded (``timeout_s``). Kafka's loader only looks at its own
   file suffixes, so the file inside the partition directory is invisible to it.
3. **Clean/dirty state.** The append lock file's content is one ASCII line: ``clean <log end
   offset>`` after the last appender closed the log, ``dirty <log end offset>`` (the offset when
   appends started) while one appends. The file is created empty: nobody has appended yet (an
   appender that locks a partition and does not use it leaves it so).
4. **Recovery decision.** The next appender opens the log without recovery only after a clean close
   that nobody appended past since (the log end it finds equals the recorded one). Otherwise — a
   dirty state (an appender died), none or an unreadable one, or a log end that moved (someone
   appended outside this protocol) — it recovers from the recorded offset, or from the
   recovery-point checkpoint when there is none, so a torn batch is cut. A ``LogManager`` that
   opens the directory later recovers a partition left dirty (or with a malformed state) from that
   offset (``recovery_decision``), even after its own clean shutdown marker; an empty or missing
   state leaves its decision alone. It records ``clean`` when it closes.

5. **Topic creation.** Appenders that find their topic missing create it through
   ``create_topic_if_missing``: creators take ``<dir>/.kafkalog-create-topic.lock``
   (``CREATE_TOPIC_LOCK_FILE``) exclusively, look again, and create the topic with a writable
   ``LogManager``, whose exclusive ``.lock`` waits for running appends to finish. Both waits are
   bounded.

The protocol never writes the data directory's checkpoints or clean-shutdown marker: those belong to
the owner (``LogManager``), which recovers from its recovery point as Kafka does.
"""

from __future__ import annotations

import fcntl
import os
import time as _time
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Self

from kafkalog.clock import SYSTEM_TIME, Time
from kafkalog.errors import KafkaLogError, KafkaStorageError, LogDirLockedError, UnknownTopicOrPartitionError
from kafkalog.storage.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT_FILE,
    RECOVERY_POINT_OFFSET_CHECKPOINT_FILE,
    OffsetCheckpointFile,
)
from kafkalog.storage.config import LogConfig, read_topic_configs
from kafkalog.storage.dir_lock import DataDirLock
from kafkalog.storage.log import Log
from kafkalog.storage.log_file_utils import check_client_append, topic_partition_dir_name
from kafkalog.storage.partition_dirs import list_topic_partitions
from kafkalog.storage.recovery_report import RecoveryReport

__all__ = [
    "APPEND_LOCK_FILE",
    "CREATE_TOPIC_LOCK_FILE",
    "DEFAULT_LOCK_TIMEOUT_S",
    "AppendState",
    "PartitionAppender",
    "create_topic_if_missing",
    "list_partitions",
    "open_log_for_append",
    "read_append_state",
    "recovery_decision",
    "write_append_state",
]

APPEND_LOCK_FILE = ".kafkalog-append.lock"
CREATE_TOPIC_LOCK_FILE = ".kafkalog-create-topic.lock"
# A partition's appends take well under a second per flush; a wait this long means a stuck holder.
DEFAULT_LOCK_TIMEOUT_S = 120.0
_STATE_MAX = 128


@dataclass(frozen=True, slots=True)
class AppendState:
    """What the last appender left in the append lock file (``log_end_offset`` None: unknown)."""

    clean: bool
    log_end_offset: int | None

    @staticmethod
    def parse(data: bytes) -> AppendState:
        words = data.decode("ascii", "replace").split()
        if len(words) == 2 and words[0] in ("clean", "dirty") and words[1].isdigit():
            return AppendState(words[0] == "clean", int(words[1]))
        return AppendState(False, None)

    def encode(self) -> bytes:
        return f"{'clean' if self.clean else 'dirty'} {self.log_end_offset}\n".encode("ascii")


def _read_fd(fd: int) -> AppendState:
    return AppendState.parse(os.pread(fd, _STATE_MAX, 0))


def _write_fd(fd: int, state: AppendState) -> None:
    os.ftruncate(fd, 0)
    os.pwrite(fd, state.encode(), 0)
    os.fsync(fd)


def read_append_state(partition_dir: Path) -> AppendState | None:
    """The partition's append state, or None if no appender ever appended to it (no file, or the
    empty file an appender leaves when it locked the partition but never opened the log)."""
    try:
        with open(partition_dir / APPEND_LOCK_FILE, "rb") as f:
            data = f.read(_STATE_MAX)
            return AppendState.parse(data) if data else None
    except FileNotFoundError:
        return None
    except OSError as e:
        raise KafkaStorageError(f"Cannot read {partition_dir / APPEND_LOCK_FILE}: {e}") from e


def write_append_state(partition_dir: Path, state: AppendState) -> None:
    """Record ``state`` for a partition that has an append lock file (for an exclusive owner)."""
    path = partition_dir / APPEND_LOCK_FILE
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return
    except OSError as e:
        raise KafkaStorageError(f"Cannot open {path}: {e}") from e
    try:
        _write_fd(fd, state)
    finally:
        os.close(fd)  # a flock of another descriptor is not affected


def recovery_decision(partition_dir: Path, recovery_point: int, had_clean_shutdown: bool) -> tuple[int, bool]:
    """(recovery point, clean?) for an owner loading this partition: a dirty append state means an
    appender died mid-append, whatever the directory's clean-shutdown marker says."""
    state = read_append_state(partition_dir)
    if state is None or state.clean:
        return recovery_point, had_clean_shutdown
    start = state.log_end_offset if state.log_end_offset is not None else 0
    return min(recovery_point, start), False


def list_partitions(data_dir: Path | str, topic: str) -> list[int]:
    """The topic's partition directories, by ``LogManager``'s rules (no log is opened)."""
    return list_topic_partitions(data_dir, readable_only=False).get(topic, [])


def _checkpointed(data_dir: Path, name: str, topic: str, partition: int) -> int | None:
    try:
        return OffsetCheckpointFile(data_dir / name).read().get((topic, partition))
    except (KafkaLogError, OSError):
        return None  # unreadable: as if absent (the owner reports it when it opens the directory)


def _lock_partition(partition_dir: Path, deadline: float) -> int:
    return _lock_exclusive(partition_dir / APPEND_LOCK_FILE, deadline,
                           f"the append lock of {partition_dir} (another appender holds it)")


def _lock_exclusive(path: Path, deadline: float, what: str) -> int:
    """An open descriptor of ``path`` (created if missing) holding its exclusive ``flock``."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        raise KafkaStorageError(f"Cannot open {path}: {e}") from e
    pause = 0.001
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if _time.monotonic() >= deadline:
                os.close(fd)
                raise LogDirLockedError(f"Timed out waiting for {what}") from None
            _time.sleep(pause)
            pause = min(pause * 2, 0.05)
        except OSError as e:
            os.close(fd)
            raise KafkaStorageError(f"Cannot lock {path}: {e}") from e


class PartitionAppender:
    """Appends to partitions of one topic under the protocol above; use as a context manager.

    Entering takes the data directory's shared lock and the append locks of ``partitions`` (in
    partition order, so two appenders never deadlock). ``log(p)`` opens a partition on first use,
    recovering it if needed, and marks it dirty. Leaving flushes and closes every opened log and
    marks it clean — only when the block ended without an exception; otherwise the next opener
    recovers what was appended.
    """

    def __init__(self, data_dir: Path | str, topic: str, partitions: Iterable[int],
                 config: LogConfig | None = None, *, time: Time = SYSTEM_TIME,
                 timeout_s: float = DEFAULT_LOCK_TIMEOUT_S) -> None:
        check_client_append(topic)  # these writers are clients
        self._dir = Path(data_dir)
        self._topic = topic
        self._partitions = sorted(set(partitions))
        self._config = config
        self._time = time
        self._timeout_s = timeout_s
        self._fds: dict[int, int] = {}
        self._logs: dict[int, Log] = {}
        self._reports: list[RecoveryReport] = []
        self._stack: ExitStack | None = None

    def __enter__(self) -> Self:
        with ExitStack() as stack:
            stack.enter_context(DataDirLock(self._dir, exclusive=False))
            deadline = _time.monotonic() + self._timeout_s
            for p in self._partitions:
                partition_dir = self._partition_dir(p)
                if not partition_dir.is_dir():
                    raise UnknownTopicOrPartitionError(
                        f"Partition {self._topic}-{p} does not exist in {self._dir}")
                fd = _lock_partition(partition_dir, deadline)
                stack.callback(os.close, fd)  # closing the descriptor releases the flock
                self._fds[p] = fd
            if self._config is None:
                self._config = LogConfig.from_props(read_topic_configs(self._dir).get(self._topic, {}))
            self._stack = stack.pop_all()
        return self

    @property
    def recovery_reports(self) -> list[RecoveryReport]:
        """What opening partitions (so far) cut from their data; see ``kafkalog.storage.recovery_report``."""
        return list(self._reports)

    def _partition_dir(self, partition: int) -> Path:
        return self._dir / topic_partition_dir_name(self._topic, partition)

    def log(self, partition: int) -> Log:
        """The partition's log, opened (and recovered if the protocol says so) on first use."""
        opened = self._logs.get(partition)
        if opened is not None:
            return opened
        fd = self._fds.get(partition)
        if fd is None:
            raise UnknownTopicOrPartitionError(
                f"Partition {self._topic}-{partition} is not one this appender locked ({self._partitions})")
        opened = self._open(partition, _read_fd(fd))
        if opened.recovery_report.cuts:
            self._reports.append(opened.recovery_report)
        try:
            _write_fd(fd, AppendState(False, opened.log_end_offset))
        except BaseException:
            opened.close()
            raise
        self._logs[partition] = opened
        return opened

    def _open(self, partition: int, state: AppendState) -> Log:
        partition_dir = self._partition_dir(partition)
        log_start = _checkpointed(self._dir, LOG_START_OFFSET_CHECKPOINT_FILE, self._topic, partition) or 0
        known_end = state.log_end_offset
        if state.clean and known_end is not None:
            plog = Log.open(partition_dir, self._config, recovery_point=known_end, log_start_offset=log_start,
                            had_clean_shutdown=True, time=self._time)
            if plog.log_end_offset == known_end:
                return plog
            plog.close()  # appended to outside this protocol: do not trust the tail
        if known_end is None:
            known_end = _checkpointed(self._dir, RECOVERY_POINT_OFFSET_CHECKPOINT_FILE, self._topic,
                                      partition) or 0
        return Log.open(partition_dir, self._config, recovery_point=known_end, log_start_offset=log_start,
                        had_clean_shutdown=False, time=self._time)

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        stack, self._stack = self._stack, None
        if stack is None:
            return
        with stack:
            logs, self._logs = self._logs, {}
            first_error: BaseException | None = None
            for partition, plog in logs.items():
                # Every log is closed even if another fails; only a fully closed one is clean.
                try:
                    clean = self._close(plog, flush=exc_type is None)
                    if clean is not None:
                        _write_fd(self._fds[partition], clean)
                except BaseException as e:
                    first_error = first_error or e
            if first_error is not None:
                raise first_error

    @staticmethod
    def _close(plog: Log, *, flush: bool) -> AppendState | None:
        try:
            if not flush:
                return None
            plog.flush()
            return AppendState(True, plog.log_end_offset)
        finally:
            plog.close()


@contextmanager
def open_log_for_append(
    data_dir: Path | str, topic: str, partition: int, config: LogConfig | None = None, *,
    time: Time = SYSTEM_TIME, timeout_s: float = DEFAULT_LOCK_TIMEOUT_S,
) -> Iterator[Log]:
    """One partition's ``Log`` under the append protocol, for the duration of the ``with`` block."""
    with PartitionAppender(data_dir, topic, (partition,), config, time=time, timeout_s=timeout_s) as appender:
        yield appender.log(partition)


def create_topic_if_missing(data_dir: Path | str, topic: str, partitions: int, *,
                            timeout_s: float = DEFAULT_LOCK_TIMEOUT_S) -> tuple[LogConfig, int]:
    """The topic's config and partition count, after creating it with ``partitions`` partitions if it
    does not exist (step 5 above: safe against other processes creating or appending at once)."""
    from kafkalog.storage.log_manager import LogManager  # it builds on this module

    data_dir = Path(data_dir)
    deadline = _time.monotonic() + timeout_s
    fd = _lock_exclusive(data_dir / CREATE_TOPIC_LOCK_FILE, deadline,
                         f"the topic-creation lock of {data_dir} (another process is creating a topic)")
    try:
        pause = 0.001
        while True:
            try:
                # Writable: takes .lock exclusively, so it is refused while appends run.
                with LogManager(data_dir) as manager:
                    if not manager.has_topic(topic):
                        manager.create_topic(topic, partitions)
                    return manager.topic_config(topic), len(manager.partitions(topic))
            except LogDirLockedError:
                if _time.monotonic() >= deadline:
                    raise
                _time.sleep(pause)
                pause = min(pause * 2, 0.05)
    finally:
        os.close(fd)
