"""Legacy messages, magic v0 and v1, and their compressed wrappers (spec §3.1-3.3).

A legacy log entry is one message. If its codec is not none, its value is a compressed *inner*
message set (complete entries, uncompressed). Reading follows Kafka's ``AbstractLegacyRecordBatch``
deep iterator:

* v0 inner offsets are absolute; v1 inner offsets are relative and become
  ``wrapper offset - last inner offset + inner offset`` (a wrapper offset of 0 is tolerated and
  means base 0; a non-zero wrapper offset below the last inner offset is invalid);
* with a LogAppendTime v1 wrapper every inner message reports the wrapper's timestamp; inner v1
  messages report the wrapper's timestamp type;
* an empty inner set, a null wrapper value, a compressed inner message or a zstd wrapper is an
  ``InvalidRecordError``; an inner size below 14 is a ``CorruptRecordError``; a truncated last inner
  entry ends the inner set silently (as Kafka's stream reader does).

Building follows ``MemoryRecordsBuilder`` for magic 0/1: the wrapper offset is the last offset,
v1 inner offsets are relative, v0 inner offsets absolute, the wrapper timestamp is the max inner
timestamp (CreateTime) or the log append time.
"""

from __future__ import annotations

import struct
import zlib

from kafkalog.errors import CorruptRecordError, InvalidRecordError
from kafkalog.records import compression
from kafkalog.records.types import (
    COMPRESSION_CODEC_MASK,
    LOG_OVERHEAD,
    MAGIC_V0,
    MAGIC_V1,
    MIN_RECORD_SIZE,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_MASK,
    CompressionType,
    Header,
    RecordColumns,
    TimestampType,
    legacy_record_overhead,
)

__all__ = ["LegacyBatchBuilder", "LegacyMessage", "decode_entry", "entry_messages", "encode_message"]

_PREFIX = struct.Struct(">qi")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_CRC = struct.Struct(">I")
_HEADER_V0 = struct.Struct(">bb")  # magic, attributes
_HEADER_V1 = struct.Struct(">bbq")  # magic, attributes, timestamp
_EMPTY_HEADERS: tuple[Header, ...] = ()


class LegacyMessage:
    """One legacy message as stored: its absolute offset (as reported by deep iteration), own
    magic, attributes, timestamp field and CRC, and the message bytes (CRC .. end of value)."""

    __slots__ = ("attributes", "crc", "key", "magic", "message", "offset", "timestamp", "value")

    def __init__(
        self,
        offset: int,
        magic: int,
        attributes: int,
        timestamp: int,
        crc: int,
        key: bytes | None,
        value: bytes | None,
        message: memoryview,
    ) -> None:
        self.offset = offset
        self.magic = magic
        self.attributes = attributes
        self.timestamp = timestamp
        self.crc = crc
        self.key = key
        self.value = value
        self.message = message

    @property
    def compression_type(self) -> CompressionType:
        return CompressionType.for_id(self.attributes & COMPRESSION_CODEC_MASK)

    @property
    def is_compressed(self) -> bool:
        return self.attributes & COMPRESSION_CODEC_MASK != 0

    @property
    def timestamp_type(self) -> TimestampType:
        """The type from this message's own attributes (v0: NoTimestampType)."""
        if self.magic == MAGIC_V0:
            return TimestampType.NO_TIMESTAMP_TYPE
        if self.attributes & TIMESTAMP_TYPE_MASK:
            return TimestampType.LOG_APPEND_TIME
        return TimestampType.CREATE_TIME

    @property
    def size_in_bytes(self) -> int:
        """Message size without the log overhead (the entry's ``size`` field)."""
        return len(self.message)

    def compute_checksum(self) -> int:
        return zlib.crc32(self.message[4:])

    def is_valid(self) -> bool:
        return len(self.message) >= MIN_RECORD_SIZE and self.compute_checksum() == self.crc

    def ensure_valid(self) -> None:
        if len(self.message) < MIN_RECORD_SIZE:
            raise CorruptRecordError(
                f"Message at offset {self.offset} is shorter than {MIN_RECORD_SIZE} bytes"
            )
        computed = self.compute_checksum()
        if computed != self.crc:
            raise CorruptRecordError(
                f"Record at offset {self.offset} is corrupt "
                f"(stored crc = {self.crc}, computed crc = {computed})"
            )

    def __repr__(self) -> str:
        return (
            f"LegacyMessage(offset={self.offset}, magic={self.magic}, attributes={self.attributes}, "
            f"timestamp={self.timestamp}, crc={self.crc})"
        )


