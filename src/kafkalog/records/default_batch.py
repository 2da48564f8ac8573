"""Magic v2 record batches and records (spec §3.5-3.7): decoding and building.

Decoding works per batch: ``decode_columns`` turns the records area into parallel lists with one
tight loop. The loop runs in C (``_native.c``, loaded by ``native.py``) when the extension is built,
else in Python here (1- and 2-byte varints decoded inline; only longer ones call a helper); both
apply the same rules and say the same things, which the parity tests check. Structure
checks follow Kafka's ``DefaultRecord.readFrom``/``DefaultRecordBatch.RecordIterator``: every record
must consume exactly its declared length, the batch must hold exactly ``recordsCount`` records
("records still remaining") and running out of bytes is "premature EOF"; all of them raise
``InvalidRecordError``. A compressed records area that cannot be decompressed raises
``CorruptRecordError``.

Building helpers (``encode_record``, ``build_batch``) produce exactly Kafka's bytes; the builder
(``memory.MemoryRecordsBuilder``) inlines the record encoding in its hot ``append``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass

from crc32c import crc32c

from kafkalog.errors import CorruptRecordError, InvalidRecordError
from kafkalog.records import compression
from kafkalog.records.native import native as native  # validator reads default_batch.native
from kafkalog.records.types import (
    COMPRESSION_CODEC_MASK,
    CONTROL_FLAG_MASK,
    LOG_OVERHEAD,
    MAGIC_V2,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK,
    Header,
    RecordColumns,
    TimestampType,
    increment_sequence,
)
from kafkalog.records.varint import decode_varint, decode_varlong, zigzag_bytes

__all__ = [
    "NULL_VARINT",
    "VARINT_BYTES",
    "ZERO_VARINT",
    "RecordsSummary",
    "build_batch",
    "compute_attributes",
    "decode_columns",
    "batch_where",
    "check_record_count",
    "decode_records_area",
    "decode_records_area_native",
    "native_error",
    "records_area",
    "summarize_records",
    "summarize_records_area",
    "encode_headers",
    "encode_record",
    "largest_timestamp",
    "varlong_bytes",
]

BytesLike = bytes | bytearray | memoryview

_EMPTY_HEADERS: tuple[Header, ...] = ()
_MASK64 = 0xFFFFFFFFFFFFFFFF
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1
# Zig-zag decoding of every single-byte varint.
_ZZ1: tuple[int, ...] = tuple((b >> 1) ^ -(b & 1) for b in range(128))
# ... and of every 2-byte varint, indexed by ``first_byte << 7 | second_byte`` (first byte >= 0x80).
_ZZ2: tuple[int, ...] = tuple(
    0 if i < 1 << 14 else ((z := (i >> 7 & 0x7F) | (i & 0x7F) << 7) >> 1) ^ -(z & 1) for i in range(1 << 15)
)



def _read_headers(data: bytes, pos: int, end: int) -> tuple[tuple[Header, ...], int]:
    count, pos = decode_varint(data, pos)
    if count < 0:
        raise InvalidRecordError(f"Found invalid number of record headers {count}")
    if count > end - pos:
        raise InvalidRecordError(
            f"Found invalid number of record headers. {count} is larger than the remaining size of the buffer"
        )
    headers = []
    for _ in range(count):
        klen, pos = decode_varint(data, pos)
        if klen < 0:
            raise InvalidRecordError(f"Invalid negative header key size {klen}")
        # Java decodes header keys leniently (malformed UTF-8 becomes U+FFFD); so do we.
        hkey = data[pos : pos + klen].decode("utf-8", "replace")
        pos += klen
        vlen, pos = decode_varint(data, pos)
        if vlen >= 0:
            hvalue: bytes | None = data[pos : pos + vlen]
            pos += vlen
        else:
            hvalue = None
        headers.append(Header(hkey, hvalue))
    return tuple(headers), pos


def decode_records_area(
    data: bytes,
    pos: int,
    count: int,
    base_offset: int,
    base_timestamp: int,
    log_append_time: int | None,
    where: str,
) -> tuple[list[int], list[int], list[bytes | None], list[bytes | None], list[tuple[Header, ...]], list[int]]:
    """Decode ``count`` v2 records from ``data[pos:]``, which must end exactly after the last one.

    Returns (offsets, timestamps, keys, values, headers, offset_deltas). ``where`` names the batch
    in error messages.
    """
    # Per-record work is kept to the minimum: varints of 1 and 2 bytes are decoded by table lookup
    # inline, and offsets/timestamps are derived from the deltas after the loop with C-level calls.
    keys: list[bytes | None] = []
    values: list[bytes | None] = []
    ts_deltas: list[int] = []
    deltas: list[int] = []
    with_headers: dict[int, tuple[Header, ...]] = {}
    add_key = keys.append
    add_value = values.append
    add_ts = ts_deltas.append
    add_delta = deltas.append
    zz = _ZZ1
    zz2 = _ZZ2
    end = len(data)
    index = 0
    try:
        for index in range(count):
            b = data[pos]
            if b < 0x80:
                rec_end = pos + 1 + zz[b]
                pos += 2  # skip the attributes byte as well
            else:
                b2 = data[pos + 1]
                if b2 < 0x80:
                    rec_end = pos + 2 + zz2[b << 7 | b2]
                    pos += 3
                else:
                    length, pos = decode_varint(data, pos)
                    rec_end = pos + length
                    pos += 1
            # timestamp delta (varlong)
            b = data[pos]
            if b < 0x80:
                add_ts(zz[b])
                pos += 1
            else:
                b2 = data[pos + 1]
                if b2 < 0x80:
                    add_ts(zz2[b << 7 | b2])
                    pos += 2
                else:
                    ts_delta, pos = decode_varlong(data, pos)
                    add_ts(ts_delta)
            # offset delta
            b = data[pos]
            if b < 0x80:
                add_delta(zz[b])
                pos += 1
            else:
                b2 = data[pos + 1]
                if b2 < 0x80:
                    add_delta(zz2[b << 7 | b2])
                    pos += 2
                else:
                    offset_delta, pos = decode_varint(data, pos)
                    add_delta(offset_delta)
            # key
            b = data[pos]
            if b < 0x80:
                klen = zz[b]
                pos += 1
            else:
                b2 = data[pos + 1]
                if b2 < 0x80:
                    klen = zz2[b << 7 | b2]
                    pos += 2
                else:
                    klen, pos = decode_varint(data, pos)
            if klen >= 0:
                add_key(data[pos : pos + klen])
                pos += klen
            else:
                add_key(None)
            # value
            b = data[pos]
            if b < 0x80:
                vlen = zz[b]
                pos += 1
            else:
                b2 = data[pos + 1]
                if b2 < 0x80:
                    vlen = zz2[b << 7 | b2]
                    pos += 2
                else:
                    vlen, pos = decode_varint(data, pos)
            if vlen >= 0:
                add_value(data[pos : pos + vlen])
                pos += vlen
            else:
                add_value(None)
            # headers
            if data[pos]:
                with_headers[index], pos = _read_headers(data, pos, end)
            else:
                pos += 1
            if pos != rec_end:
                raise InvalidRecordError(
                    f"Invalid record size: the record ends at byte {pos} of the records data, but its "
                    f"length field says byte {rec_end}"
                )
    except IndexError:
        raise InvalidRecordError(
            f"Incorrect declared batch size, premature EOF reached ({where}, record {index}, "
            f"offset delta {deltas[-1] if deltas else 'n/a'} read last)"
        ) from None
    except InvalidRecordError as e:
        raise InvalidRecordError(f"{e} ({where}, record {index})") from None
    # Slices never fail, so a record running past the end is only visible here: pos never decreases.
    if pos > end:
        raise InvalidRecordError(
            f"Incorrect declared batch size, premature EOF reached ({where}: the records need {pos} bytes, "
            f"{end} present)"
        )
    if pos != end:
        raise InvalidRecordError(
            f"Incorrect declared batch size, records still remaining in file ({where}: {end - pos} bytes "
            f"after {count} records)"
        )
    n = len(deltas)
    if deltas == list(range(n)):
        offsets = list(range(base_offset, base_offset + n))
    else:
        offsets = list(map(base_offset.__add__, deltas))
    if log_append_time is not None:
        timestamps = [log_append_time] * n
    else:
        timestamps = list(map(base_timestamp.__add__, ts_deltas))
        if n and not _LONG_MIN <= min(timestamps) <= max(timestamps) <= _LONG_MAX:
            # Java's long addition wraps (so does the C walk)
            timestamps = [((t - _LONG_MIN) & _MASK64) + _LONG_MIN for t in timestamps]
    headers: list[tuple[Header, ...]] = [_EMPTY_HEADERS] * n
    for i, h in with_headers.items():
        headers[i] = h
    return offsets, timestamps, keys, values, headers, deltas


def native_error(e: ValueError, where: str) -> InvalidRecordError:
    """The C walker's ValueError(message, record_index) as the Python walk would have said it."""
    if len(e.args) != 2:
        raise e
    message, index = e.args
    if index < 0:
        return InvalidRecordError(message.replace("{where}", where))
    return InvalidRecordError(f"{message} ({where}, record {index})")


