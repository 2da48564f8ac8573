"""Kafka's compression codecs, byte-compatible with the Java client (spec §3.8).

* gzip: a gzip member like ``java.util.zip.GZIPOutputStream`` writes (mtime 0, OS byte 0xff);
  reading accepts any gzip stream, including several concatenated members.
* snappy: written with xerial framing (what the Java client and kafka-python write); read with or
  without it (librdkafka writes raw snappy).
* lz4: Kafka's LZ4 frame (FLG 0x60, BD 0x40, independent 64 KiB blocks, no checksums) built on
  cramjam's block functions. For magic 0 the header checksum is Kafka 0.8's broken one (computed
  over the frame magic too) and is not checked on read. Readers accept other writers' flags
  (content size, content checksum, block checksums, other block sizes, linked blocks).
* zstd: a standard zstd frame; only with magic 2.

Compressed bytes are not reproducible across implementations; only the decompressed payload is.
Every failure to decompress is a ``CorruptRecordError``; a codec id that is unknown, or zstd below
magic 2, is an ``UnsupportedCompressionTypeError``.
"""

from __future__ import annotations

import struct
import threading
import zlib
from collections.abc import Callable
from typing import Any

import cramjam
import xxhash
import zstandard

from kafkalog.errors import CorruptRecordError, DecompressionError, UnsupportedCompressionTypeError
from kafkalog.records.types import MAGIC_V0, MAGIC_V2, CompressionType

__all__ = ["MAX_DECOMPRESSED_BYTES", "compress", "decompress"]

BytesLike = bytes | bytearray | memoryview

# A records area that decompresses to more than this is refused rather than materialised: every
# codec can expand a few bytes into megabytes (64 MiB of zeros is a 2 KiB zstd frame, ~3 MiB of
# snappy), so a forged or damaged 1 MiB batch could otherwise ask for tens of gigabytes. No Kafka
# batch comes near it (max.message.bytes limits the compressed size, 1 MiB by default). Bounded as
# it is produced, for every codec and framing: memory never exceeds the limit by more than one
# block of the codec (gzip: nothing; snappy: nothing, the declared length is checked first; lz4:
# one block; zstd: one 128 KiB block). Read at each call, so tests can lower it.
MAX_DECOMPRESSED_BYTES = 1 << 30


def _too_big(codec: str) -> CorruptRecordError:
    return CorruptRecordError(
        f"{codec} data decompresses to more than {MAX_DECOMPRESSED_BYTES} bytes: refused (a damaged or "
        "forged batch; no Kafka batch comes near this)"
    )


# --- gzip --------------------------------------------------------------------------------------

# GZIPOutputStream's fixed header: magic, CM=deflate, no flags, MTIME 0, XFL 0, OS 0xff (JDK >= 16).
_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
_GZIP_TRAILER = struct.Struct("<II")


def _gzip_compress(data: BytesLike, level: int | None) -> bytes:
    if level is None or level == -1:
        level = 6  # Deflater.DEFAULT_COMPRESSION is zlib's 6
    if not 1 <= level <= 9:
        raise UnsupportedCompressionTypeError(f"gzip compression level {level} is not in 1..9 or -1")
    deflater = zlib.compressobj(level, zlib.DEFLATED, -15)
    body = deflater.compress(data) + deflater.flush()
    return b"".join(
        (_GZIP_HEADER, body, _GZIP_TRAILER.pack(zlib.crc32(data) & 0xFFFFFFFF, len(data) & 0xFFFFFFFF))
    )