def _parse_message(view: memoryview, start: int, size: int, offset: int, where: str) -> LegacyMessage:
    """Parse the message occupying ``view[start:start+size]`` (CRC .. end, no log overhead)."""
    end = start + size
    magic = view[start + 4]
    if magic > 127:
        magic -= 256
    if magic not in (MAGIC_V0, MAGIC_V1):
        raise InvalidRecordError(f"Invalid magic {magic} in legacy message at offset {offset} ({where})")
    if size < legacy_record_overhead(magic):
        raise CorruptRecordError(
            f"Message at offset {offset} ({where}) has size {size}, less than the v{magic} overhead "
            f"{legacy_record_overhead(magic)}"
        )
    (crc,) = _CRC.unpack_from(view, start)
    if magic == MAGIC_V0:
        _, attributes = _HEADER_V0.unpack_from(view, start + 4)
        timestamp = NO_TIMESTAMP
        pos = start + 6
    else:
        _, attributes, timestamp = _HEADER_V1.unpack_from(view, start + 4)
        pos = start + 14
    (klen,) = _I32.unpack_from(view, pos)
    pos += 4
    key: bytes | None = None
    if klen >= 0:
        if klen > end - pos - 4:
            raise CorruptRecordError(
                f"Key size {klen} of message at offset {offset} ({where}) exceeds the message"
            )
        key = bytes(view[pos : pos + klen])
        pos += klen
    (vlen,) = _I32.unpack_from(view, pos)
    pos += 4
    value: bytes | None = None
    if vlen >= 0:
        if vlen > end - pos:
            raise CorruptRecordError(
                f"Value size {vlen} of message at offset {offset} ({where}) exceeds the message"
            )
        value = bytes(view[pos : pos + vlen])
    return LegacyMessage(offset, magic, attributes, timestamp, crc, key, value, view[start:end])


