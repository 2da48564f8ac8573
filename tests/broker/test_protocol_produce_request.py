"""kafkalog's Produce request decoder reads what kio writes, for every version served, and leaves
each partition's records as a view into the request frame (no copy)."""

import io
import uuid
from datetime import timedelta

import pytest
from kio.serial import entity_writer

from kafkalog.errors import InvalidRequestError
from kafkalog.protocol.codec import request_type
from kafkalog.protocol.produce_request import decode_produce_request

TOPIC_ID = uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")


def _encode(version: int, transactional_id: str | None, records: list[bytes | None]) -> bytes:
    cls = request_type(0, version)
    mod = __import__(cls.__module__, fromlist=["x"])
    parts = tuple(mod.PartitionProduceData(index=i, records=r) for i, r in enumerate(records))
    topic = (
        mod.TopicProduceData(topic_id=TOPIC_ID, partition_data=parts)
        if version >= 13
        else mod.TopicProduceData(name="events", partition_data=parts)
    )
    request = cls(
        transactional_id=transactional_id, acks=-1, timeout=timedelta(milliseconds=1500), topic_data=(topic,)
    )
    out = io.BytesIO()
    entity_writer(cls)(out, request)
    return out.getvalue()


@pytest.mark.parametrize("version", range(3, 14))
@pytest.mark.parametrize("transactional_id", [None, "txn-1"])
def test_decodes_what_kio_encodes(version, transactional_id):
    records = [b"\x00" * 70, None, b"abc" * 30]
    body = _encode(version, transactional_id, records)
    frame = memoryview(b"HEADER" + body)
    decoded = decode_produce_request(frame, 6, version)
    assert decoded.transactional_id == transactional_id
    assert (decoded.acks, decoded.timeout_ms) == (-1, 1500)
    (topic,) = decoded.topics
    if version >= 13:
        assert (topic.name, topic.topic_id) == (None, TOPIC_ID)
    else:
        assert (topic.name, topic.topic_id) == ("events", None)
    assert [p.partition_index for p in topic.partitions] == [0, 1, 2]
    assert [None if p.records is None else bytes(p.records) for p in topic.partitions] == records
    view = topic.partitions[0].records
    assert isinstance(view, memoryview) and view.obj is frame.obj  # a view into the frame, not a copy


@pytest.mark.parametrize("version", [3, 9, 13])
def test_truncated_or_lying_requests_are_refused(version):
    body = _encode(version, None, [b"x" * 100])
    frame = memoryview(body)
    for cut in (1, 5, len(body) // 2, len(body) - 1):
        with pytest.raises(InvalidRequestError):
            decode_produce_request(frame[:cut], 0, version)
    # an array length far beyond what the frame can hold is refused before anything is sized by it
    lying = bytearray(body)
    offset = 2 + 2 + 4 if version < 9 else 1 + 2 + 4
    if version < 9:
        lying[offset : offset + 4] = (2**31 - 1).to_bytes(4, "big")
    else:
        lying[offset] = 0xFF
        lying[offset + 1 : offset + 1] = b"\xff\xff\xff\x07"
    with pytest.raises(InvalidRequestError):
        decode_produce_request(memoryview(bytes(lying)), 0, version)
