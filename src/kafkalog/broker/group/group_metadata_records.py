"""The records of ``__consumer_offsets``, in Kafka's own schemas (its ``OffsetCommitKey``/``Value`` and
``GroupMetadataKey``/``Value`` messages), so Apache Kafka's tools read what kafkalog writes.

A record's key and value each start with an int16 version. The key's version says what the record
is: 0 or 1 an offset commit (group, topic, partition), 2 a group's metadata (group). Kafka 4 writes
key version 1 for commits and 2 for groups, ``OffsetCommitValue`` v3 (v1 when the commit carries an
expire timestamp) and ``GroupMetadataValue`` v3 — the highest non-flexible versions — so that is what
``encode_*`` writes; ``decode_*`` reads every version Kafka defines (0-4, flexible from 4). A null
value is a tombstone: the offset or the group was deleted.

Layouts (non-flexible: string = int16 length + UTF-8, nullable -1; bytes = int32 length + bytes;
flexible v4: compact lengths as unsigned varint length+1, and a tagged-field section after each
struct):

    OffsetCommitKey      group string, topic string, partition int32
    OffsetCommitValue    offset int64, [v3+ leaderEpoch int32], metadata string,
                         commitTimestamp int64, [v1 only expireTimestamp int64]
    GroupMetadataKey     group string
    GroupMetadataValue   protocolType string, generation int32, protocol string?, leader string?,
                         [v2+ currentStateTimestamp int64], members [MemberMetadata]
    MemberMetadata       memberId string, [v3+ groupInstanceId string?], clientId string,
                         clientHost string, [v1+ rebalanceTimeout int32], sessionTimeout int32,
                         subscription bytes, assignment bytes
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kafkalog.errors import CorruptRecordError

__all__ = [
    "GROUP_METADATA_KEY_VERSION",
    "OFFSET_COMMIT_KEY_VERSION",
    "GroupMetadataKey",
    "GroupMetadataValue",
    "MemberMetadataValue",
    "OffsetCommitKey",
    "OffsetCommitValue",
    "decode_group_metadata_value",
    "decode_key",
    "decode_offset_commit_value",
    "decode_value",
    "encode_group_metadata_key",
    "encode_group_metadata_value",
    "encode_offset_commit_key",
    "encode_offset_commit_value",
]

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
_OFFSET_COMMIT_VALUE_VERSION = 3
_OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY = 1
_GROUP_METADATA_VALUE_VERSION = 3
_MAX_VALUE_VERSION = 4
_FLEXIBLE_FROM = 4


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class MemberMetadataValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[MemberMetadataValue, ...] = ()


# --- writing ---------------------------------------------------------------------------------------


class _Writer:
    __slots__ = ("out",)

    def __init__(self, version: int) -> None:
        self.out = bytearray(struct.pack(">h", version))

    def int16(self, v: int) -> None:
        self.out += struct.pack(">h", v)

    def int32(self, v: int) -> None:
        self.out += struct.pack(">i", v)

    def int64(self, v: int) -> None:
        self.out += struct.pack(">q", v)

    def string(self, v: str | None) -> None:
        if v is None:
            self.int16(-1)
            return
        data = v.encode()
        if len(data) > 0x7FFF:
            raise ValueError(f"string of {len(data)} bytes does not fit an int16 length")
        self.int16(len(data))
        self.out += data

    def bytes_(self, v: bytes) -> None:
        self.int32(len(v))
        self.out += v


def encode_offset_commit_key(key: OffsetCommitKey) -> bytes:
    w = _Writer(OFFSET_COMMIT_KEY_VERSION)
    w.string(key.group)
    w.string(key.topic)
    w.int32(key.partition)
    return bytes(w.out)


def encode_offset_commit_value(value: OffsetCommitValue) -> bytes:
    """v3, or v1 when the commit has an expire timestamp (as Kafka chooses)."""
    if value.expire_timestamp >= 0:
        w = _Writer(_OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY)
        w.int64(value.offset)
        w.string(value.metadata)
        w.int64(value.commit_timestamp)
        w.int64(value.expire_timestamp)
        return bytes(w.out)
    w = _Writer(_OFFSET_COMMIT_VALUE_VERSION)
    w.int64(value.offset)
    w.int32(value.leader_epoch)
    w.string(value.metadata)
    w.int64(value.commit_timestamp)
    return bytes(w.out)


def encode_group_metadata_key(group: str) -> bytes:
    w = _Writer(GROUP_METADATA_KEY_VERSION)
    w.string(group)
    return bytes(w.out)


def encode_group_metadata_value(value: GroupMetadataValue) -> bytes:
    w = _Writer(_GROUP_METADATA_VALUE_VERSION)
    w.string(value.protocol_type)
    w.int32(value.generation)
    w.string(value.protocol)
    w.string(value.leader)
    w.int64(value.current_state_timestamp)
    w.int32(len(value.members))
    for m in value.members:
        w.string(m.member_id)
        w.string(m.group_instance_id)
        w.string(m.client_id)
        w.string(m.client_host)
        w.int32(m.rebalance_timeout)
        w.int32(m.session_timeout)
        w.bytes_(m.subscription)
        w.bytes_(m.assignment)
    return bytes(w.out)


# --- reading (untrusted bytes: every length is checked against what is there) ---------------------


class _Reader:
    __slots__ = ("buf", "flexible", "pos", "what")

    def __init__(self, buf: bytes | memoryview, what: str) -> None:
        self.buf = bytes(buf)
        self.pos = 0
        self.what = what
        self.flexible = False

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise CorruptRecordError(
                f"{self.what}: needs {n} bytes at position {self.pos}, has {len(self.buf) - self.pos}"
            )
        chunk = self.buf[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def int16(self) -> int:
        return int(struct.unpack(">h", self._take(2))[0])

    def int32(self) -> int:
        return int(struct.unpack(">i", self._take(4))[0])

    def int64(self) -> int:
        return int(struct.unpack(">q", self._take(8))[0])

    def uvarint(self) -> int:
        result = shift = 0
        while True:
            b = self._take(1)[0]
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 28:
                raise CorruptRecordError(f"{self.what}: varint longer than 5 bytes at {self.pos}")

    def _length(self, fixed: int) -> int:
        return self.uvarint() - 1 if self.flexible else (self.int16() if fixed == 2 else self.int32())

    def nullable_string(self) -> str | None:
        n = self._length(2)
        if n < 0:
            return None
        try:
            return self._take(n).decode()
        except UnicodeDecodeError as e:
            raise CorruptRecordError(f"{self.what}: string is not UTF-8 at {self.pos - n}") from e

    def string(self) -> str:
        s = self.nullable_string()
        if s is None:
            raise CorruptRecordError(f"{self.what}: null where a string is required at {self.pos}")
        return s

    def bytes_(self) -> bytes:
        n = self._length(4)
        if n < 0:
            raise CorruptRecordError(f"{self.what}: null where bytes are required at {self.pos}")
        return self._take(n)

    def array_length(self) -> int:
        n = self._length(4)
        # each element takes at least one byte: a longer count cannot be honest
        if n < 0 or n > len(self.buf) - self.pos:
            raise CorruptRecordError(f"{self.what}: array of {n} elements at {self.pos} does not fit")
        return n

    def tagged_fields(self) -> None:
        if not self.flexible:
            return
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self._take(self.uvarint())

    def version(self, highest: int) -> int:
        version = self.int16()
        if not 0 <= version <= highest:
            raise CorruptRecordError(f"{self.what}: unknown version {version}")
        self.flexible = version >= _FLEXIBLE_FROM
        return version

    def done(self) -> None:
        if self.pos != len(self.buf):
            raise CorruptRecordError(f"{self.what}: {len(self.buf) - self.pos} bytes after the last field")


def decode_key(data: bytes | memoryview) -> OffsetCommitKey | GroupMetadataKey:
    """The key of a ``__consumer_offsets`` record. CorruptRecordError if it is not one of Kafka's
    classic group keys (the KIP-848 record types, versions 3 and up, are not written here)."""
    r = _Reader(data, "__consumer_offsets key")
    version = r.int16()
    if version in (0, 1):
        key: OffsetCommitKey | GroupMetadataKey = OffsetCommitKey(r.string(), r.string(), r.int32())
    elif version == GROUP_METADATA_KEY_VERSION:
        key = GroupMetadataKey(r.string())
    else:
        raise CorruptRecordError(f"__consumer_offsets key: unknown record type {version}")
    r.done()
    return key


def decode_offset_commit_value(data: bytes | memoryview) -> OffsetCommitValue:
    r = _Reader(data, "OffsetCommitValue")
    version = r.version(_MAX_VALUE_VERSION)
    offset = r.int64()
    leader_epoch = r.int32() if version >= 3 else -1
    metadata = r.string()
    commit_timestamp = r.int64()
    expire_timestamp = r.int64() if version == 1 else -1
    r.tagged_fields()
    r.done()
    return OffsetCommitValue(offset, leader_epoch, metadata, commit_timestamp, expire_timestamp)


def decode_group_metadata_value(data: bytes | memoryview) -> GroupMetadataValue:
    r = _Reader(data, "GroupMetadataValue")
    version = r.version(_MAX_VALUE_VERSION)
    protocol_type = r.string()
    generation = r.int32()
    protocol = r.nullable_string()
    leader = r.nullable_string()
    current_state_timestamp = r.int64() if version >= 2 else -1
    members = []
    for _ in range(r.array_length()):
        member_id = r.string()
        instance_id = r.nullable_string() if version >= 3 else None
        client_id = r.string()
        client_host = r.string()
        session_timeout = rebalance_timeout = 0
        if version >= 1:
            rebalance_timeout = r.int32()
        session_timeout = r.int32()
        if version == 0:
            rebalance_timeout = session_timeout  # v0 had one timeout for both (Kafka reads it so)
        subscription = r.bytes_()
        assignment = r.bytes_()
        r.tagged_fields()
        members.append(MemberMetadataValue(member_id, instance_id, client_id, client_host,
                                           rebalance_timeout, session_timeout, subscription, assignment))
    r.tagged_fields()
    r.done()
    return GroupMetadataValue(protocol_type, generation, protocol, leader, current_state_timestamp,
                              tuple(members))


def decode_value(key: OffsetCommitKey | GroupMetadataKey,
                 data: bytes | memoryview | None) -> OffsetCommitValue | GroupMetadataValue | None:
    """The value that goes with ``key``; None for a tombstone."""
    if data is None:
        return None
    if isinstance(key, OffsetCommitKey):
        return decode_offset_commit_value(data)
    return decode_group_metadata_value(data)
