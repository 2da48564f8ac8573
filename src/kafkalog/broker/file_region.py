"""A range of a segment file to send as part of a Fetch response, held by its own descriptor.

The descriptor is a ``dup`` of the segment's: if retention deletes (and closes) the segment before
the response is sent, the bytes stay readable (POSIX unlink semantics), as in Kafka. ``close`` after
sending. It has what ``loop.sendfile`` needs of a file (``fileno``, ``seek``, ``readinto``, a binary
``mode``), so asyncio sends it with ``os.sendfile``, or by reading where that is not possible (TLS).
"""

from __future__ import annotations

import os

__all__ = ["FileRegion"]


class FileRegion:
    __slots__ = ("_fd", "_pos", "position", "size")

    mode = "rb"

    def __init__(self, fd: int, position: int, size: int) -> None:
        self._fd = os.dup(fd)
        self.position = position
        self.size = size
        self._pos = position

    def fileno(self) -> int:
        return self._fd

    def seek(self, offset: int, whence: int = 0) -> int:
        self._pos = offset
        return offset

    def readinto(self, buffer: bytearray | memoryview) -> int:
        n = os.preadv(self._fd, [buffer], self._pos)
        self._pos += n
        return n

    def read_all(self) -> bytes:
        return os.pread(self._fd, self.size, self.position)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __del__(self) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"FileRegion(position={self.position}, size={self.size})"
