"""kafkalog's Fetch response framing is byte-for-byte what kio and kafka-python encode, for every
version served (non-flexible v4-v11, flexible v12+, topic ids from v13), with records given as bytes
or as a region sent separately."""

import io
import uuid
from datetime import timedelta

import pytest
from kafka.protocol.consumer.fetch import FetchResponse as KpFetchResponse
from kio.schema.errors import ErrorCode

from kafkalog.protocol.codec import encode_response, response_type
from kafkalog.protocol.fetch_response import (
    FetchPartitionResult,
    FetchTopicResult,
    NodeEndpoint,
    chunks_size,
    encode_fetch_response,
)
from kafkalog.records.memory import MemoryRecordsBuilder
from kafkalog.records.types import CompressionType, TimestampType


def _batch(n: int, base: int) -> bytes:
    builder = MemoryRecordsBuilder(2, CompressionType.NONE, TimestampType.CREATE_TIME, base)
    for i in range(n):
        builder.append(1000 + i, b"key-%d" % i, b"value-%d" % i * 5)
    return builder.build().to_bytes()


class _Region:
    """Stands for a file region: only the size goes into the framing."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.size = len(data)


TOPIC_IDS = [
    uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"),
    uuid.UUID("11111111-2222-3333-4444-555555555555"),
]
RECORDS = [_batch(3, 0), _batch(2, 40), b""]
ABORTED = [None, [(7, 1), (9, 3)], []]


def _ours(version: int, as_region: bool) -> bytes:
    topics = []
    for t, name in enumerate(["alpha", "beta"]):
        parts = []
        for p in range(3):
            data = RECORDS[p]
            records = _Region(data) if as_region and data else data
            parts.append(FetchPartitionResult(p, 0 if p != 2 else 1, 100 + p, 90 + p, p, ABORTED[p], records))
        topics.append(FetchTopicResult(name, TOPIC_IDS[t], parts))
    chunks = encode_fetch_response(version, topics, throttle_time_ms=5, error_code=0, session_id=0)
    joined = b"".join(c if isinstance(c, bytes) else c.data for c in chunks)
    assert chunks_size(chunks) == len(joined)
    if as_region:
        assert any(not isinstance(c, bytes) for c in chunks)
    return joined


def _kio(version: int) -> bytes:
    cls = response_type(1, version)
    mod = __import__(cls.__module__, fromlist=["x"])
    topics = []
    for t, name in enumerate(["alpha", "beta"]):
        parts = []
        for p in range(3):
            aborted = ABORTED[p]
            values = dict(
                partition_index=p,
                error_code=ErrorCode(0 if p != 2 else 1),
                high_watermark=100 + p,
                last_stable_offset=90 + p,
                log_start_offset=p,
                aborted_transactions=None
                if aborted is None
                else tuple(mod.AbortedTransaction(producer_id=a, first_offset=b) for a, b in aborted),
                records=RECORDS[p],
            )
            if version >= 11:
                values["preferred_read_replica"] = -1
            if version < 5:
                values.pop("log_start_offset")
            parts.append(mod.PartitionData(**values))
        topic_key = {"topic_id": TOPIC_IDS[t]} if version >= 13 else {"topic": name}
        topics.append(mod.FetchableTopicResponse(**topic_key, partitions=tuple(parts)))
    values = dict(throttle_time=timedelta(milliseconds=5), responses=tuple(topics))
    if version >= 7:
        values.update(error_code=ErrorCode.none, session_id=0)
    return encode_response(cls(**values))


def _kafka_python(version: int) -> bytes:
    topic_cls = KpFetchResponse.FetchableTopicResponse
    partition_cls = topic_cls.PartitionData
    aborted_cls = partition_cls.AbortedTransaction
    topics = []
    for t, name in enumerate(["alpha", "beta"]):
        parts = []
        for p in range(3):
            aborted = ABORTED[p]
            parts.append(
                partition_cls(
                    version=version,
                    partition_index=p,
                    error_code=0 if p != 2 else 1,
                    high_watermark=100 + p,
                    last_stable_offset=90 + p,
                    log_start_offset=p,
                    aborted_transactions=None
                    if aborted is None
                    else [aborted_cls(version=version, producer_id=a, first_offset=b) for a, b in aborted],
                    preferred_read_replica=-1,
                    records=RECORDS[p],
                )
            )
        topics.append(topic_cls(version=version, topic=name, topic_id=TOPIC_IDS[t], partitions=parts))
    response = KpFetchResponse(
        version=version, throttle_time_ms=5, error_code=0, session_id=0, responses=topics
    )
    return bytes(response.encode(version=version))


@pytest.mark.parametrize("version", range(4, 19))
@pytest.mark.parametrize("as_region", [False, True])
def test_fetch_response_matches_kio(version, as_region):
    assert _ours(version, as_region) == _kio(version)


@pytest.mark.parametrize("version", range(4, 19))
def test_fetch_response_matches_kafka_python(version):
    assert _ours(version, False) == _kafka_python(version)


def test_kafka_python_decodes_ours():
    decoded = KpFetchResponse.decode(io.BytesIO(_ours(12, True)).getvalue(), version=12)
    topic = decoded.responses[1]
    assert topic.topic == "beta"
    assert [p.high_watermark for p in topic.partitions] == [100, 101, 102]
    assert bytes(topic.partitions[1].records) == RECORDS[1]


@pytest.mark.parametrize("version", range(12, 19))
@pytest.mark.parametrize("rack", [None, "r1"])
def test_current_leader_and_node_endpoints_match_kio(version, rack):
    """KIP-951 (v16+): a fenced partition names its current leader, and the response the leader's
    endpoint -- as tagged fields kio encodes the same way; before v16 neither is written."""
    fenced = FetchPartitionResult(0, ErrorCode.fenced_leader_epoch, -1, -1, -1, None, b"",
                                  current_leader=(3, 7))
    served = FetchPartitionResult(1, 0, 10, 10, 0, None, RECORDS[0])
    chunks = encode_fetch_response(version, [FetchTopicResult("alpha", TOPIC_IDS[0], [fenced, served])],
                                   node_endpoints=[NodeEndpoint(3, "broker-3.example", 9092, rack)])
    ours = b"".join(c for c in chunks if isinstance(c, bytes))
    cls = response_type(1, version)
    mod = __import__(cls.__module__, fromlist=["x"])
    common = dict(high_watermark=-1, last_stable_offset=-1, log_start_offset=-1, aborted_transactions=None,
                  preferred_read_replica=-1, records=b"")
    parts = [
        mod.PartitionData(partition_index=0, error_code=ErrorCode.fenced_leader_epoch, **common,
                          **({"current_leader": mod.LeaderIdAndEpoch(leader_id=3, leader_epoch=7)}
                             if version >= 16 else {})),
        mod.PartitionData(partition_index=1, error_code=ErrorCode.none, high_watermark=10,
                          last_stable_offset=10, log_start_offset=0, aborted_transactions=None,
                          preferred_read_replica=-1, records=RECORDS[0]),
    ]
    topic_key = {"topic_id": TOPIC_IDS[0]} if version >= 13 else {"topic": "alpha"}
    values = dict(throttle_time=timedelta(0), error_code=ErrorCode.none, session_id=0,
                  responses=(mod.FetchableTopicResponse(**topic_key, partitions=tuple(parts)),))
    if version >= 16:
        endpoint = mod.NodeEndpoint(node_id=3, host="broker-3.example", port=9092, rack=rack)
        values["node_endpoints"] = (endpoint,)
    assert ours == encode_response(cls(**values))
