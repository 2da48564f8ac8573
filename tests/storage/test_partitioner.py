"""Kafka's default partitioner: murmur2 against two independent oracles, and the sticky partitioner."""

from __future__ import annotations

import importlib
import random
import warnings
from collections import Counter

import pytest

from kafkalog.errors import InvalidConfigError
from kafkalog.storage.partitioner import (
    StickyPartitioner,
    murmur2,
    murmur2_py,
    partition_for_key,
    to_positive,
)

with warnings.catch_warnings():
    # Importing kafka-python loads its protocol schemas through deprecated importlib APIs.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.partitioner.default import murmur2 as kafka_python_murmur2

# The Java client's own vectors: apache/kafka clients/src/test/java/org/apache/kafka/common/utils/
# UtilsTest.java, testMurmur2 (signed 32-bit results of Utils.murmur2).
JAVA_UTILS_TEST_VECTORS = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
]


@pytest.mark.parametrize(("data", "expected"), JAVA_UTILS_TEST_VECTORS)
def test_murmur2_matches_java_utils_test(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected
    assert murmur2_py(data) == expected


def test_c_murmur2_equals_the_python_one() -> None:
    # murmur2 is the C extension's when it is built (the rest of this file then tests it); the
    # Python version must give the same answers
    c_murmur2 = importlib.import_module("kafkalog.records._native").murmur2
    rng = random.Random(7)
    for _ in range(5000):
        key = rng.randbytes(rng.randrange(0, 90))
        assert c_murmur2(key) == murmur2_py(key), key
    assert c_murmur2(memoryview(b"abc")) == murmur2_py(bytearray(b"abc")) == 479470107


def test_murmur2_matches_kafka_python_over_random_keys() -> None:
    # kafka-python's pure-Python port returns the same 32 bits, unsigned.
    rng = random.Random(20241025)
    for _ in range(3000):
        key = rng.randbytes(rng.randrange(0, 70))
        ours = murmur2(key)
        assert -(2**31) <= ours < 2**31
        assert ours & 0xFFFFFFFF == kafka_python_murmur2(key), key


@pytest.mark.parametrize("length", range(0, 13))
def test_murmur2_every_tail_length_against_kafka_python(length: int) -> None:
    key = bytes(range(200, 200 + length)) if length else b""
    assert murmur2(key) & 0xFFFFFFFF == kafka_python_murmur2(key)


def test_murmur2_accepts_bytearray_and_memoryview() -> None:
    data = b"a-little-bit-longer-string"
    assert murmur2(bytearray(data)) == murmur2(memoryview(data)) == -1486304829


def test_to_positive_clears_only_the_sign_bit() -> None:
    assert to_positive(-1) == 0x7FFFFFFF
    assert to_positive(-(2**31)) == 0  # unlike abs()
    assert to_positive(5) == 5
    assert to_positive(-973932308) == (-973932308) & 0x7FFFFFFF


def test_partition_for_key_matches_java_formula_and_kafka_python() -> None:
    rng = random.Random(7)
    for _ in range(500):
        key = rng.randbytes(rng.randrange(0, 40))
        n = rng.randrange(1, 200)
        expected = (kafka_python_murmur2(key) & 0x7FFFFFFF) % n
        assert partition_for_key(key, n) == expected
    # toPositive(-973932308) % 10: the partition the Java producer picks for key "21".
    assert partition_for_key(b"21", 10) == 1173551340 % 10


def test_empty_key_is_hashed_not_sticky() -> None:
    p = StickyPartitioner(1000, rng=random.Random(0))
    assert p.partition(b"") == partition_for_key(b"", 1000)


@pytest.mark.parametrize("bad", [0, -3, True, 2.0])
def test_bad_partition_counts_are_rejected(bad: object) -> None:
    with pytest.raises(InvalidConfigError, match="num_partitions"):
        partition_for_key(b"k", bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidConfigError, match="num_partitions"):
        StickyPartitioner(bad)  # type: ignore[arg-type]


def test_bad_sticky_batch_size_is_rejected() -> None:
    with pytest.raises(InvalidConfigError, match="sticky_batch_size"):
        StickyPartitioner(3, sticky_batch_size=0)


def test_keyless_records_stick_until_the_batch_completes() -> None:
    p = StickyPartitioner(12, rng=random.Random(1))
    first = p.partition()
    assert all(p.partition() == first for _ in range(100))
    assert all(p.partition(None) == first for _ in range(10))
    second = p.on_batch_complete()
    assert second != first
    assert p.partition() == second


def test_keyed_records_do_not_move_the_sticky_partition() -> None:
    p = StickyPartitioner(8, rng=random.Random(2))
    sticky = p.partition()
    for i in range(50):
        key = f"key-{i}".encode()
        assert p.partition(key) == partition_for_key(key, 8)
    assert p.partition() == sticky


def test_switch_picks_another_partition_uniformly() -> None:
    n = 5
    p = StickyPartitioner(n, rng=random.Random(3))
    previous = p.partition()
    seen: Counter[int] = Counter()
    for _ in range(5000):
        current = p.on_batch_complete()
        assert current != previous and 0 <= current < n
        seen[current] += 1
        previous = current
    assert set(seen) == set(range(n))
    assert min(seen.values()) > 5000 / n * 0.8


def test_single_partition_always_zero() -> None:
    p = StickyPartitioner(1, rng=random.Random(4))
    assert p.partition() == 0
    assert p.on_batch_complete() == 0


def test_builtin_partitioner_mode_may_repeat_the_partition() -> None:
    # Kafka 3.3+ BuiltInPartitioner draws among all partitions, the current one included.
    p = StickyPartitioner(2, rng=random.Random(5), avoid_current=False)
    previous = p.partition()
    repeats = 0
    for _ in range(200):
        current = p.on_batch_complete()
        repeats += current == previous
        previous = current
    assert 0 < repeats < 200


def test_same_seed_gives_same_sequence() -> None:
    a = StickyPartitioner(50, rng=random.Random(99))
    b = StickyPartitioner(50, rng=random.Random(99))
    assert [a.partition()] + [a.on_batch_complete() for _ in range(20)] == [b.partition()] + [
        b.on_batch_complete() for _ in range(20)
    ]


def test_sticky_batch_size_switches_after_enough_bytes() -> None:
    p = StickyPartitioner(10, rng=random.Random(6), sticky_batch_size=100)
    first = p.partition()
    p.record_appended(60)
    assert p.partition() == first
    p.record_appended(40)  # 100 bytes reached: switch, counter restarts
    second = p.partition()
    assert second != first
    p.record_appended(99)
    assert p.partition() == second


def test_record_appended_without_batch_size_never_switches() -> None:
    p = StickyPartitioner(10, rng=random.Random(8))
    first = p.partition()
    p.record_appended(10**9)
    assert p.partition() == first
