"""The cleaner's offset map: fixed memory, MD5 keys, linear probing, Kafka's load-factor stop."""

from __future__ import annotations

import random

import pytest

from kafkalog.errors import IllegalArgumentError
from kafkalog.storage.cleaner.offset_map import BYTES_PER_ENTRY, OffsetMap


def test_put_get_and_overwrite() -> None:
    m = OffsetMap(BYTES_PER_ENTRY * 100)
    assert (m.slots, m.memory, m.size, m.latest_offset) == (100, 2400, 0, -1)
    for i in range(50):
        m.put(f"key{i}".encode(), i)
    for i in range(50):
        m.put(f"key{i}".encode(), 1000 + i)  # overwrites: the size does not grow
    assert m.size == 50 and m.latest_offset == 1049
    assert [m.get(f"key{i}".encode()) for i in range(50)] == [1000 + i for i in range(50)]
    assert m.get(b"absent") == -1
    assert m.get_many([b"key3", None, b"absent"]) == [1003, -1, -1]
    m.clear()
    assert (m.size, m.latest_offset, m.get(b"key3")) == (0, -1, -1)


def test_a_nearly_full_map_still_finds_every_key() -> None:
    m = OffsetMap(BYTES_PER_ENTRY * 64)
    keys = [random.Random(1).randbytes(8) + bytes([i]) for i in range(63)]
    for i, key in enumerate(keys):
        m.put(key, i)
    assert m.size == 63 and m.collision_rate > 0  # probing happened
    assert m.get_many(keys) == list(range(63))
    with pytest.raises(IllegalArgumentError, match="full"):
        m.put(b"one too many", 99)


def test_put_many_stops_at_the_load_factor_like_kafka() -> None:
    m = OffsetMap(BYTES_PER_ENTRY * 20)
    keys = [f"k{i}".encode() for i in range(30)]
    offsets = list(range(100, 130))
    consumed = m.put_many(keys, offsets, start_offset=0, max_entries=18)
    assert consumed == 18 and m.size == 18 and m.latest_offset == 117
    # Records below the start offset and keyless ones are skipped, not mapped.
    m.clear()
    assert m.put_many([b"a", None, b"b"], [1, 2, 3], start_offset=2, max_entries=18) == 3
    assert (m.get(b"a"), m.get(b"b"), m.size) == (-1, 3, 1)


def test_memory_is_bounded_by_the_buffer() -> None:
    with pytest.raises(IllegalArgumentError):
        OffsetMap(10)
    m = OffsetMap(1024 * 1024)
    assert m.slots == 1024 * 1024 // 24 and m.memory <= 1024 * 1024
