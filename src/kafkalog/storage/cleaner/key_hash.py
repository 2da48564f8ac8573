"""``KeyHash``: the offset map's 128-bit key hash, keyed by a random secret per map.

Kafka's ``SkimpyOffsetMap`` stores a key's MD5 digest and takes two keys with the same digest
for one. MD5 collisions can be computed, so a producer could write a key that makes the cleaner
drop another key's latest record. kafkalog keys its hash with 16 random bytes per map, which no
producer knows: SipHash-1-3 with its 128-bit output (``records/_compact.c``, the function the C
batch walks use; the rounds CPython and Rust key their hash tables with) or, where the C extension
is not built, keyed BLAKE2b cut to 128 bits (from ``hashlib``: a pure-Python SipHash would cost
~17 µs a key). Both are keyed pseudo-random functions; a map uses one of them throughout. The hash
never reaches disk: only the map holds it.
"""

from __future__ import annotations

import hashlib
import os
import struct
from collections.abc import Callable
from dataclasses import dataclass

from kafkalog.errors import IllegalArgumentError
from kafkalog.records.native import compact_native

__all__ = ["KeyHash"]

_SECRET_BYTES = 16
_WORDS = struct.Struct("<QQ")


@dataclass(frozen=True, slots=True)
class KeyHash:
    """A secret and the keyed function it selects; ``halves(key)`` gives the (first, second) 64-bit
    words of the 128-bit hash."""

    secret: bytes
    siphash: bool  # SipHash-1-3-128 in C; else keyed BLAKE2b-128

    @classmethod
    def create(cls, secret: bytes | None = None, *, siphash: bool | None = None) -> KeyHash:
        """A fresh random secret unless one is given (tests); SipHash where the C module is built."""
        if secret is None:
            secret = os.urandom(_SECRET_BYTES)
        if len(secret) != _SECRET_BYTES:
            raise IllegalArgumentError(f"A key hash secret is {_SECRET_BYTES} bytes, got {len(secret)}")
        if siphash is None:
            siphash = compact_native is not None
        elif siphash and compact_native is None:
            raise IllegalArgumentError("SipHash needs the C extension (kafkalog.records._compact)")
        return cls(secret, siphash)

    @property
    def words(self) -> tuple[int, int]:
        """The secret as SipHash's two 64-bit key words (little-endian)."""
        k0, k1 = _WORDS.unpack(self.secret)
        return int(k0), int(k1)

    def function(self) -> Callable[[bytes], tuple[int, int]]:
        """``halves`` as a plain callable, for hot loops."""
        if self.siphash:
            assert compact_native is not None
            sip = compact_native.siphash13
            k0, k1 = self.words

            def siphash(key: bytes) -> tuple[int, int]:
                result: tuple[int, int] = sip(key, k0, k1)
                return result

            return siphash
        unpack = _WORDS.unpack
        blake2b = hashlib.blake2b
        secret = self.secret

        def keyed_blake2b(key: bytes) -> tuple[int, int]:
            first, second = unpack(blake2b(key, digest_size=16, key=secret).digest())
            return int(first), int(second)

        return keyed_blake2b

    def halves(self, key: bytes) -> tuple[int, int]:
        return self.function()(key)

    def __repr__(self) -> str:  # never print the secret
        return f"KeyHash({'SipHash-1-3-128' if self.siphash else 'BLAKE2b-128'})"
