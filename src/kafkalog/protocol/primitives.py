"""Kafka's primitive wire types for the hand-written paths: a bounds-checked reader over a
``memoryview`` (every length is checked against what is left before it is used) and writers that
append to a ``bytearray``."""

from __future__ import annotations

import struct
import uuid

from kafkalog.errors import InvalidRequestError

__all__ = [
    "Reader",
    "write_array_len",
    "write_compact_array_len",
    "write_compact_nullable_string",
    "write_nullable_string",
    "write_topic_key",
    "write_compact_string",
    "write_string",
    "write_uvarint",
]

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class Reader:
    """Sequential reads from ``view[pos:]``; running out of bytes is an InvalidRequestError."""

    __slots__ = ("pos", "view")

    def __init__(self, view: memoryview, pos: int = 0) -> None:
        self.view = view
        self.pos = pos

    def _need(self, n: int, what: str) -> int:
        pos = self.pos
        if n < 0 or pos + n > len(self.view):
            raise InvalidRequestError(
                f"Truncated request: {what} needs {n} bytes at position {pos}, {len(self.view) - pos} left"
            )
        self.pos = pos + n
        return pos

    def int8(self) -> int:
        return int(_I8.unpack_from(self.view, self._need(1, "int8"))[0])

    def int16(self) -> int:
        return int(_I16.unpack_from(self.view, self._need(2, "int16"))[0])

    def int32(self) -> int:
        return int(_I32.unpack_from(self.view, self._need(4, "int32"))[0])

    def int64(self) -> int:
        return int(_I64.unpack_from(self.view, self._need(8, "int64"))[0])

    def uuid(self) -> uuid.UUID:
        pos = self._need(16, "uuid")
        return uuid.UUID(bytes=bytes(self.view[pos : pos + 16]))

    def uvarint(self) -> int:
        view = self.view
        value = shift = 0
        pos = self.pos
        while True:
            if pos >= len(view):
                raise InvalidRequestError(f"Truncated varint at position {self.pos}")
            b = view[pos]
            pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                break
            shift += 7
            if shift > 28:
                raise InvalidRequestError(f"Varint longer than 5 bytes at position {self.pos}")
        self.pos = pos
        return value

    def nullable_string(self) -> str | None:
        n = self.int16()
        if n == -1:
            return None
        return self._text(n)

    def compact_nullable_string(self) -> str | None:
        n = self.uvarint() - 1
        if n == -1:
            return None
        return self._text(n)

    def _text(self, n: int) -> str:
        pos = self._need(n, "string")
        try:
            return bytes(self.view[pos : pos + n]).decode("utf-8")
        except UnicodeDecodeError as e:
            raise InvalidRequestError(f"String at position {pos} is not UTF-8: {e}") from None

    def bytes_view(self, n: int) -> memoryview:
        pos = self._need(n, "bytes")
        return self.view[pos : pos + n]

    def array_len(self, flexible: bool, min_item_size: int = 1) -> int:
        """An array length (-1 = null), refused when the rest of the frame cannot hold that many items:
        nothing is sized by the untrusted number."""
        n = self.uvarint() - 1 if flexible else self.int32()
        if n < -1 or (n > 0 and n * min_item_size > len(self.view) - self.pos):
            raise InvalidRequestError(f"Invalid array length {n} at position {self.pos}")
        return n

    def skip_tagged_fields(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self._need(self.uvarint(), "tagged field")

    def remaining(self) -> int:
        return len(self.view) - self.pos


def write_uvarint(out: bytearray, value: int) -> None:
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def write_compact_array_len(out: bytearray, n: int | None) -> None:
    write_uvarint(out, 0 if n is None else n + 1)


def write_string(out: bytearray, text: str) -> None:
    data = text.encode("utf-8")
    out += _I16.pack(len(data))
    out += data


def write_compact_string(out: bytearray, text: str) -> None:
    data = text.encode("utf-8")
    write_uvarint(out, len(data) + 1)
    out += data


def write_compact_nullable_string(out: bytearray, text: str | None) -> None:
    if text is None:
        out.append(0)
    else:
        write_compact_string(out, text)


def write_nullable_string(out: bytearray, text: str | None) -> None:
    if text is None:
        out += _I16.pack(-1)
    else:
        write_string(out, text)


def write_array_len(out: bytearray, n: int | None, flexible: bool) -> None:
    """An array's length: a compact varint (n + 1) in flexible versions, else an INT32 (-1 for null)."""
    if flexible:
        write_compact_array_len(out, n)
    else:
        out += _I32.pack(-1 if n is None else n)


def write_topic_key(
    out: bytearray, name: str | None, topic_id: uuid.UUID | None, by_id: bool, flexible: bool
) -> None:
    """A response topic's key: its id (from the version that names topics by id), else its name."""
    if by_id:
        out += (topic_id or uuid.UUID(int=0)).bytes
    elif flexible:
        write_compact_string(out, name or "")
    else:
        write_string(out, name or "")
