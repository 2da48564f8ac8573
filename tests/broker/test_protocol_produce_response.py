"""kafkalog's Produce response encoder is byte-for-byte kio's, for every version served."""

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from kio.schema.errors import ErrorCode

from kafkalog.protocol.codec import encode_response, response_type
from kafkalog.protocol.produce_response import (
    PartitionProduceResult,
    TopicProduceResult,
    encode_produce_response,
)

TOPIC_ID = uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")
PARTITIONS = [
    PartitionProduceResult(0, 0, 42, -1, 0),
    PartitionProduceResult(1, 0, 7, 1_700_000_000_123, 3),
    PartitionProduceResult(2, 87, -1, -1, -1, [(0, "bad record"), (3, None)], "Invalid record"),
    PartitionProduceResult(3, 45, -1, -1, -1, [], None),
]


def _kio(version):
    cls = response_type(0, version)
    mod = __import__(cls.__module__, fromlist=["x"])
    parts = []
    for p in PARTITIONS:
        values = dict(
            index=p.partition_index,
            error_code=ErrorCode(p.error_code),
            base_offset=p.base_offset,
            log_append_time=None
            if p.log_append_time_ms < 0
            else datetime.fromtimestamp(p.log_append_time_ms / 1000, tz=UTC),
            log_start_offset=p.log_start_offset,
            record_errors=tuple(
                mod.BatchIndexAndErrorMessage(batch_index=i, batch_index_error_message=m)
                for i, m in p.record_errors
            )
            if version >= 8
            else None,
            error_message=p.error_message,
        )
        fields = set(mod.PartitionProduceResponse.__dataclass_fields__)
        parts.append(mod.PartitionProduceResponse(**{k: v for k, v in values.items() if k in fields}))
    key = {"topic_id": TOPIC_ID} if version >= 13 else {"name": "events"}
    topic = mod.TopicProduceResponse(**key, partition_responses=tuple(parts))
    return encode_response(cls(responses=(topic, topic), throttle_time=timedelta(milliseconds=9)))


@pytest.mark.parametrize("version", range(3, 14))
def test_produce_response_matches_kio(version):
    topic = TopicProduceResult("events", TOPIC_ID, PARTITIONS)
    assert encode_produce_response(version, [topic, topic], throttle_time_ms=9) == _kio(version)
