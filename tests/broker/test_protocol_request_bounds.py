"""Request bodies are checked against their frame before kio decodes them: a forged array count
(kio's native reader would allocate by it and abort the process) or a null where the schema allows
none is one InvalidRequestError, as Kafka's parsers refuse them; every valid body passes and ends
where kio's reader ends it."""

from __future__ import annotations

import dataclasses
import io
import random
import struct
import subprocess
import sys
import types
import typing
import uuid
from datetime import timedelta
from typing import Any, Union

import pytest
from kio.serial import entity_reader, entity_writer

from kafkalog.broker.handlers import load_handlers
from kafkalog.errors import InvalidRequestError
from kafkalog.protocol.codec import decode_request, request_type
from kafkalog.protocol.request_bounds import check_request_body

SERVED = [
    (key, version)
    for key, handler in sorted(load_handlers().items())
    if handler.decode is None  # Produce has its own parser
    for version in range(handler.min_version, handler.max_version + 1)
]


def _value(rng: random.Random, kafka_type: str | None, hint: Any) -> Any:
    """A random valid value for one field of a kio request class."""
    if typing.get_origin(hint) in (Union, types.UnionType):
        inner = next(a for a in typing.get_args(hint) if a is not type(None))
        if rng.random() < 0.3:
            return None
        hint = inner
    if typing.get_origin(hint) is tuple:
        element = typing.get_args(hint)[0]
        return tuple(_value(rng, kafka_type, element) for _ in range(rng.choice([0, 1, 2, 3])))
    if kafka_type is None:
        return _entity(rng, hint)
    if kafka_type in ("string",):
        return "".join(rng.choice("abcé-_.") for _ in range(rng.choice([0, 1, 5, 40])))
    if kafka_type in ("bytes", "records"):
        return bytes(rng.getrandbits(8) for _ in range(rng.choice([0, 1, 7, 200])))
    if kafka_type == "bool":
        return rng.random() < 0.5
    if kafka_type == "uuid":
        return uuid.UUID(int=rng.getrandbits(128))
    if kafka_type.startswith("timedelta"):
        return timedelta(milliseconds=rng.randrange(0, 100_000))
    if kafka_type == "float64":
        return rng.random()
    bits = {"int8": 7, "int16": 15, "uint16": 16, "int32": 31, "int64": 63}[kafka_type]
    return hint(rng.randrange(0, 2**bits))


def _entity(rng: random.Random, cls: type[Any]) -> Any:
    hints = typing.get_type_hints(cls)
    return cls(
        **{f.name: _value(rng, f.metadata.get("kafka_type"), hints[f.name]) for f in dataclasses.fields(cls)}
    )


def _encode(entity: Any) -> bytes:
    out = io.BytesIO()
    entity_writer(type(entity))(out, entity)
    return out.getvalue()


@pytest.mark.parametrize(("api_key", "version"), SERVED)
def test_valid_bodies_pass_and_end_where_kio_ends_them(api_key: int, version: int) -> None:
    cls = request_type(api_key, version)
    rng = random.Random(api_key * 100 + version)
    for _ in range(25):
        body = _encode(_entity(rng, cls))
        frame = memoryview(b"HDR" + body)
        checked = check_request_body(cls, frame, 3)
        _entity_read, size = entity_reader(cls)(frame, 3)
        assert checked.frame is frame and checked.end == 3 + size == len(frame)
        decode_request(api_key, version, frame, 3)


def test_a_forged_compact_array_count_is_refused_before_kio_allocates() -> None:
    # Metadata v12: topics as a compact array announcing 2^32 - 2 elements in a 20-byte body.
    body = memoryview(b"\xff\xff\xff\xff\x0f" + bytes(15))
    with pytest.raises(
        InvalidRequestError, match=r"topics: array of 4294967294 elements with only 15 bytes left"
    ):
        decode_request(3, 12, body, 0)


def test_a_null_where_the_schema_allows_none_is_refused() -> None:
    # ListOffsets v1: replica_id, then topics, a non-nullable array, as null (-1).
    body = memoryview(struct.pack(">ii", -1, -1))
    with pytest.raises(InvalidRequestError, match="topics: non-nullable array serialized as null"):
        decode_request(2, 1, body, 0)
    # Metadata v1's topics may be null (all topics): accepted.
    assert decode_request(3, 1, memoryview(struct.pack(">i", -1)), 0).topics is None


