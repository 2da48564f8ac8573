"""Decompression is bounded: a batch that expands beyond ``MAX_DECOMPRESSED_BYTES`` is refused
while it is being decompressed (memory never follows a forged expansion), and everything below the
limit still decompresses exactly."""

from __future__ import annotations

import gzip

import cramjam
import pytest
import zstandard

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