def _wrapper_and_inner(entry: memoryview, position: int) -> tuple[LegacyMessage, list[LegacyMessage]]:
    """Parse the entry's message and, if it is a compressed wrapper, its inner messages with
    absolute offsets (Kafka's DeepRecordsIterator rules). For an uncompressed message the inner list
    is ``[message]``."""
    offset, size = _PREFIX.unpack_from(entry, 0)
    where = f"entry at position {position}"
    wrapper = _parse_message(entry, LOG_OVERHEAD, size, offset, where)
    codec = wrapper.attributes & COMPRESSION_CODEC_MASK
    if codec == 0:
        return wrapper, [wrapper]
    ctype = CompressionType.for_id(codec)
    wrapper_magic = wrapper.magic
    if ctype is CompressionType.ZSTD:
        raise InvalidRecordError(
            f"Invalid wrapper compressionType zstd found in legacy deep record iterator (magic "
            f"{wrapper_magic}, {where})"
        )
    if wrapper.value is None:
        raise InvalidRecordError(
            f"Found invalid compressed record set with null value (magic = {wrapper_magic}, {where})"
        )
    try:
        data = memoryview(compression.decompress(codec, wrapper.value, wrapper_magic))
    except CorruptRecordError as e:
        raise type(e)(f"{e} (compressed wrapper with offset {offset}, {where})") from None
    inner: list[LegacyMessage] = []
    pos = 0
    end = len(data)
    inner_where = f"inside the wrapper at position {position}"
    while end - pos >= LOG_OVERHEAD:
        inner_offset, inner_size = _PREFIX.unpack_from(data, pos)
        if inner_size < MIN_RECORD_SIZE:
            raise CorruptRecordError(
                f"Record size {inner_size} is less than the minimum record overhead ({MIN_RECORD_SIZE}) "
                f"({inner_where}, inner byte {pos})"
            )
        if inner_size > end - pos - LOG_OVERHEAD:
            break  # a truncated inner entry ends the set, as in Kafka's DataLogInputStream
        inner.append(_parse_message(data, pos + LOG_OVERHEAD, inner_size, inner_offset, inner_where))
        pos += LOG_OVERHEAD + inner_size
    if not inner:
        raise InvalidRecordError(f"Found invalid compressed record set with no inner records ({where})")
    if wrapper_magic == MAGIC_V1:
        if offset == 0:
            # Some librdkafka versions send wrapper offset 0; Kafka then takes base 0.
            base = 0
        else:
            last_inner = inner[-1].offset
            if offset < last_inner:
                raise InvalidRecordError(
                    f"Found invalid wrapper offset in compressed v1 message set, wrapper offset "
                    f"'{offset}' is less than the last inner message offset '{last_inner}' and it is not "
                    f"zero ({where})"
                )
            base = offset - last_inner
        for m in inner:
            m.offset = base + m.offset
    for m in inner:
        if m.attributes & COMPRESSION_CODEC_MASK:
            raise InvalidRecordError(
                f"Inner messages must not be compressed (inner offset {m.offset}, {where})"
            )
    return wrapper, inner


def entry_messages(entry: memoryview, position: int = 0) -> list[LegacyMessage]:
    """The messages of one legacy entry as stored (for validation): the message itself, or the
    inner messages of a compressed wrapper with absolute offsets."""
    return _wrapper_and_inner(entry, position)[1]


def decode_entry(entry: memoryview, position: int = 0) -> RecordColumns:
    """Deep-decode one legacy entry into columns, with the timestamps Kafka reports."""
    wrapper, inner = _wrapper_and_inner(entry, position)
    n = len(inner)
    if inner[0] is wrapper:
        ts_type = wrapper.timestamp_type
        return RecordColumns(
            [wrapper.offset], [wrapper.timestamp], ts_type, [wrapper.key], [wrapper.value],
            [_EMPTY_HEADERS], [NO_SEQUENCE], [wrapper.crc],
        )
    wrapper_type = wrapper.timestamp_type
    log_append = wrapper_type is TimestampType.LOG_APPEND_TIME
    timestamps: list[int] = []
    types: list[TimestampType] = []
    for m in inner:
        if m.magic == MAGIC_V0:
            timestamps.append(NO_TIMESTAMP)
            types.append(TimestampType.NO_TIMESTAMP_TYPE)
        else:
            timestamps.append(wrapper.timestamp if log_append else m.timestamp)
            types.append(wrapper_type)
    uniform = all(t is types[0] for t in types)
    return RecordColumns(
        [m.offset for m in inner],
        timestamps,
        types[0],
        [m.key for m in inner],
        [m.value for m in inner],
        [_EMPTY_HEADERS] * n,
        [NO_SEQUENCE] * n,
        [m.crc for m in inner],
        None if uniform else types,
    )


# --- building --------------------------------------------------------------------------------------