def decode_records_area_native(
    data: BytesLike,
    pos: int,
    count: int,
    base_offset: int,
    base_timestamp: int,
    log_append_time: int | None,
    where: str,
) -> tuple[list[int], list[int], list[bytes | None], list[bytes | None], list[tuple[Header, ...]], list[int]]:
    """``decode_records_area`` in C: the same result, no copy of ``data`` needed."""
    assert native is not None
    try:
        offsets, timestamps, keys, values, with_headers, deltas = native.decode_v2(
            data, pos, count, base_offset, base_timestamp, log_append_time)
    except ValueError as e:
        raise native_error(e, where) from None
    headers: list[tuple[Header, ...]] = [_EMPTY_HEADERS] * len(offsets)
    for i, pairs in with_headers:
        headers[i] = tuple([Header(k, v) for k, v in pairs])
    return offsets, timestamps, keys, values, headers, deltas


@dataclass(frozen=True, slots=True)
class RecordsSummary:
    """What LogValidator needs to know of a v2 batch's records, decided without decoding them.

    ``min_timestamp``/``max_timestamp`` ignore records whose timestamp is -1 (both are -1 when no
    record has one); ``has_no_timestamp`` says whether some record's is -1; ``sequential_offsets``
    whether the offset deltas are exactly 0, 1, ..., count - 1.
    """

    count: int
    min_timestamp: int
    max_timestamp: int
    has_no_timestamp: bool
    has_null_key: bool
    sequential_offsets: bool

    @property
    def largest_timestamp(self) -> int:
        """The largest record timestamp, -1 included (what max() over every record gives)."""
        return largest_timestamp(self.max_timestamp, self.has_no_timestamp)


