"""Codecs (spec §3.8): our frames, frames written by other clients, and bad input."""

from __future__ import annotations

import gzip
import os
import zlib

import lz4.frame
import pytest
import xxhash
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka import codec as kp_codec

from kafkalog.errors import CorruptRecordError, KafkaLogError, UnsupportedCompressionTypeError
from kafkalog.records import CompressionType, compress, decompress

TEXT = b"".join(b"record %05d: the quick brown fox jumps over the lazy dog\n" % i for i in range(3000))
RANDOM = os.urandom(150_000)
CODEC_MAGICS = [
    (c, m)
    for c in (CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.LZ4, CompressionType.ZSTD)
    for m in (0, 1, 2)
    if not (c is CompressionType.ZSTD and m < 2)
]


@pytest.mark.parametrize(("codec", "magic"), CODEC_MAGICS)
@pytest.mark.parametrize("payload", [b"", b"x", TEXT, RANDOM], ids=["empty", "one", "text", "random"])
def test_round_trip(codec: CompressionType, magic: int, payload: bytes) -> None:
    packed = compress(codec, payload, magic)
    assert decompress(codec, packed, magic) == payload
    assert decompress(codec, memoryview(packed), magic) == payload


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(CODEC_MAGICS), st.binary(max_size=3000))
def test_round_trip_property(codec_magic: tuple[CompressionType, int], payload: bytes) -> None:
    codec, magic = codec_magic
    assert decompress(codec, compress(codec, payload, magic), magic) == payload


def test_none_codec_is_identity() -> None:
    assert compress(CompressionType.NONE, b"abc", 2) == b"abc"
    assert decompress(CompressionType.NONE, b"abc", 0) == b"abc"


def test_gzip_header_is_what_jdk17_writes() -> None:
    packed = compress(CompressionType.GZIP, TEXT, 2)
    assert packed[:10] == bytes.fromhex("1f8b08000000000000ff")
    assert gzip.decompress(packed) == TEXT


def test_gzip_reads_other_writers_and_concatenated_members() -> None:
    assert decompress(CompressionType.GZIP, kp_codec.gzip_encode(TEXT), 1) == TEXT
    assert decompress(CompressionType.GZIP, gzip.compress(b"ab") + gzip.compress(b"cd"), 2) == b"abcd"
    assert decompress(CompressionType.GZIP, gzip.compress(b"ab") + b"\x00" * 8, 2) == b"ab"


def test_gzip_levels() -> None:
    for level in (1, 9, -1, None):
        assert decompress(1, compress(1, TEXT, 2, level), 2) == TEXT
    with pytest.raises(UnsupportedCompressionTypeError):
        compress(1, TEXT, 2, 10)


