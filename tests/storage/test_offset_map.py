"""The cleaner's offset map: fixed memory, keyed 128-bit hashes, linear probing, Kafka's load-factor stop."""

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


# --- the C path (records/_native.c) and the Python path agree ------------------------------------

def _random_batches(rng: random.Random, n: int) -> list:
    from kafkalog.records.memory import MemoryRecords
    from kafkalog.records.types import CompressionType, Header, SimpleRecord

    batches = []
    offset = 0
    for _ in range(n):
        records = []
        for _ in range(rng.randrange(1, 12)):
            # Key lengths around 8-byte word and 64-byte block boundaries, and keyless records.
            size = rng.choice([0, 1, 7, 55, 56, 57, 63, 64, 65, 119, 120, 200, rng.randrange(30)])
            key = None if rng.random() < 0.1 else bytes([rng.randrange(4)]) * size
            value = None if rng.random() < 0.2 else rng.randbytes(rng.randrange(20))
            headers = (Header("h", rng.randbytes(3)),) if rng.random() < 0.3 else ()
            records.append(SimpleRecord(value, key, 1000 + offset, headers))
        codec = rng.choice([CompressionType.NONE, CompressionType.GZIP])
        built = MemoryRecords.with_records(2, codec, records, base_offset=offset)
        batches.append(next(built.batches()))
        offset += len(records) + rng.randrange(3)
    return batches


def test_native_and_python_paths_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    from kafkalog.storage.cleaner import key_hash
    from kafkalog.storage.cleaner import offset_map as module

    # The extension itself, even where KAFKALOG_PURE_PYTHON=1 keeps the library from using it.
    native = importlib.import_module("kafkalog.records._compact")
    monkeypatch.setattr(key_hash, "compact_native", native)
    shared = key_hash.KeyHash.create(bytes(range(16)), siphash=True)
    rng = random.Random(7)
    for round_ in range(5):
        batches = _random_batches(rng, 30)
        slots = rng.choice([40, 400])
        maps = []
        results = []
        for use_native in (True, False):
            monkeypatch.setattr(module, "compact_native", native if use_native else None)
            m = OffsetMap(BYTES_PER_ENTRY * slots, key_hash=shared)
            consumed = [m.put_batch(b, start_offset=5, max_entries=30) for b in batches]
            m.update_latest_offset(m.latest_offset - round_)  # some records lie past the mapped range
            decisions = [m.retain_batch(b, retain_deletes=bool(round_ % 2)) for b in batches]
            maps.append((list(m._table), m.size, m.latest_offset))
            results.append((consumed, decisions))
        assert maps[0] == maps[1]
        assert results[0] == results[1]


def test_both_hashes_fill_and_find(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    from kafkalog.storage.cleaner import key_hash

    monkeypatch.setattr(key_hash, "compact_native", importlib.import_module("kafkalog.records._compact"))
    keys = [b"key-%d" % i for i in range(300)]
    for siphash in (True, False):
        m = OffsetMap(BYTES_PER_ENTRY * 400, key_hash=key_hash.KeyHash.create(siphash=siphash))
        assert m.put_many(keys, list(range(300)), start_offset=0, max_entries=360) == 300
        assert m.get_many(keys) == list(range(300)) and m.size == 300
