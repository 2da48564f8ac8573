"""Fetch response framing, written here because it is the hot path and because no codec emits the
shape a zero-copy broker needs: a list of chunks — bytes, a records region, bytes, … — where each
region is sent straight from a segment file (Kafka's ``FileRecords.writeTo`` / the seed's
``FileMessageSet.writeTo``). The sizes of the regions are known up front, so the total size is known
before the first byte goes out.

Layout: throttle_time_ms int32; v7+ error_code int16, session_id int32; topics: name string (v4-v12)
or topic_id uuid (v13+); partitions: partition_index int32, error_code int16, high_watermark int64,
last_stable_offset int64, log_start_offset int64 (v5+), aborted_transactions nullable array of
(producer_id int64, first_offset int64), preferred_read_replica int32 (v11+), records nullable
bytes. From v12 compact encodings and tagged fields: a partition's ``DivergingEpoch`` (tag 0: epoch
int32, end_offset int64) where given, from v16 (KIP-951) its ``CurrentLeader`` (tag 1: leader_id
int32, leader_epoch int32) and the response's ``NodeEndpoints``
(tag 0: node_id int32, host, port int32, rack) where given; no other tagged field is written (their
defaults apply).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from typing import NamedTuple, Protocol, runtime_checkable

from kafkalog.protocol.primitives import (
    write_array_len,
    write_compact_nullable_string,
    write_compact_string,
    write_topic_key,
    write_uvarint,
)

__all__ = [
    "FetchPartitionResult",
    "FetchTopicResult",
    "NodeEndpoint",
    "RecordsRegion",
    "chunks_size",
    "encode_fetch_response",
]

FIRST_FLEXIBLE = 12
FIRST_TOPIC_ID = 13
FIRST_CURRENT_LEADER = 16  # KIP-951: CurrentLeader and NodeEndpoints

_I32 = struct.Struct(">i")
_HEAD_V7 = struct.Struct(">ihi")
_PARTITION = struct.Struct(">ihqq")
_I64 = struct.Struct(">q")
_ABORTED = struct.Struct(">qq")
_CURRENT_LEADER = struct.Struct(">BBiiB")  # tag 1, size 9, leader id, leader epoch, no tagged fields
_DIVERGING_EPOCH = struct.Struct(">BBiqB")  # tag 0, size 13, epoch, end offset, no tagged fields
# Record bytes shorter than this are copied into the metadata chunk; longer ones become a chunk.
_INLINE_MAX = 4096


@runtime_checkable
class RecordsRegion(Protocol):
    """Record bytes that live elsewhere (a file range); the sender knows how to move them."""

    @property
    def size(self) -> int: ...


Records = bytes | bytearray | memoryview | RecordsRegion
Chunk = bytes | RecordsRegion


class FetchPartitionResult(NamedTuple):  # a NamedTuple: built per partition per fetch, ~10x cheaper
    partition_index: int
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted_transactions: Sequence[tuple[int, int]] | None  # (producer_id, first_offset)
    records: Records | None
    preferred_read_replica: int = -1
    current_leader: tuple[int, int] | None = None  # (leader id, leader epoch), v16+
    diverging_epoch: tuple[int, int] | None = None  # (epoch, end offset), v12+


class NodeEndpoint(NamedTuple):
    """A node a partition's ``current_leader`` names (Fetch v16+'s ``NodeEndpoints``)."""

    node_id: int
    host: str
    port: int
    rack: str | None


class FetchTopicResult(NamedTuple):
    name: str | None
    topic_id: uuid.UUID | None
    partitions: Sequence[FetchPartitionResult]


def _records_size(records: Records | None) -> int:
    if records is None:
        return -1
    if isinstance(records, bytes | bytearray | memoryview):
        return len(records)
    return records.size


def encode_fetch_response(
    version: int,
    topics: Sequence[FetchTopicResult],
    *,
    throttle_time_ms: int = 0,
    error_code: int = 0,
    session_id: int = 0,
    node_endpoints: Sequence[NodeEndpoint] = (),
) -> list[Chunk]:
    """The response body (no header) as chunks: ``bytes`` and ``RecordsRegion`` items alternating."""
    flexible = version >= FIRST_FLEXIBLE
    leaders = version >= FIRST_CURRENT_LEADER
    chunks: list[Chunk] = []
    out = bytearray(
        _HEAD_V7.pack(throttle_time_ms, error_code, session_id)
        if version >= 7
        else _I32.pack(throttle_time_ms)
    )
    write_array_len(out, len(topics), flexible)
    for topic in topics:
        write_topic_key(out, topic.name, topic.topic_id, version >= FIRST_TOPIC_ID, flexible)
        partitions = topic.partitions
        write_array_len(out, len(partitions), flexible)
        for p in partitions:
            out += _PARTITION.pack(p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset)
            if version >= 5:
                out += _I64.pack(p.log_start_offset)
            aborted = p.aborted_transactions
            write_array_len(out, None if aborted is None else len(aborted), flexible)
            if aborted is not None:
                for producer_id, first_offset in aborted:
                    out += _ABORTED.pack(producer_id, first_offset)
                    if flexible:
                        out.append(0)
            if version >= 11:
                out += _I32.pack(p.preferred_read_replica)
            records = p.records
            size = _records_size(records)
            if flexible:
                write_uvarint(out, size + 1)
            else:
                out += _I32.pack(size)
            if records is not None and size > 0:
                if isinstance(records, bytes | bytearray | memoryview) and size < _INLINE_MAX:
                    out += records
                else:  # a region, or bytes big enough to be worth a chunk of their own (no copy)
                    chunks.append(bytes(out))
                    chunks.append(bytes(records) if isinstance(records, bytearray | memoryview) else records)
                    out = bytearray()
            if flexible:
                # the partition's tagged fields, in tag order
                diverging = p.diverging_epoch
                leader = p.current_leader if leaders else None
                out.append((diverging is not None) + (leader is not None))
                if diverging is not None:
                    out += _DIVERGING_EPOCH.pack(0, 13, diverging[0], diverging[1], 0)
                if leader is not None:
                    out += _CURRENT_LEADER.pack(1, 9, leader[0], leader[1], 0)
        if flexible:
            out.append(0)  # topic tagged fields
    if leaders and node_endpoints:
        out.append(1)  # one response tagged field: NodeEndpoints
        field = bytearray()
        write_array_len(field, len(node_endpoints), True)
        for node in node_endpoints:
            field += _I32.pack(node.node_id)
            write_compact_string(field, node.host)
            field += _I32.pack(node.port)
            write_compact_nullable_string(field, node.rack)
            field.append(0)
        out.append(0)  # tag 0
        write_uvarint(out, len(field))
        out += field
    elif flexible:
        out.append(0)  # response tagged fields
    chunks.append(bytes(out))
    return chunks


def chunks_size(chunks: Sequence[Chunk]) -> int:
    """The total size of the chunks: the response's size prefix (minus the header)."""
    return sum(len(c) if isinstance(c, bytes) else c.size for c in chunks)