def _gzip_decompress(data: BytesLike) -> bytes:
    out: list[bytes] = []
    rest = bytes(data)
    room = MAX_DECOMPRESSED_BYTES
    try:
        while True:
            # wbits 31 = gzip wrapper, header and CRC/ISIZE trailer checked by zlib. One byte more
            # than the room is asked for (a max_length of 0 would mean "no limit"): getting it, or
            # leaving input unconsumed, means the data goes beyond the limit.
            inflater = zlib.decompressobj(31)
            out.append(inflater.decompress(rest, room + 1))
            room -= len(out[-1])
            if room < 0 or inflater.unconsumed_tail:
                raise _too_big("gzip")
            if not inflater.eof:
                raise CorruptRecordError("Truncated gzip stream (no end of deflate data)")
            rest = inflater.unused_data
            # Java's GZIPInputStream reads further members; trailing zero padding ends the stream.
            if len(rest) < 10 or rest[:2] != b"\x1f\x8b":
                break
    except zlib.error as e:
        raise CorruptRecordError(f"Invalid gzip data: {e}") from None
    return out[0] if len(out) == 1 else b"".join(out)


# --- snappy ------------------------------------------------------------------------------------

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK_SIZE = 32 * 1024  # SnappyOutputStream's default block size
_I32 = struct.Struct(">i")
# A snappy element expands at most ~21x (a 3-byte copy of 64 bytes); a block claiming more is forged,
# and must be rejected before the decompressor allocates the claimed size.
_SNAPPY_MAX_RATIO = 22