def test_snappy_writes_xerial_framing_in_32k_blocks() -> None:
    packed = compress(CompressionType.SNAPPY, TEXT, 1)
    assert packed[:16] == b"\x82SNAPPY\x00" + bytes.fromhex("0000000100000001")
    # 174 KiB of input -> 6 blocks of at most 32 KiB each
    pos, blocks = 16, 0
    while pos < len(packed):
        pos += 4 + int.from_bytes(packed[pos : pos + 4], "big")
        blocks += 1
    assert pos == len(packed)
    assert blocks == -(-len(TEXT) // 32768)
    assert kp_codec.snappy_decode(packed) == TEXT


def test_snappy_reads_raw_blocks_like_librdkafka_writes() -> None:
    raw = kp_codec.snappy_encode(TEXT, xerial_compatible=False)
    assert not raw.startswith(b"\x82SNAPPY")
    assert decompress(CompressionType.SNAPPY, raw, 2) == TEXT
    assert decompress(CompressionType.SNAPPY, kp_codec.snappy_encode(TEXT), 2) == TEXT


def test_snappy_block_claiming_huge_length_is_rejected_before_allocating() -> None:
    forged = b"\xff\xff\xff\xff\x0f" + b"\x00" * 20  # claims 4 GiB
    with pytest.raises(CorruptRecordError, match="impossible"):
        decompress(CompressionType.SNAPPY, forged, 2)
    framed = b"\x82SNAPPY\x00" + bytes.fromhex("0000000100000001") + len(forged).to_bytes(4, "big") + forged
    with pytest.raises(CorruptRecordError):
        decompress(CompressionType.SNAPPY, framed, 2)


def test_xerial_block_length_beyond_the_data_is_corrupt() -> None:
    framed = b"\x82SNAPPY\x00" + bytes.fromhex("0000000100000001") + (1 << 30).to_bytes(4, "big") + b"abc"
    with pytest.raises(CorruptRecordError, match="claims"):
        decompress(CompressionType.SNAPPY, framed, 2)
    with pytest.raises(CorruptRecordError):
        decompress(CompressionType.SNAPPY, b"\x82SNAPPY\x00\x00\x00", 2)


def _hc(descriptor: bytes) -> int:
    return (xxhash.xxh32_intdigest(descriptor) >> 8) & 0xFF


@pytest.mark.parametrize("magic", [1, 2])
def test_lz4_frame_layout_matches_kafka(magic: int) -> None:
    packed = compress(CompressionType.LZ4, TEXT, magic)
    assert packed[:4] == b"\x04\x22\x4d\x18"
    assert packed[4] == 0x60 and packed[5] == 0x40
    assert packed[6] == _hc(b"\x60\x40")
    assert packed[-4:] == b"\x00\x00\x00\x00"
    # independent 64 KiB blocks: a standard LZ4 frame decoder accepts it
    assert lz4.frame.decompress(packed) == TEXT
    assert kp_codec.lz4_decode(packed) == TEXT


def test_lz4_magic0_uses_kafka08_broken_header_checksum() -> None:
    packed = compress(CompressionType.LZ4, TEXT, 0)
    assert packed[:7] == bytes.fromhex("04224d1860401a")
    assert packed[6] == _hc(b"\x04\x22\x4d\x18\x60\x40") != _hc(b"\x60\x40")
    assert kp_codec.lz4_decode_old_kafka(packed) == TEXT
    # the checksum is ignored for magic 0 but checked for magic >= 1
    assert decompress(CompressionType.LZ4, kp_codec.lz4_encode_old_kafka(TEXT), 0) == TEXT
    with pytest.raises(CorruptRecordError, match="checksum"):
        decompress(CompressionType.LZ4, packed, 1)


def test_lz4_incompressible_blocks_are_stored_with_the_high_bit() -> None:
    packed = compress(CompressionType.LZ4, RANDOM, 2)
    first_block = int.from_bytes(packed[7:11], "little")
    assert first_block & 0x80000000
    assert first_block & 0x7FFFFFFF == 65536
    assert decompress(CompressionType.LZ4, packed, 2) == RANDOM


@pytest.mark.parametrize(
    "kwargs",
    [
        {"store_size": True},  # kafka-python: content size (FLG 0x68)
        {"store_size": False, "content_checksum": True},  # sarama: FLG 0x64
        {"store_size": False, "block_checksum": True},
        {"store_size": False, "block_size": lz4.frame.BLOCKSIZE_MAX4MB},
        {"store_size": False, "block_linked": True},  # dependent blocks
        {"store_size": True, "compression_level": 12},
    ],
)
def test_lz4_reads_frames_written_by_other_clients(kwargs: dict[str, object]) -> None:
    frame = lz4.frame.compress(TEXT + RANDOM[:70000], **kwargs)
    assert decompress(CompressionType.LZ4, frame, 2) == TEXT + RANDOM[:70000]
    assert decompress(CompressionType.LZ4, kp_codec.lz4_encode(TEXT), 1) == TEXT


def test_lz4_levels() -> None:
    assert decompress(3, compress(3, TEXT, 2, 9), 2) == TEXT
    with pytest.raises(UnsupportedCompressionTypeError):
        compress(3, TEXT, 2, 18)


@pytest.mark.parametrize(
    "frame",
    [
        b"",
        b"\x04\x22\x4d",
        b"\x04\x22\x4d\x18\x60\x40",
        b"\x05\x22\x4d\x18\x60\x40\x82\x00\x00\x00\x00",
        b"\x04\x22\x4d\x18\x20\x40\x82\x00\x00\x00\x00",  # version 0
        b"\x04\x22\x4d\x18\x61\x40\x00\x00\x00\x00\x00",  # dictionary id
        b"\x04\x22\x4d\x18\x60\x30\x00\x00\x00\x00\x00",  # block size 3 is not defined
        b"\x04\x22\x4d\x18\x60\x40\x82\x05\x00\x00\x00\xff",  # block longer than the data
        b"\x04\x22\x4d\x18\x60\x40\x82\xff\xff\xff\x7f",  # block longer than the max block size
        b"\x04\x22\x4d\x18\x60\x40\x82\x03\x00\x00\x00\xff\xff\xff\x00\x00\x00\x00",  # bad block data
        b"\x04\x22\x4d\x18\x60\x40\x82\x01\x00\x00\x80\x41",  # no end mark
    ],
)
def test_bad_lz4_frames_are_corrupt(frame: bytes) -> None:
    with pytest.raises(CorruptRecordError):
        decompress(CompressionType.LZ4, frame, 0)


def test_zstd_reads_frames_without_content_size_and_concatenated_frames() -> None:
    no_size = zstandard.ZstdCompressor(write_content_size=False).compress(TEXT)
    assert decompress(CompressionType.ZSTD, no_size, 2) == TEXT
    assert (
        decompress(CompressionType.ZSTD, kp_codec.zstd_encode(b"ab") + kp_codec.zstd_encode(b"cd"), 2)
        == b"abcd"
    )


def test_zstd_forged_content_size_does_not_allocate() -> None:
    frame = zstandard.ZstdCompressor(write_content_size=True).compress(b"x" * 100)
    forged = frame[:4] + bytes([0xE0]) + (1 << 40).to_bytes(8, "little") + frame[6:]
    with pytest.raises(CorruptRecordError):
        decompress(CompressionType.ZSTD, forged, 2)


@pytest.mark.parametrize("magic", [0, 1])
def test_zstd_needs_magic_2(magic: int) -> None:
    with pytest.raises(UnsupportedCompressionTypeError):
        compress(CompressionType.ZSTD, TEXT, magic)
    with pytest.raises(UnsupportedCompressionTypeError):
        decompress(CompressionType.ZSTD, compress(CompressionType.ZSTD, TEXT, 2), magic)


@pytest.mark.parametrize("codec_id", [5, 6, 7, -1])
def test_unknown_codec_ids(codec_id: int) -> None:
    with pytest.raises(UnsupportedCompressionTypeError, match="Unknown compression type id"):
        decompress(codec_id, b"abc", 2)
    with pytest.raises(UnsupportedCompressionTypeError):
        compress(codec_id, b"abc", 2)


@pytest.mark.parametrize(("codec", "magic"), CODEC_MAGICS)
def test_garbage_and_truncation_are_corrupt_record_errors(codec: CompressionType, magic: int) -> None:
    packed = compress(codec, TEXT, magic)
    with pytest.raises(CorruptRecordError):
        decompress(codec, b"\x13\x37" * 40, magic)
    for cut in (1, len(packed) // 3, len(packed) - 1):
        try:
            out = decompress(codec, packed[:cut], magic)
        except CorruptRecordError:
            continue
        # a codec may legitimately decode a prefix (e.g. raw snappy never); it must not be the full data
        assert out != TEXT


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(CODEC_MAGICS), st.binary(max_size=200), st.integers(0, 10_000))
def test_random_bytes_never_escape_as_foreign_exceptions(
    codec_magic: tuple[CompressionType, int], junk: bytes, flip: int
) -> None:
    codec, magic = codec_magic
    packed = bytearray(compress(codec, TEXT[:2000], magic))
    packed[flip % len(packed)] ^= 0x5A
    for data in (bytes(packed), junk, bytes(packed[: flip % len(packed)]) + junk):
        try:
            decompress(codec, data, magic)
        except KafkaLogError:
            pass


def test_crc_helpers_agree_with_zlib() -> None:
    # sanity: the legacy CRC used by batch.py is zlib's CRC-32 (IEEE)
    assert zlib.crc32(b"123456789") == 0xCBF43926
