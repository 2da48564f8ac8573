"""The data directory's ``.lock``, held exclusively by its owner or shared by appenders.

Kafka's broker holds ``<dir>/.lock`` with ``FileChannel.tryLock``, a POSIX record lock. kafkalog
takes the same lock *and* a ``flock`` on the same descriptor: the POSIX lock excludes a Kafka broker,
the ``flock`` excludes other kafkalog openers even inside one process (POSIX locks do not conflict
within a process). Two modes:

* **exclusive** — a writable ``LogManager`` (and so a broker built on it): it keeps partition state
  in memory and must be the only writer;
* **shared** — appenders of the multi-process append protocol (``kafkalog.storage.appender``): many
  processes may append to different partitions at once, but never next to an exclusive owner.

POSIX record locks belong to the process and vanish when *any* descriptor of the file is closed, so
this process opens a directory's lock file at most once: a registry of held directories (by device
and inode) answers every later request before the file is touched. A shared request while this
process holds the directory exclusively (or the reverse) is refused from the registry, never by
opening and closing a second descriptor, which would silently drop the owner's lock.
"""

from __future__ import annotations

import fcntl
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import ClassVar, Self

from kafkalog.errors import KafkaStorageError, LogDirLockedError

__all__ = ["LOCK_FILE", "DataDirLock"]

LOCK_FILE = ".lock"


@dataclass(slots=True)
class _Held:
    fd: int
    exclusive: bool
    holders: int


class DataDirLock:
    """``<data_dir>/.lock`` held by this object until ``release`` (or the end of a ``with``).

    Raises ``LogDirLockedError`` at once (it never waits) when another process, or another holder in
    this process, has the directory in a conflicting mode.
    """

    _held: ClassVar[dict[tuple[int, int], _Held]] = {}
    _guard: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, data_dir: Path | str, *, exclusive: bool) -> None:
        self._dir = Path(data_dir)
        self._exclusive = exclusive
        self._key: tuple[int, int] | None = None
        try:
            st = os.stat(self._dir)
        except OSError as e:
            raise KafkaStorageError(f"Cannot access data directory {self._dir}: {e}") from e
        key = (st.st_dev, st.st_ino)
        with self._guard:
            held = self._held.get(key)
            if held is not None:
                if exclusive or held.exclusive:
                    raise self._refused("this process" + (" (a LogManager)" if held.exclusive else
                                                          " (an appender)"))
                held.holders += 1
            else:
                self._held[key] = _Held(self._lock_file(), exclusive, 1)
        self._key = key

    def _lock_file(self) -> int:
        path = self._dir / LOCK_FILE
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise KafkaStorageError(f"Cannot open lock file {path}: {e}") from e
        try:
            if self._exclusive:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            else:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)  # no lock of this process is on the file (the registry said so)
            raise self._refused("another kafkalog or Kafka process") from None
        return fd

    def _refused(self, holder: str) -> LogDirLockedError:
        wanted = "exclusive" if self._exclusive else "shared"
        return LogDirLockedError(
            f"Failed to acquire {wanted} lock on file {LOCK_FILE} in {self._dir}: {holder} is using this "
            "data directory"
        )

    @property
    def exclusive(self) -> bool:
        return self._exclusive

    @classmethod
    def held_by_this_process(cls, data_dir: Path | str) -> bool:
        """Whether any holder in this process has ``data_dir`` locked."""
        try:
            st = os.stat(data_dir)
        except OSError:
            return False
        with cls._guard:
            return (st.st_dev, st.st_ino) in cls._held

    def release(self) -> None:
        """Give the lock up (idempotent); the last holder's release closes the file, which drops it."""
        with self._guard:
            key, self._key = self._key, None
            if key is None:
                return
            held = self._held[key]
            held.holders -= 1
            if held.holders == 0:
                del self._held[key]
                # Closing the descriptor drops both locks; the file stays, as Kafka leaves it.
                os.close(held.fd)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()