def encode_message(
    magic: int,
    offset: int,
    timestamp: int,
    key: bytes | None,
    value: bytes | None,
    attributes: int,
) -> tuple[bytes, int]:
    """One complete legacy entry (log overhead + message); returns (bytes, crc)."""
    parts: list[bytes] = []
    if magic == MAGIC_V0:
        parts.append(_HEADER_V0.pack(MAGIC_V0, attributes))
    else:
        parts.append(_HEADER_V1.pack(MAGIC_V1, attributes, timestamp))
    if key is None:
        parts.append(b"\xff\xff\xff\xff")
    else:
        parts.append(_I32.pack(len(key)))
        parts.append(bytes(key))
    if value is None:
        parts.append(b"\xff\xff\xff\xff")
    else:
        parts.append(_I32.pack(len(value)))
        parts.append(bytes(value))
    body = b"".join(parts)
    crc = zlib.crc32(body)
    return b"".join((_PREFIX.pack(offset, 4 + len(body)), _CRC.pack(crc), body)), crc


class LegacyBatchBuilder:
    """Builds what Kafka's ``MemoryRecordsBuilder`` builds for magic 0/1: one entry per record when
    uncompressed, one compressed wrapper otherwise."""

    __slots__ = (
        "_base_offset",
        "_compression",
        "_entries",
        "_last_offset",
        "_level",
        "_log_append_time",
        "_magic",
        "_max_ts",
        "_offset_of_max_ts",
        "_size",
        "_timestamp_type",
    )

    def __init__(
        self,
        magic: int,
        compression_type: int,
        timestamp_type: TimestampType,
        base_offset: int,
        log_append_time: int = NO_TIMESTAMP,
        compression_level: int | None = None,
    ) -> None:
        if magic not in (MAGIC_V0, MAGIC_V1):
            raise InvalidRecordError(f"Legacy builder needs magic 0 or 1, not {magic}")
        self._magic = magic
        self._compression = compression_type
        self._timestamp_type = timestamp_type
        self._base_offset = base_offset
        self._log_append_time = log_append_time
        self._level = compression_level
        self._entries: list[bytes] = []
        self._last_offset: int | None = None
        self._max_ts = NO_TIMESTAMP
        self._offset_of_max_ts = -1
        self._size = 0

    @property
    def count(self) -> int:
        return len(self._entries)

    @property
    def max_timestamp(self) -> int:
        return self._max_ts

    @property
    def offset_of_max_timestamp(self) -> int:
        return self._offset_of_max_ts

    @property
    def uncompressed_records_size(self) -> int:
        return self._size

    def _attributes(self, codec: int) -> int:
        attrs = codec & COMPRESSION_CODEC_MASK
        if self._magic > MAGIC_V0 and self._timestamp_type is TimestampType.LOG_APPEND_TIME:
            attrs |= TIMESTAMP_TYPE_MASK
        return attrs

    def append(self, offset: int, timestamp: int, key: bytes | None, value: bytes | None) -> int:
        """Encode one message; returns its CRC (what Kafka's ``appendWithOffset`` returns)."""
        if self._timestamp_type is TimestampType.LOG_APPEND_TIME:
            timestamp = self._log_append_time
        compressed = self._compression != CompressionType.NONE
        inner_offset = offset - self._base_offset if compressed and self._magic > MAGIC_V0 else offset
        entry, crc = encode_message(self._magic, inner_offset, timestamp, key, value, self._attributes(0))
        self._entries.append(entry)
        self._size += len(entry)
        self._last_offset = offset
        if self._magic > MAGIC_V0 and timestamp > self._max_ts:
            self._max_ts = timestamp
            self._offset_of_max_ts = offset
        return crc

    def build(self, last_offset: int | None = None) -> bytes:
        if not self._entries:
            raise InvalidRecordError("Cannot build a legacy message set without records")
        if self._compression == CompressionType.NONE:
            return b"".join(self._entries)
        last = self._last_offset if last_offset is None else last_offset
        assert last is not None
        inner = b"".join(self._entries)
        value = compression.compress(self._compression, inner, self._magic, self._level)
        ts = self._log_append_time if self._timestamp_type is TimestampType.LOG_APPEND_TIME else self._max_ts
        return encode_message(self._magic, last, ts, None, value, self._attributes(self._compression))[0]