def test_a_known_tagged_field_is_checked_inside_its_size() -> None:
    # Fetch v12: cluster_id (tag 0, a compact string) announcing 50 bytes inside a 3-byte tag.
    cls = request_type(1, 12)
    body = bytearray(_encode(dataclasses.replace(_entity(random.Random(7), cls), cluster_id=None)))
    assert body[-1] == 0  # no tagged field: the top-level tagged section, last, is an empty count
    tagged_at = len(body) - 1
    body[tagged_at:] = b"\x01\x00\x03\x33ab"  # one tag: 0, size 3, compact length 50 - 1
    with pytest.raises(InvalidRequestError, match="cluster_id: 50 bytes announced, 2 left"):
        check_request_body(cls, memoryview(bytes(body)), 0)


def test_tagged_fields_the_schema_does_not_know_are_skipped_as_kafka_skips_them() -> None:
    """A newer client may send tags this version's schema lacks: Kafka's parsers skip them, kio's
    would refuse the request, so they are dropped before kio reads it, in every struct's section."""
    cls = request_type(1, 12)  # Fetch v12: the request knows tag 0 (cluster_id) only
    entity = _entity(random.Random(5), cls)
    entity = dataclasses.replace(entity, cluster_id="c1", topics=entity.topics[:1] or entity.topics)
    body = _encode(entity)
    assert body[-1] != 0  # the top-level section ends the body: count 1, tag 0, size, "c1"
    section = body.rindex(b"\x01\x00\x03\x03c1")
    forged = body[:section] + b"\x03\x00\x03\x03c1" + b"\x05\x02zz" + b"\x7f\x00"
    with pytest.raises(Exception, match=r"(?i)tag"):
        entity_reader(cls)(memoryview(forged), 0)  # kio alone refuses it
    checked = check_request_body(cls, memoryview(forged), 0)
    assert checked.unknown_tags == 2 and bytes(checked.frame) == body
    assert decode_request(1, 12, memoryview(forged), 0) == entity
    # Metadata v12, one topic whose own section carries an unknown tag 9 (one byte, "z").
    topic_id = uuid.uuid4()
    known = b"\x02" + topic_id.bytes + b"\x02a" + b"\x00" + b"\x01\x00" + b"\x00"
    nested = b"\x02" + topic_id.bytes + b"\x02a" + b"\x01\x09\x01z" + b"\x01\x00" + b"\x00"
    request = decode_request(3, 12, memoryview(nested), 0)
    assert request == decode_request(3, 12, memoryview(known), 0)
    assert [(t.topic_id, t.name) for t in request.topics] == [(topic_id, "a")]


_FUZZ_CHILD = r"""
import random, sys
from kafkalog.errors import InvalidRequestError
from kafkalog.protocol.codec import decode_request
pairs = [tuple(map(int, p.split(":"))) for p in sys.argv[1].split(",")]
rng = random.Random(11)
blobs = [b"\xff\xff\xff\xff\x0f", b"\x7f\xff\xff\xff", b"\xff\xff\xff\x7f", b"\x80\x80\x80\x40", b"\xff\xff"]
for key, version in pairs:
    for pre in range(12):
        for blob in blobs:
            for body in (bytes(pre) + blob + bytes(16), bytes(rng.getrandbits(8) for _ in range(pre + 20))):
                try:
                    decode_request(key, version, memoryview(body), 0)
                except InvalidRequestError:
                    pass
print("survived")
"""


def test_forged_lengths_in_every_served_request_never_kill_the_process() -> None:
    """Counts and lengths of every size, at every early position, of every served request: one
    InvalidRequestError each at worst, in a child process so that an abort shows as a failure."""
    pairs = ",".join(f"{k}:{v}" for k, v in SERVED)
    result = subprocess.run(
        [sys.executable, "-c", _FUZZ_CHILD, pairs], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0 and "survived" in result.stdout, result.stderr[-2000:]
