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

import functools
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from kafkalog.errors import CorruptRecordError, InvalidRequestError
from kafkalog.protocol.primitives import Reader, write_nullable_string, write_string

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
_T = TypeVar("_T")


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


def _versioned(version: int) -> bytearray:
    return bytearray(struct.pack(">h", version))


def encode_offset_commit_key(key: OffsetCommitKey) -> bytes:
    out = _versioned(OFFSET_COMMIT_KEY_VERSION)
    write_string(out, key.group)
    write_string(out, key.topic)
    out += struct.pack(">i", key.partition)
    return bytes(out)


def encode_offset_commit_value(value: OffsetCommitValue) -> bytes:
    """v3, or v1 when the commit has an expire timestamp (as Kafka chooses)."""
    if value.expire_timestamp >= 0:
        out = _versioned(_OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY)
        out += struct.pack(">q", value.offset)
        write_string(out, value.metadata)
        out += struct.pack(">qq", value.commit_timestamp, value.expire_timestamp)
        return bytes(out)
    out = _versioned(_OFFSET_COMMIT_VALUE_VERSION)
    out += struct.pack(">qi", value.offset, value.leader_epoch)
    write_string(out, value.metadata)
    out += struct.pack(">q", value.commit_timestamp)
    return bytes(out)


def encode_group_metadata_key(group: str) -> bytes:
    out = _versioned(GROUP_METADATA_KEY_VERSION)
    write_string(out, group)
    return bytes(out)


def encode_group_metadata_value(value: GroupMetadataValue) -> bytes:
    out = _versioned(_GROUP_METADATA_VALUE_VERSION)
    write_string(out, value.protocol_type)
    out += struct.pack(">i", value.generation)
    write_nullable_string(out, value.protocol)
    write_nullable_string(out, value.leader)
    out += struct.pack(">qi", value.current_state_timestamp, len(value.members))
    for m in value.members:
        write_string(out, m.member_id)
        write_nullable_string(out, m.group_instance_id)
        write_string(out, m.client_id)
        write_string(out, m.client_host)
        out += struct.pack(">ii", m.rebalance_timeout, m.session_timeout)
        out += struct.pack(">i", len(m.subscription)) + m.subscription
        out += struct.pack(">i", len(m.assignment)) + m.assignment
    return bytes(out)


# --- reading (untrusted bytes: protocol's bounds-checked Reader; its errors become CorruptRecordError) -


class _Fields:
    """The version-dependent field readers over ``protocol.primitives.Reader``: flexible versions
    (4+) use compact lengths and end each struct with tagged fields."""

    __slots__ = ("flexible", "r", "version", "what")

    def __init__(self, data: bytes | memoryview, what: str, highest_version: int | None) -> None:
        self.r = Reader(memoryview(data))
        self.what = what
        self.flexible = False
        self.version = -1
        if highest_version is not None:
            version = self.r.int16()
            if not 0 <= version <= highest_version:
                raise CorruptRecordError(f"{what}: unknown version {version}")
            self.version = version
            self.flexible = version >= _FLEXIBLE_FROM

    def nullable_string(self) -> str | None:
        return self.r.compact_nullable_string() if self.flexible else self.r.nullable_string()

    def string(self) -> str:
        s = self.nullable_string()
        if s is None:
            raise CorruptRecordError(f"{self.what}: null where a string is required at {self.r.pos}")
        return s

    def bytes_(self) -> bytes:
        n = self.r.uvarint() - 1 if self.flexible else self.r.int32()
        if n < 0:
            raise CorruptRecordError(f"{self.what}: null where bytes are required at {self.r.pos}")
        return bytes(self.r.bytes_view(n))

    def array_length(self) -> int:
        n = self.r.array_len(self.flexible)
        if n < 0:
            raise CorruptRecordError(f"{self.what}: null array at {self.r.pos}")
        return n

    def tagged_fields(self) -> None:
        if self.flexible:
            self.r.skip_tagged_fields()

    def done(self) -> None:
        if self.r.remaining():
            raise CorruptRecordError(f"{self.what}: {self.r.remaining()} bytes after the last field")


def _corrupt_on_truncation(fn: Callable[[bytes | memoryview], _T]) -> Callable[[bytes | memoryview], _T]:
    """The protocol reader says a *request* was malformed; here the bytes are a stored record."""

    @functools.wraps(fn)
    def decode(data: bytes | memoryview) -> _T:
        try:
            return fn(data)
        except InvalidRequestError as e:
            raise CorruptRecordError(f"{fn.__name__}: {e}") from None

    return decode


@_corrupt_on_truncation
def decode_key(data: bytes | memoryview) -> OffsetCommitKey | GroupMetadataKey:
    """The key of a ``__consumer_offsets`` record. CorruptRecordError if it is not one of Kafka's
    classic group keys (the KIP-848 record types, versions 3 and up, are not written here)."""
    f = _Fields(data, "__consumer_offsets key", None)
    version = f.r.int16()
    if version in (0, 1):
        key: OffsetCommitKey | GroupMetadataKey = OffsetCommitKey(f.string(), f.string(), f.r.int32())
    elif version == GROUP_METADATA_KEY_VERSION:
        key = GroupMetadataKey(f.string())
    else:
        raise CorruptRecordError(f"__consumer_offsets key: unknown record type {version}")
    f.done()
    return key


@_corrupt_on_truncation
def decode_offset_commit_value(data: bytes | memoryview) -> OffsetCommitValue:
    f = _Fields(data, "OffsetCommitValue", _MAX_VALUE_VERSION)
    offset = f.r.int64()
    leader_epoch = f.r.int32() if f.version >= 3 else -1
    metadata = f.string()
    commit_timestamp = f.r.int64()
    expire_timestamp = f.r.int64() if f.version == 1 else -1
    f.tagged_fields()
    f.done()
    return OffsetCommitValue(offset, leader_epoch, metadata, commit_timestamp, expire_timestamp)


@_corrupt_on_truncation
def decode_group_metadata_value(data: bytes | memoryview) -> GroupMetadataValue:
    f = _Fields(data, "GroupMetadataValue", _MAX_VALUE_VERSION)
    version = f.version
    protocol_type = f.string()
    generation = f.r.int32()
    protocol = f.nullable_string()
    leader = f.nullable_string()
    current_state_timestamp = f.r.int64() if version >= 2 else -1
    members = []
    for _ in range(f.array_length()):
        member_id = f.string()
        instance_id = f.nullable_string() if version >= 3 else None
        client_id = f.string()
        client_host = f.string()
        rebalance_timeout = f.r.int32() if version >= 1 else 0
        session_timeout = f.r.int32()
        if version == 0:
            rebalance_timeout = session_timeout  # v0 had one timeout for both (Kafka reads it so)
        subscription = f.bytes_()
        assignment = f.bytes_()
        f.tagged_fields()
        members.append(MemberMetadataValue(member_id, instance_id, client_id, client_host,
                                           rebalance_timeout, session_timeout, subscription, assignment))
    f.tagged_fields()
    f.done()
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