def largest_timestamp(max_timestamp: int, has_no_timestamp: bool) -> int:
    """``RecordsSummary.largest_timestamp`` from its two fields (for callers holding them bare)."""
    return max(max_timestamp, NO_TIMESTAMP) if has_no_timestamp else max_timestamp


def summarize_records_area(
    data: BytesLike, pos: int, count: int, base_timestamp: int, where: str
) -> RecordsSummary:
    """Walk and check ``count`` records of ``data[pos:]`` (the rules of ``decode_records_area``),
    keeping only a summary: no object per record with the C walker."""
    if native is not None:
        try:
            lo, hi, no_ts, null_key, sequential = native.summarize_v2(data, pos, count, base_timestamp)
        except ValueError as e:
            raise native_error(e, where) from None
        return RecordsSummary(count, lo, hi, no_ts, null_key, sequential)
    _, timestamps, keys, _, _, deltas = decode_records_area(
        bytes(data), pos, count, 0, base_timestamp, None, where)
    stamps = [t for t in timestamps if t != NO_TIMESTAMP]
    return RecordsSummary(
        count,
        min(stamps, default=NO_TIMESTAMP),
        max(stamps, default=NO_TIMESTAMP),
        len(stamps) != len(timestamps),
        None in keys,
        deltas == list(range(len(deltas))),
    )


def records_area(entry: memoryview, attributes: int, where: str) -> tuple[BytesLike, int]:
    """(buffer, position) of a v2 batch's records: in place, or decompressed. ``where`` (see
    ``batch_where``) names the batch in a decompression error."""
    codec = attributes & COMPRESSION_CODEC_MASK
    if codec == 0:
        return entry, RECORD_BATCH_OVERHEAD
    try:
        return compression.decompress(codec, entry[RECORD_BATCH_OVERHEAD:], MAGIC_V2), 0
    except CorruptRecordError as e:
        raise type(e)(f"{e} ({where})") from None


def batch_where(position: int, base_offset: int) -> str:
    """How decode errors name a v2 batch."""
    return f"batch at position {position}, base offset {base_offset}"


def check_record_count(count: int, where: str) -> None:
    if count < 0:
        raise InvalidRecordError(f"Found invalid record count {count} in magic v2 batch ({where})")


def summarize_records(
    entry: memoryview, position: int, *, base_offset: int, attributes: int, base_timestamp: int, count: int
) -> RecordsSummary:
    """``summarize_records_area`` of the v2 batch whose bytes are ``entry`` (decompressed if needed)."""
    where = batch_where(position, base_offset)
    check_record_count(count, where)
    if count == 0:
        return RecordsSummary(0, NO_TIMESTAMP, NO_TIMESTAMP, False, False, True)
    data, start = records_area(entry, attributes, where)
    return summarize_records_area(data, start, count, base_timestamp, where)


