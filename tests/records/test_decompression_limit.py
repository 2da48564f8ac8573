"""Decompression is bounded: a batch that expands beyond ``MAX_DECOMPRESSED_BYTES`` is refused
while it is being decompressed (memory never follows a forged expansion), and everything below the
limit still decompresses exactly."""

from __future__ import annotations

import gzip
import random
import subprocess
import sys
from pathlib import Path

import cramjam
import pytest
import zstandard
from crc32c import crc32c

from kafkalog.errors import CorruptRecordError
from kafkalog.records import compression
from kafkalog.records.memory import MemoryRecords
from kafkalog.records.types import CompressionType, SimpleRecord

LIMIT = 1 << 20


@pytest.fixture
def small_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compression, "MAX_DECOMPRESSED_BYTES", LIMIT)


def _bombs() -> dict[CompressionType, bytes]:
    zeros = b"\0" * (8 * LIMIT)
    return {
        CompressionType.GZIP: gzip.compress(zeros),
        CompressionType.ZSTD: zstandard.ZstdCompressor().compress(zeros),
        CompressionType.LZ4: compression.compress(CompressionType.LZ4, zeros, 2),
    }


@pytest.mark.parametrize("codec", [CompressionType.GZIP, CompressionType.ZSTD, CompressionType.LZ4])
def test_an_expansion_beyond_the_limit_is_refused(small_limit: None, codec: CompressionType) -> None:
    bomb = _bombs()[codec]
    assert len(bomb) < LIMIT // 16
    with pytest.raises(CorruptRecordError, match="decompresses to more than 1048576 bytes"):
        compression.decompress(codec, bomb, 2)


@pytest.mark.parametrize("codec", [CompressionType.GZIP, CompressionType.ZSTD, CompressionType.LZ4,
                                   CompressionType.SNAPPY])
