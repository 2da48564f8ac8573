"""``ReadAhead``: a sealed segment's bytes a buffer at a time, the next buffer read on a helper thread.

The cleaner walks every byte of the segments it cleans, twice, in C and without the GIL. Reading
them costs about as much again: the kernel copies every page out of the page cache. Reading the
next buffer on another thread while the walk works on the current one takes that copy off the
walk's path wherever a second core is free.

A walk asks for the bytes from a position (:meth:`ReadAhead.view`) and stops before the first
batch that is not whole in them; it then asks again from that batch. The bytes it has not used are
copied in front of the buffer read ahead, so the batch is whole again, and the next read starts at
once. A view is at least ``read_size`` bytes (less only at the end of the file) unless the caller
jumped into the middle of the buffer read ahead; it is valid until the next call.
"""

from __future__ import annotations

from concurrent.futures import Executor, Future

from kafkalog.errors import IllegalArgumentError
from kafkalog.storage.file_records import FileRecords

__all__ = ["ReadAhead", "read_ahead_buffers"]


def read_ahead_buffers(read_size: int) -> tuple[bytearray, bytearray]:
    """The two buffers a :class:`ReadAhead` of ``read_size`` works in; a caller that reads file
    after file passes the same pair to each (fresh buffers this large are fresh pages to fault in)."""
    return bytearray(2 * read_size), bytearray(2 * read_size)


class ReadAhead:
    """Views of ``source`` from any position, read ``read_size`` bytes at a time, the next read
    started on ``executor`` (None: every read is made when asked for), in ``buffers`` (from
    :func:`read_ahead_buffers`; by default allocated by the first view)."""

    __slots__ = ("_buffers", "_current", "_executor", "_pending", "_read_size", "_source")

    def __init__(self, source: FileRecords, read_size: int, executor: Executor | None,
                 buffers: tuple[bytearray, bytearray] | None = None) -> None:
        if buffers is not None and min(len(buffers[0]), len(buffers[1])) < 2 * read_size:
            raise IllegalArgumentError(f"Read-ahead buffers must hold {2 * read_size} bytes each")
        self._source = source
        self._read_size = read_size
        self._executor = executor
        # Two buffers, each with room for one read behind ``read_size`` bytes kept from the other.
        self._buffers = (bytearray(), bytearray()) if buffers is None else buffers
        # (buffer index, file position, start in the buffer, length) of the bytes last handed out,
        # and of the read ahead (into the other buffer, at ``read_size``) with its future length.
        self._current: tuple[int, int, int, int] | None = None
        self._pending: tuple[int, Future[int]] | None = None

    def __enter__(self) -> ReadAhead:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Wait for the read ahead, if any (its buffer must not be written once released)."""
        pending, self._pending = self._pending, None
        if pending is not None:
            pending[1].exception()

    def view(self, position: int) -> memoryview:
        """The bytes of ``source`` from ``position`` on."""
        current = self._current
        if current is not None:
            index, start, offset, length = current
            end = start + length
            if start <= position <= end and (end - position >= self._read_size
                                             or end >= self._source.size_in_bytes):
                return memoryview(self._buffers[index])[offset + position - start:offset + length]
        pending, self._pending = self._pending, None
        if pending is not None:
            ahead_at = pending[0]
            got = pending[1].result()
            other = 1 - current[0] if current is not None else 0
            target = self._buffers[other]
            base = self._read_size  # where the read ahead landed
            if ahead_at <= position < ahead_at + got:
                return self._hand_out(other, ahead_at, base, got, position)
            if current is not None and current[1] <= position < ahead_at == current[1] + current[3]:
                kept = ahead_at - position  # < read_size: else the current buffer answered above
                index, start, offset, _ = current
                at = offset + position - start
                memoryview(target)[base - kept:base] = memoryview(self._buffers[index])[at:at + kept]
                return self._hand_out(other, position, base - kept, kept + got, position)
        # Nothing read covers it (the first view, or a jump): read it now.
        if not self._buffers[0]:
            self._buffers = read_ahead_buffers(self._read_size)
        index = 1 - self._current[0] if self._current is not None else 0
        got = self._read(index, position)
        return self._hand_out(index, position, self._read_size, got, position)

    def _read(self, index: int, position: int) -> int:
        if position >= self._source.size_in_bytes:
            return 0
        buffer = memoryview(self._buffers[index])[self._read_size:]
        return len(self._source.read_into(position, buffer))

    def _hand_out(self, index: int, start: int, offset: int, length: int, position: int) -> memoryview:
        """Make buffer ``index`` current (file bytes [start, start + length) at ``offset``), start
        reading what follows into the other one, and return the view from ``position``."""
        self._current = (index, start, offset, length)
        end = start + length
        if self._executor is not None and length and end < self._source.size_in_bytes:
            self._pending = (end, self._executor.submit(self._read, 1 - index, end))
        return memoryview(self._buffers[index])[offset + position - start:offset + length]
