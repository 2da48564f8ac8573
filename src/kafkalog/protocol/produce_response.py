"""Produce response encoding, written here because it answers every produce: kio's generic writer
took about a third of a small produce request's time on the broker (docs/BROKER.md).

Layout (v3-v13): topics: name string (v3-v12) or topic_id uuid (v13+), partitions: index int32,
error_code int16, base_offset int64, log_append_time_ms int64, log_start_offset int64 (v5+),
record_errors array of (batch_index int32, message nullable string) and error_message nullable
string (v8+); then throttle_time_ms int32. From v9 compact encodings and tagged fields (none
written: current_leader and node_endpoints only matter for NOT_LEADER errors, which one node never
has).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from typing import NamedTuple

from kafkalog.protocol.primitives import (
    write_array_len,
    write_compact_nullable_string,
    write_nullable_string,
    write_topic_key,
)

__all__ = ["PartitionProduceResult", "TopicProduceResult", "encode_produce_response"]

FIRST_FLEXIBLE = 9
FIRST_TOPIC_ID = 13

_I32 = struct.Struct(">i")
_PARTITION = struct.Struct(">ihqq")
_I64 = struct.Struct(">q")


class PartitionProduceResult(NamedTuple):
    partition_index: int
    error_code: int
    base_offset: int
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    record_errors: Sequence[tuple[int, str | None]] = ()
    error_message: str | None = None


class TopicProduceResult(NamedTuple):
    name: str | None  # up to v12
    topic_id: uuid.UUID | None  # v13+
    partitions: Sequence[PartitionProduceResult]


def encode_produce_response(
    version: int, topics: Sequence[TopicProduceResult], throttle_time_ms: int = 0
) -> bytes:
    """The response body (no header)."""
    flexible = version >= FIRST_FLEXIBLE
    out = bytearray()
    write_array_len(out, len(topics), flexible)
    for topic in topics:
        write_topic_key(out, topic.name, topic.topic_id, version >= FIRST_TOPIC_ID, flexible)
        partitions = topic.partitions
        write_array_len(out, len(partitions), flexible)
        for p in partitions:
            out += _PARTITION.pack(p.partition_index, p.error_code, p.base_offset, p.log_append_time_ms)
            if version >= 5:
                out += _I64.pack(p.log_start_offset)
            if version >= 8:
                errors = p.record_errors
                write_array_len(out, len(errors), flexible)
                for batch_index, message in errors:
                    out += _I32.pack(batch_index)
                    if flexible:
                        write_compact_nullable_string(out, message)
                        out.append(0)
                    else:
                        write_nullable_string(out, message)
                if flexible:
                    write_compact_nullable_string(out, p.error_message)
                else:
                    write_nullable_string(out, p.error_message)
            if flexible:
                out.append(0)
        if flexible:
            out.append(0)
    out += _I32.pack(throttle_time_ms)
    if flexible:
        out.append(0)
    return bytes(out)