def test_data_below_the_limit_is_untouched(small_limit: None, codec: CompressionType) -> None:
    data = bytes(range(256)) * (LIMIT // 512)
    assert compression.decompress(codec, compression.compress(codec, data, 2), 2) == data


def test_concatenated_zstd_frames_still_decode(small_limit: None) -> None:
    # Fed in slices: a frame that ends inside a slice must hand the rest of that slice, and the
    # slices after it, to the next frame.
    c = zstandard.ZstdCompressor()
    parts = [bytes([i]) * (5000 + 997 * i) for i in range(5)]
    frames = b"".join(c.compress(p) for p in parts)
    assert compression.decompress(CompressionType.ZSTD, frames, 2) == b"".join(parts)
    raw = bytes(cramjam.zstd.compress(b"x" * 10_000))
    assert compression.decompress(CompressionType.ZSTD, raw + raw, 2) == b"x" * 20_000


def test_a_bomb_batch_is_a_corrupt_record_not_an_allocation(small_limit: None) -> None:
    records = MemoryRecords.with_records(2, CompressionType.ZSTD, [SimpleRecord(b"\0" * (2 * LIMIT))])
    batch = next(records.batches())
    batch.ensure_valid()  # the CRC is fine: only the expansion is refused
    with pytest.raises(CorruptRecordError, match="refused"):
        batch.decode_columns()


# --- every codec and framing, with payloads made by the codecs' own libraries ---------------------

BOMB = 64 * LIMIT  # what each bomb below expands to


def _zeros_bombs() -> dict[str, tuple[CompressionType, bytes]]:
    import lz4.frame
    import snappy
    from kafka.codec import snappy_encode

    zeros = bytes(BOMB)
    return {
        "gzip": (CompressionType.GZIP, gzip.compress(zeros)),
        "zstd": (CompressionType.ZSTD, zstandard.ZstdCompressor().compress(zeros)),
        "lz4-independent": (CompressionType.LZ4, lz4.frame.compress(
            zeros, block_linked=False, block_size=lz4.frame.BLOCKSIZE_MAX64KB)),
        # python-lz4's default: linked blocks, the content size in the header
        "lz4-linked": (CompressionType.LZ4, lz4.frame.compress(
            zeros, block_size=lz4.frame.BLOCKSIZE_MAX64KB)),
        "lz4-linked-4mb": (CompressionType.LZ4, lz4.frame.compress(
            zeros, block_size=lz4.frame.BLOCKSIZE_MAX4MB)),
        "snappy-raw": (CompressionType.SNAPPY, snappy.compress(zeros)),
        "snappy-xerial": (CompressionType.SNAPPY, snappy_encode(zeros)),
    }


@pytest.fixture(scope="module")
def zeros_bombs() -> dict[str, tuple[CompressionType, bytes]]:
    return _zeros_bombs()


@pytest.mark.parametrize("name", ["gzip", "zstd", "lz4-independent", "lz4-linked", "lz4-linked-4mb",
                                  "snappy-raw", "snappy-xerial"])
def test_every_framing_is_refused_beyond_the_limit(
        small_limit: None, zeros_bombs: dict[str, tuple[CompressionType, bytes]], name: str) -> None:
    codec, bomb = zeros_bombs[name]
    assert len(bomb) < BOMB // 16
    with pytest.raises(CorruptRecordError, match="decompresses to more than 1048576 bytes"):
        compression.decompress(codec, bomb, 2)


_MEASURE = """
import resource, sys
from kafkalog.errors import CorruptRecordError
from kafkalog.records import compression
codec, path, limit = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
bomb = open(path, "rb").read()
compression.MAX_DECOMPRESSED_BYTES = limit
compression.decompress(codec, compression.compress(codec, b"warm up" * 100, 2), 2)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    compression.decompress(codec, bomb, 2)
    outcome = "accepted"
except CorruptRecordError as e:
    outcome = "refused" if "decompresses to more than" in str(e) else repr(e)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(outcome, (after - before) * 1024)
"""


@pytest.mark.parametrize("name", ["gzip", "zstd", "lz4-independent", "lz4-linked", "lz4-linked-4mb",
                                  "snappy-raw", "snappy-xerial"])
def test_memory_stays_within_the_limit_while_refusing(
        tmp_path: Path, zeros_bombs: dict[str, tuple[CompressionType, bytes]], name: str) -> None:
    # In a fresh process, whose peak RSS shows what decompression allocated: the limit plus one
    # block of the codec (4 MiB for the largest lz4 block size), never the 64 MiB the data expands to.
    codec, bomb = zeros_bombs[name]
    path = tmp_path / "bomb"
    path.write_bytes(bomb)
    done = subprocess.run([sys.executable, "-c", _MEASURE, str(int(codec)), str(path), str(LIMIT)],
                          capture_output=True, text=True, timeout=60, check=True)
    outcome, grown = done.stdout.split()
    assert outcome == "refused"
    assert int(grown) < 12 * LIMIT, f"peak RSS grew by {int(grown) >> 20} MiB"


def test_linked_lz4_blocks_decode_across_block_boundaries(small_limit: None) -> None:
    import lz4.frame

    # Matches that reach back into the previous block: only right if the window is carried over.
    rng = random.Random(7)
    motif = rng.randbytes(40_000)
    data = b"".join(motif[rng.randrange(1000):] + rng.randbytes(100) for _ in range(20))
    assert 4 * 64 * 1024 < len(data) < LIMIT
    for checksum in (False, True):
        frame = lz4.frame.compress(data, block_size=lz4.frame.BLOCKSIZE_MAX64KB, block_linked=True,
                                   content_checksum=checksum)
        assert compression.decompress(CompressionType.LZ4, frame, 2) == data
    independent = lz4.frame.compress(data, block_size=lz4.frame.BLOCKSIZE_MAX64KB, block_linked=False)
    assert len(frame) < len(independent)  # the linked frame really does refer across blocks
    with pytest.raises(CorruptRecordError, match="Truncated lz4 frame"):
        compression.decompress(CompressionType.LZ4, frame[:-4], 2)


def test_snappy_below_the_limit_in_both_framings(small_limit: None) -> None:
    import snappy
    from kafka.codec import snappy_encode

    data = bytes(range(256)) * (LIMIT // 300)
    assert compression.decompress(CompressionType.SNAPPY, snappy.compress(data), 2) == data
    assert compression.decompress(CompressionType.SNAPPY, snappy_encode(data), 2) == data
    # the xerial chunks' declared lengths add up: many chunks, each small, are bounded in total
    assert compression.decompress(CompressionType.SNAPPY, snappy_encode(bytes(LIMIT)), 2) == bytes(LIMIT)
    with pytest.raises(CorruptRecordError, match="decompresses to more than"):
        compression.decompress(CompressionType.SNAPPY, snappy_encode(bytes(LIMIT + 1)), 2)


def _v2_batch_with_area(codec: CompressionType, area: bytes, records: list[SimpleRecord]) -> bytes:
    """A v2 batch of ``records`` whose records area is ``area`` compressed by a foreign codec
    library: header from our uncompressed build, length, attributes and CRC fixed up."""
    plain = bytes(MemoryRecords.with_records(2, CompressionType.NONE, records, base_offset=1000).buffer)
    header = bytearray(plain[:61])
    header[21:23] = ((int.from_bytes(header[21:23], "big") & ~0x07) | int(codec)).to_bytes(2, "big")
    out = header + area
    out[8:12] = (len(out) - 12).to_bytes(4, "big")
    out[17:21] = crc32c(bytes(out[21:])).to_bytes(4, "big")
    return bytes(out)


def test_a_refused_v2_batch_names_its_offset_and_position(small_limit: None) -> None:
    import lz4.frame

    records = [SimpleRecord(bytes(2 * LIMIT))]
    plain = bytes(MemoryRecords.with_records(2, CompressionType.NONE, records).buffer)
    linked = lz4.frame.compress(plain[61:], block_size=lz4.frame.BLOCKSIZE_MAX64KB)
    data = _v2_batch_with_area(CompressionType.LZ4, linked, records)
    batch = next(MemoryRecords(data).batches())
    batch.ensure_valid()
    assert batch.base_offset == 1000
    with pytest.raises(CorruptRecordError, match=r"more than 1048576 bytes.*base offset 1000"):
        batch.decode_columns()
    with pytest.raises(CorruptRecordError, match=r"more than 1048576 bytes.*base offset 1000"):
        list(batch)


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.LZ4])
def test_a_refused_legacy_wrapper_names_its_position(small_limit: None, magic: int,
                                                     codec: CompressionType) -> None:
    from kafka.record.legacy_records import LegacyRecordBatchBuilder

    builder = LegacyRecordBatchBuilder(magic, int(codec), batch_size=1 << 30)
    for i in range(3):
        builder.append(i, timestamp=None if magic == 0 else 1_700_000_000_000, key=None,
                       value=bytes(LIMIT // 2))
    data = bytes(builder.build())
    wrapper = next(MemoryRecords(data).batches())
    wrapper.ensure_valid()
    with pytest.raises(CorruptRecordError, match=r"more than 1048576 bytes.*entry at position 0"):
        wrapper.decode_columns()
