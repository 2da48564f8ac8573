"""The 4-byte big-endian size prefix of every request and response (Kafka's ``NetworkReceive``)."""

from __future__ import annotations

import struct

from kafkalog.errors import InvalidRequestError

__all__ = ["SIZE_PREFIX", "check_frame_size", "size_prefix"]

SIZE_PREFIX = 4
_INT32 = struct.Struct(">i")


def check_frame_size(prefix: bytes, max_size: int) -> int:
    """The size a 4-byte prefix announces, refused when negative, zero or above ``max_size``
    (``socket.request.max.bytes``) — decided before a single byte of the body is allocated."""
    if len(prefix) != SIZE_PREFIX:
        raise InvalidRequestError(f"Truncated size prefix: {len(prefix)} bytes")
    (size,) = _INT32.unpack(prefix)
    if size < 0:
        raise InvalidRequestError(f"Invalid receive (size = {size})")
    if size > max_size:
        raise InvalidRequestError(
            f"Invalid receive (size = {size} larger than {max_size} (socket.request.max.bytes))"
        )
    if size == 0:
        raise InvalidRequestError("Invalid receive (size = 0): a request has at least a header")
    return size


def size_prefix(size: int) -> bytes:
    return _INT32.pack(size)