def decode_columns(
    entry: memoryview,
    position: int,
    *,
    base_offset: int,
    attributes: int,
    base_timestamp: int,
    max_timestamp: int,
    base_sequence: int,
    count: int,
) -> RecordColumns:
    """Decode (and decompress if needed) every record of the v2 batch whose bytes are ``entry``."""
    where = batch_where(position, base_offset)
    ts_type = TimestampType.LOG_APPEND_TIME if attributes & TIMESTAMP_TYPE_MASK else TimestampType.CREATE_TIME
    check_record_count(count, where)
    if count == 0:
        return RecordColumns([], [], ts_type, [], [], [], [], [])
    data, start = records_area(entry, attributes, where)
    log_append_time = max_timestamp if ts_type is TimestampType.LOG_APPEND_TIME else None
    if native is not None:
        offsets, timestamps, keys, values, headers, deltas = decode_records_area_native(
            data, start, count, base_offset, base_timestamp, log_append_time, where
        )
    else:
        # The Python walk slices keys and values out of the data: they must be bytes.
        offsets, timestamps, keys, values, headers, deltas = decode_records_area(
            bytes(data), start, count, base_offset, base_timestamp, log_append_time, where
        )
    if base_sequence >= 0:
        sequences = [increment_sequence(base_sequence, d) for d in deltas]
    else:
        sequences = [NO_SEQUENCE] * len(offsets)
    return RecordColumns(offsets, timestamps, ts_type, keys, values, headers, sequences, [])


# --- building --------------------------------------------------------------------------------------


def compute_attributes(
    compression_type: int,
    timestamp_type: TimestampType,
    is_transactional: bool,
    is_control: bool,
) -> int:
    if timestamp_type is TimestampType.NO_TIMESTAMP_TYPE:
        raise InvalidRecordError("Timestamp type must be provided to compute v2 batch attributes")
    attrs = compression_type & COMPRESSION_CODEC_MASK
    if timestamp_type is TimestampType.LOG_APPEND_TIME:
        attrs |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attrs |= TRANSACTIONAL_FLAG_MASK
    if is_control:
        attrs |= CONTROL_FLAG_MASK
    return attrs


_HEADER_PREFIX = struct.Struct(">qiibI")  # baseOffset, length, epoch, magic, crc
_HEADER_TAIL = struct.Struct(">hiqqqhii")  # attributes .. recordsCount: the CRC-covered header part


def build_batch(
    records: bytes,
    *,
    base_offset: int,
    last_offset_delta: int,
    attributes: int,
    base_timestamp: int,
    max_timestamp: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    partition_leader_epoch: int,
    count: int,
) -> bytes:
    """A complete v2 batch: header (with CRC-32C over attributes..end) followed by ``records``
    (the records area as stored, i.e. already compressed if the codec says so)."""
    tail = _HEADER_TAIL.pack(
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    )
    crc = crc32c(records, crc32c(tail))
    length = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD + len(records)
    prefix = _HEADER_PREFIX.pack(base_offset, length, partition_leader_epoch, MAGIC_V2, crc)
    return b"".join((prefix, tail, records))


NULL_VARINT = b"\x01"  # varint -1: a null key, value or header value
ZERO_VARINT = b"\x00"
# Encoded varint for every zig-zag value below 2**14: VARINT_BYTES[n << 1] encodes n >= 0 (< 8192).
VARINT_BYTES: tuple[bytes, ...] = tuple(zigzag_bytes(z) for z in range(1 << 14))


def varlong_bytes(n: int) -> bytes:
    """Zig-zag varlong encoding of ``n`` (table lookup for the common small values). ``n`` is taken
    as a Java long: a difference of two timestamps that overflows wraps, as it does in Kafka."""
    if not _LONG_MIN <= n <= _LONG_MAX:
        n = ((n - _LONG_MIN) & _MASK64) + _LONG_MIN
    z = ((n << 1) ^ (n >> 63)) & _MASK64
    if z < 16384:
        return VARINT_BYTES[z]
    return zigzag_bytes(z)


def encode_headers(headers: Iterable[Header | tuple[str, bytes | None]]) -> bytes:
    """The headers part of a v2 record: count varint, then key/value pairs."""
    items = list(headers)
    out = [varlong_bytes(len(items))]
    for h in items:
        hkey, hvalue = (h.key, h.value) if isinstance(h, Header) else h
        if hkey is None:
            raise InvalidRecordError("Invalid null header key found in headers")
        kb = hkey.encode("utf-8")
        out.append(varlong_bytes(len(kb)))
        out.append(kb)
        if hvalue is None:
            out.append(NULL_VARINT)
        else:
            out.append(varlong_bytes(len(hvalue)))
            out.append(bytes(hvalue))
    return b"".join(out)


def encode_record(
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Iterable[Header] = (),
) -> bytes:
    """One v2 record (length varint included). The builder inlines the same encoding."""
    body = b"".join(
        (
            ZERO_VARINT,
            varlong_bytes(timestamp_delta),
            varlong_bytes(offset_delta),
            NULL_VARINT if key is None else varlong_bytes(len(key)),
            b"" if key is None else bytes(key),
            NULL_VARINT if value is None else varlong_bytes(len(value)),
            b"" if value is None else bytes(value),
            encode_headers(headers),
        )
    )
    return varlong_bytes(len(body)) + body
