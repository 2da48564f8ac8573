"""Kafka's Java-client default partitioner: murmur2 for keyed records, sticky choice for keyless ones.

A record written by kafkalog lands in the same partition the Java producer would pick for the same
key (``Utils.murmur2`` + ``Utils.toPositive`` + modulo, as in ``BuiltInPartitioner.partitionForKey``).
"""

from __future__ import annotations

import random
import struct

from kafkalog.errors import InvalidConfigError
from kafkalog.records.native import native

__all__ = ["StickyPartitioner", "murmur2", "murmur2_py", "partition_for_key", "to_positive"]

_M32 = 0xFFFFFFFF
_SEED = 0x9747B28C
_M = 0x5BD1E995  # mixing constant of MurmurHash2
_R = 24


def murmur2_py(data: bytes | bytearray | memoryview) -> int:
    """MurmurHash2 exactly as Kafka's ``Utils.murmur2``; the result is a signed 32-bit int like Java's.
    (``murmur2`` is the C version of this when the extension is built.)"""
    length = len(data)
    h = (_SEED ^ length) & _M32
    n_words = length >> 2
    if n_words:
        # Unpacking every aligned little-endian word in one call is the fastest pure-Python route.
        for k in struct.unpack_from(f"<{n_words}I", data):
            k = (k * _M) & _M32
            k ^= k >> _R
            h = ((h * _M) & _M32) ^ ((k * _M) & _M32)
    tail = length & 3
    if tail:
        base = length & ~3
        # Java's switch falls through: 3 -> 2 -> 1, and only case 1 multiplies.
        if tail == 3:
            h ^= data[base + 2] << 16
        if tail >= 2:
            h ^= data[base + 1] << 8
        h ^= data[base]
        h = (h * _M) & _M32
    h ^= h >> 13
    h = (h * _M) & _M32
    h ^= h >> 15
    return h - 0x100000000 if h & 0x80000000 else h


murmur2 = native.murmur2 if native is not None else murmur2_py


def to_positive(number: int) -> int:
    """Kafka's ``Utils.toPositive``: clear the sign bit (not ``abs``: MIN_VALUE maps to 0)."""
    return number & 0x7FFFFFFF


def _check_num_partitions(num_partitions: int) -> None:
    if isinstance(num_partitions, bool) or not isinstance(num_partitions, int) or num_partitions < 1:
        raise InvalidConfigError(f"num_partitions must be an int >= 1, got {num_partitions!r}")


def partition_for_key(key: bytes | bytearray | memoryview, num_partitions: int) -> int:
    """The partition Kafka's producer picks for a non-null serialized key (an empty key is a key too)."""
    _check_num_partitions(num_partitions)
    return to_positive(murmur2(key)) % num_partitions


class StickyPartitioner:
    """Partition choice for one topic: murmur2 for keyed records, a sticky partition for keyless ones.

    A keyless record goes to the current sticky partition until ``on_batch_complete()`` is called
    (or, when ``sticky_batch_size`` is given, until that many bytes were reported through
    ``record_appended``, as ``BuiltInPartitioner.updatePartitionInfo`` does with ``batch.size``).
    The next sticky partition is then drawn at random, like Kafka when it has no broker load stats.

    ``avoid_current=True`` (default) draws among the *other* partitions, as the producer's
    ``StickyPartitionCache`` did (Kafka 2.4-3.2); ``False`` draws uniformly among all partitions,
    which is what 3.3+'s ``BuiltInPartitioner.nextPartition`` does (it may pick the same one again).
    """

    __slots__ = ("_avoid_current", "_current", "_num_partitions", "_produced_bytes", "_rng",
                 "_sticky_batch_size")

    def __init__(
        self,
        num_partitions: int,
        *,
        rng: random.Random | None = None,
        sticky_batch_size: int | None = None,
        avoid_current: bool = True,
    ) -> None:
        _check_num_partitions(num_partitions)
        if sticky_batch_size is not None and (
            isinstance(sticky_batch_size, bool)
            or not isinstance(sticky_batch_size, int)
            or sticky_batch_size < 1
        ):
            raise InvalidConfigError(f"sticky_batch_size must be an int >= 1, got {sticky_batch_size!r}")
        self._num_partitions = num_partitions
        self._rng = rng if rng is not None else random.Random()
        self._sticky_batch_size = sticky_batch_size
        self._avoid_current = avoid_current
        self._current: int | None = None
        self._produced_bytes = 0

    @property
    def num_partitions(self) -> int:
        return self._num_partitions

    def _random_positive_int(self) -> int:
        # Kafka: Utils.toPositive(ThreadLocalRandom.nextInt()), i.e. 31 uniform bits.
        return to_positive(self._rng.getrandbits(32))

    def _next_partition(self) -> int:
        n = self._num_partitions
        current = self._current
        if current is None or n == 1 or not self._avoid_current:
            return self._random_positive_int() % n
        # Uniform over the n-1 other partitions: pick an index among them and skip over `current`.
        choice = self._random_positive_int() % (n - 1)
        return choice + 1 if choice >= current else choice

    def partition(self, key: bytes | bytearray | memoryview | None = None) -> int:
        """Partition of a record: murmur2 of a non-null key, else the current sticky partition."""
        if key is not None:
            return to_positive(murmur2(key)) % self._num_partitions
        if self._current is None:
            self._current = self._next_partition()
        return self._current

    def on_batch_complete(self) -> int:
        """The current keyless batch is closed: move to another partition; returns the new one."""
        self._current = self._next_partition()
        self._produced_bytes = 0
        return self._current

    def record_appended(self, num_bytes: int) -> None:
        """Count bytes appended to the sticky partition; switch once ``sticky_batch_size`` is reached."""
        if self._sticky_batch_size is None or self._current is None:
            return
        self._produced_bytes += num_bytes
        if self._produced_bytes >= self._sticky_batch_size:
            self.on_batch_complete()