def _snappy_compress(data: BytesLike) -> bytes:
    view = memoryview(data)
    parts = [_XERIAL_HEADER]
    compress_raw = cramjam.snappy.compress_raw
    for start in range(0, len(view), _XERIAL_BLOCK_SIZE):
        block = bytes(compress_raw(view[start : start + _XERIAL_BLOCK_SIZE]))
        parts.append(_I32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_raw_decompress(block: BytesLike, room: int) -> bytes:
    """One raw snappy block, refused before anything is allocated if its preamble declares more
    than ``room`` bytes (the decompressor allocates exactly the declared length and fails if the
    data does not fill it)."""
    # The raw format starts with the uncompressed length as an unsigned LEB128 varint (<= 32 bits).
    declared = 0
    shift = 0
    for i in range(5):
        if i >= len(block):
            raise CorruptRecordError("Truncated snappy block header")
        b = block[i]
        declared |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
    else:
        raise CorruptRecordError("Invalid snappy block header (length varint too long)")
    if declared > _SNAPPY_MAX_RATIO * len(block) + 64:
        raise CorruptRecordError(
            f"Snappy block of {len(block)} bytes claims {declared} uncompressed bytes, which is impossible"
        )
    if declared > room:
        raise _too_big("snappy")
    try:
        return bytes(cramjam.snappy.decompress_raw(block))
    except cramjam.DecompressionError as e:
        raise CorruptRecordError(f"Invalid snappy data: {e}") from None


def _snappy_decompress(data: BytesLike) -> bytes:
    view = memoryview(data)
    room = MAX_DECOMPRESSED_BYTES
    if bytes(view[:8]) != _XERIAL_MAGIC:
        return _snappy_raw_decompress(view, room)
    if len(view) < 16:
        raise CorruptRecordError("Truncated xerial snappy header")
    out: list[bytes] = []
    pos = 16
    end = len(view)
    while pos < end:
        if end - pos < 4:
            raise CorruptRecordError(f"Truncated xerial snappy block length at byte {pos}")
        (length,) = _I32.unpack_from(view, pos)
        pos += 4
        if length < 0 or length > end - pos:
            raise CorruptRecordError(
                f"Xerial snappy block at byte {pos - 4} claims {length} bytes, {end - pos} remain"
            )
        out.append(_snappy_raw_decompress(view[pos : pos + length], room))
        room -= len(out[-1])
        pos += length
    return out[0] if len(out) == 1 else b"".join(out)


# --- lz4 ---------------------------------------------------------------------------------------

_LZ4_MAGIC = b"\x04\x22\x4d\x18"
_LZ4_FLG = 0x60  # version 01, independent blocks, no checksums, no content size
_LZ4_BD = 0x40  # 64 KiB max block size
_LZ4_BLOCK_SIZE = 64 * 1024
_LZ4_UNCOMPRESSED = 0x80000000
_U32LE = struct.Struct("<I")
_LZ4_BLOCK_SIZES = {4: 64 * 1024, 5: 256 * 1024, 6: 1024 * 1024, 7: 4 * 1024 * 1024}
_lz4_local = threading.local()
_LZ4_WINDOW = 64 * 1024  # how far back an lz4 match can reach
_LZ4_LINKED_FLG = 0x40  # version 01, linked blocks, no checksums, no content size


def _lz4_header_checksum(descriptor: bytes) -> int:
    return (xxhash.xxh32_intdigest(descriptor, 0) >> 8) & 0xFF


def _lz4_compress(data: BytesLike, magic: int, level: int | None) -> bytes:
    flg_bd = bytes((_LZ4_FLG, _LZ4_BD))
    # Kafka 0.8 computed the checksum over the frame magic as well; magic-0 readers expect that.
    hc = _lz4_header_checksum(_LZ4_MAGIC + flg_bd if magic == MAGIC_V0 else flg_bd)
    parts = [_LZ4_MAGIC, flg_bd, bytes((hc,))]
    if level is None:
        kwargs: dict[str, Any] = {}
    else:
        if not 1 <= level <= 17:
            raise UnsupportedCompressionTypeError(f"lz4 compression level {level} is not in 1..17")
        kwargs = {"mode": "high_compression", "compression": level}
    compress_block = cramjam.lz4.compress_block
    view = memoryview(data)
    for start in range(0, len(view), _LZ4_BLOCK_SIZE):
        chunk = view[start : start + _LZ4_BLOCK_SIZE]
        block = bytes(compress_block(chunk, store_size=False, **kwargs))
        if len(block) >= len(chunk):
            # Incompressible: store as is and flag it with the high bit, like KafkaLZ4BlockOutputStream.
            parts.append(_U32LE.pack(len(chunk) | _LZ4_UNCOMPRESSED))
            parts.append(bytes(chunk))
        else:
            parts.append(_U32LE.pack(len(block)))
            parts.append(block)
    parts.append(b"\x00\x00\x00\x00")  # end mark
    return b"".join(parts)


def _lz4_linked_block(window: bytes, block: BytesLike, bd: int, at: int) -> bytes:
    """Decode one block of a linked-block frame, whose matches may reach into ``window`` (the
    previous output). cramjam has no block decoder with a dictionary, so the block is decoded as
    the second block of a small frame whose first block is the window, stored uncompressed: the
    frame decoder then produces at most the window and one block, never more."""
    flg_bd = bytes((_LZ4_LINKED_FLG, bd))
    frame = b"".join((
        _LZ4_MAGIC, flg_bd, bytes((_lz4_header_checksum(flg_bd),)),
        _U32LE.pack(len(window) | _LZ4_UNCOMPRESSED), window,
        _U32LE.pack(len(block)), block,
        b"\x00\x00\x00\x00",
    ))
    try:
        return bytes(memoryview(cramjam.lz4.decompress(frame))[len(window):])
    except cramjam.DecompressionError as e:
        raise CorruptRecordError(f"Invalid lz4 block at byte {at}: {e}") from None


def _lz4_decompress(data: BytesLike, magic: int) -> bytes:
    view = memoryview(data)
    end = len(view)
    if end < 7 or bytes(view[:4]) != _LZ4_MAGIC:
        raise CorruptRecordError("Invalid lz4 frame: bad magic")
    flg = view[4]
    bd = view[5]
    if flg >> 6 != 1:
        raise CorruptRecordError(f"Unsupported lz4 frame version in FLG {flg:#04x}")
    if flg & 0x02 or bd & 0x8F:
        raise CorruptRecordError(f"Reserved bits set in lz4 frame descriptor (FLG {flg:#04x}, BD {bd:#04x})")
    if flg & 0x01:
        raise CorruptRecordError("lz4 frames with a dictionary id are not supported")
    block_max = _LZ4_BLOCK_SIZES.get((bd >> 4) & 0x07)
    if block_max is None:
        raise CorruptRecordError(f"Unsupported lz4 block size in BD {bd:#04x}")
    independent = bool(flg & 0x20)
    block_checksum = bool(flg & 0x10)
    has_content_size = bool(flg & 0x08)
    content_checksum = bool(flg & 0x04)
    pos = 6 + (8 if has_content_size else 0)
    if end < pos + 1:
        raise CorruptRecordError("Truncated lz4 frame header")
    if magic != MAGIC_V0:
        expected = _lz4_header_checksum(bytes(view[4:pos]))
        if view[pos] != expected:
            raise CorruptRecordError(
                f"lz4 frame header checksum mismatch (stored {view[pos]:#04x}, computed {expected:#04x})"
            )
    pos += 1
    out: list[bytes] = []
    # One zero-filled scratch buffer per thread and block size: allocating 64 KiB per batch costs
    # more than decompressing a typical batch.
    scratches = getattr(_lz4_local, "scratch", None)
    if scratches is None:
        scratches = _lz4_local.scratch = {}
    scratch = scratches.get(block_max)
    if scratch is None:
        scratch = scratches[block_max] = memoryview(bytearray(block_max))
    decompress_into = cramjam.lz4.decompress_block_into
    limit = MAX_DECOMPRESSED_BYTES
    total = 0
    window = b""  # linked blocks: the last 64 KiB of output, which the next block may refer to
    while True:
        if end - pos < 4:
            raise CorruptRecordError(f"Truncated lz4 frame: no block size at byte {pos}")
        (word,) = _U32LE.unpack_from(view, pos)
        pos += 4
        if word == 0:
            break
        size = word & 0x7FFFFFFF
        if size > block_max or size > end - pos:
            raise CorruptRecordError(
                f"lz4 block at byte {pos - 4} claims {size} bytes (max {block_max}, {end - pos} remain)"
            )
        block = view[pos : pos + size]
        pos += size
        if block_checksum:
            if end - pos < 4:
                raise CorruptRecordError("Truncated lz4 block checksum")
            if _U32LE.unpack_from(view, pos)[0] != xxhash.xxh32_intdigest(block, 0):
                raise CorruptRecordError(f"lz4 block checksum mismatch at byte {pos}")
            pos += 4
        if word & _LZ4_UNCOMPRESSED:
            piece = bytes(block)
        elif independent or not window:
            # Into a block-sized buffer: a block never produces more than one block (the bound).
            try:
                n = decompress_into(block, scratch)
            except cramjam.DecompressionError as e:
                raise CorruptRecordError(f"Invalid lz4 block at byte {pos - size}: {e}") from None
            piece = scratch[:n].tobytes()
        else:
            piece = _lz4_linked_block(window, block, bd, pos - size)
        total += len(piece)
        if total > limit:
            raise _too_big("lz4")
        out.append(piece)
        if not independent:
            window = (window + piece)[-_LZ4_WINDOW:]
    # Kafka skips a content checksum without checking it; so do we, but it must be there.
    if content_checksum and end - pos < 4:
        raise CorruptRecordError("Truncated lz4 frame: missing content checksum")
    return out[0] if len(out) == 1 else b"".join(out)


# --- zstd ---------------------------------------------------------------------------------------

# ``zstandard`` (a dependency), not cramjam: cramjam creates a fresh zstd context per call (~40 us a
# batch) where zstandard reuses one per thread (4-5x faster for typical batches), and cramjam's
# one-shot decoder cannot stop at the decompression bound.

_zstd_local = threading.local()
_ZSTD_MAX_RATIO = 32 * 1024  # a 4-byte RLE block decompresses to 128 KiB
_ZSTD_MIN_SLICE = 4


def _zstd_compress(data: BytesLike, level: int | None) -> bytes:
    if level is None:
        level = 3
    if not -131072 <= level <= 22:
        raise UnsupportedCompressionTypeError(f"zstd compression level {level} is not in -131072..22")
    compressors = getattr(_zstd_local, "compressors", None)
    if compressors is None:
        compressors = _zstd_local.compressors = {}
    compressor = compressors.get(level)
    if compressor is None:
        compressor = compressors[level] = zstandard.ZstdCompressor(level=level)
    return compressor.compress(data)


def _zstd_decompress(data: BytesLike) -> bytes:
    decompressor = getattr(_zstd_local, "decompressor", None)
    if decompressor is None:
        decompressor = _zstd_local.decompressor = zstandard.ZstdDecompressor()
    limit = MAX_DECOMPRESSED_BYTES
    out: list[bytes] = []
    view = memoryview(data)
    pos = 0
    end = len(view)
    produced = 0
    if not end:
        raise CorruptRecordError("Truncated zstd frame (no data)")
    try:
        while pos < end:
            # Streaming, so a forged frame content size never sizes an allocation. The input is fed
            # in slices no bigger than what could, at the codec's densest (a 4-byte RLE block
            # makes 128 KiB), fill the room still left: past the limit by at most one block.
            stream = decompressor.decompressobj()
            while pos < end:
                step = max(_ZSTD_MIN_SLICE, (limit - produced) // _ZSTD_MAX_RATIO)
                piece = stream.decompress(view[pos : pos + step])
                fed = min(step, end - pos)
                pos += fed
                produced += len(piece)
                if produced > limit:
                    raise _too_big("zstd")
                if piece:
                    out.append(piece)
                if stream.eof:
                    # What the frame did not use of the last slice belongs to the next frame.
                    pos -= len(stream.unused_data)
                    break
            if not stream.eof:
                raise CorruptRecordError("Truncated zstd frame")
    except zstandard.ZstdError as e:
        raise CorruptRecordError(f"Invalid zstd data: {e}") from None
    if not out:
        return b""
    return out[0] if len(out) == 1 else b"".join(out)


# --- dispatch ----------------------------------------------------------------------------------


def _check_codec(codec: int, magic: int) -> CompressionType:
    ctype = CompressionType.for_id(codec)
    if ctype is CompressionType.ZSTD and magic < MAGIC_V2:
        raise UnsupportedCompressionTypeError(f"zstd compression needs message format v2, not v{magic}")
    return ctype


def compress(codec: int, data: BytesLike, magic: int, level: int | None = None) -> bytes:
    """Compress ``data`` the way Kafka's writer for this magic does; ``level`` None = Kafka default."""
    ctype = _check_codec(codec, magic)
    if ctype is CompressionType.NONE:
        return bytes(data)
    if ctype is CompressionType.GZIP:
        return _gzip_compress(data, level)
    if ctype is CompressionType.SNAPPY:
        return _snappy_compress(data)
    if ctype is CompressionType.LZ4:
        return _lz4_compress(data, magic, level)
    return _zstd_compress(data, level)


_DECOMPRESSORS: dict[CompressionType, Callable[[BytesLike, int], bytes]] = {
    CompressionType.NONE: lambda data, magic: bytes(data),
    CompressionType.GZIP: lambda data, magic: _gzip_decompress(data),
    CompressionType.SNAPPY: lambda data, magic: _snappy_decompress(data),
    CompressionType.LZ4: _lz4_decompress,
    CompressionType.ZSTD: lambda data, magic: _zstd_decompress(data),
}


def decompress(codec: int, data: BytesLike, magic: int) -> bytes:
    """Decompress one compressed record set / records area written by any Kafka client."""
    ctype = _check_codec(codec, magic)
    try:
        return _DECOMPRESSORS[ctype](data, magic)
    except DecompressionError:
        raise
    except CorruptRecordError as e:
        raise DecompressionError(str(e)) from None
