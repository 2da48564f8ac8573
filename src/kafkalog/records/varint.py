"""Zig-zag varint (32-bit) and varlong (64-bit) as used inside v2 records (spec §3.4).

Decoding follows Kafka's ``ByteUtils``: a varint has at most 5 bytes and a varlong at most 10; one
more continuation bit is an error (``InvalidRecordError``). Bits that do not fit the Java type are
dropped (a 5th varint byte contributes only its low 4 bits), so results match Kafka's ints/longs.
"""

from __future__ import annotations

from kafkalog.errors import InvalidRecordError

__all__ = [
    "decode_varint",
    "decode_varlong",
    "encode_varint",
    "encode_varlong",
    "size_of_varint",
    "size_of_varlong",
    "write_varint",
    "write_varlong",
    "zigzag_bytes",
]

_MASK32 = 0xFFFFFFFF
_MASK64 = 0xFFFFFFFFFFFFFFFF

# Encoded bytes for every zig-zag value below 2**14 (all 1- and 2-byte varints): record lengths,
# key/value lengths and deltas of ordinary batches come straight from this table.
_TABLE_LIMIT = 1 << 14
_ZZ_BYTES: tuple[bytes, ...] = tuple(
    bytes((z,)) if z < 0x80 else bytes((0x80 | (z & 0x7F), z >> 7)) for z in range(_TABLE_LIMIT)
)


def _encode_unsigned(z: int) -> bytes:
    if z < _TABLE_LIMIT:
        return _ZZ_BYTES[z]
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def zigzag_bytes(z: int) -> bytes:
    """Encoding of an already zig-zagged (non-negative) value."""
    return _encode_unsigned(z)


def encode_varint(value: int) -> bytes:
    """Zig-zag varint of a 32-bit signed int."""
    if not -0x80000000 <= value <= 0x7FFFFFFF:
        raise InvalidRecordError(f"Value {value} does not fit a varint (32-bit)")
    return _encode_unsigned(((value << 1) ^ (value >> 31)) & _MASK32)


def encode_varlong(value: int) -> bytes:
    """Zig-zag varlong of a 64-bit signed long."""
    if not -0x8000000000000000 <= value <= 0x7FFFFFFFFFFFFFFF:
        raise InvalidRecordError(f"Value {value} does not fit a varlong (64-bit)")
    return _encode_unsigned(((value << 1) ^ (value >> 63)) & _MASK64)


def write_varint(out: bytearray, value: int) -> None:
    out += encode_varint(value)


def write_varlong(out: bytearray, value: int) -> None:
    out += encode_varlong(value)


def size_of_varint(value: int) -> int:
    z = ((value << 1) ^ (value >> 31)) & _MASK32
    return max(1, (z.bit_length() + 6) // 7)


def size_of_varlong(value: int) -> int:
    z = ((value << 1) ^ (value >> 63)) & _MASK64
    return max(1, (z.bit_length() + 6) // 7)


def decode_varint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Read a varint at ``pos``; returns (value, position after it)."""
    b = _byte(buf, pos)
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    result = b & 0x7F
    shift = 7
    pos += 1
    while True:
        b = _byte(buf, pos)
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
        if shift > 28:
            raise InvalidRecordError(f"Varint is too long (more than 5 bytes) at position {pos - 5}")
    result &= _MASK32
    return (result >> 1) ^ -(result & 1), pos


def decode_varlong(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Read a varlong at ``pos``; returns (value, position after it)."""
    b = _byte(buf, pos)
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    result = b & 0x7F
    shift = 7
    pos += 1
    while True:
        b = _byte(buf, pos)
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
        if shift > 63:
            raise InvalidRecordError(f"Varlong is too long (more than 10 bytes) at position {pos - 10}")
    result &= _MASK64
    return (result >> 1) ^ -(result & 1), pos


def _byte(buf: bytes | bytearray | memoryview, pos: int) -> int:
    try:
        return buf[pos]
    except IndexError:
        raise InvalidRecordError(f"Premature end of data reading a varint at position {pos}") from None
