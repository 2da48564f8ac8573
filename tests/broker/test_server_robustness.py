"""Bad input costs one connection and nothing else; ApiVersions answers any version; idle
connections are closed after connections.max.idle.ms."""

import struct
import time

import pytest
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsV0
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from tests.broker import _raw


def _metadata_works(bootstrap):
    cls, _ = _raw.request_class(3, 12)
    with _raw.connect(bootstrap) as sock:
        response = _raw.request(
            sock, cls(topics=(), allow_auto_topic_creation=False, include_topic_authorized_operations=False)
        )
    assert len(response.brokers) == 1


@pytest.mark.parametrize(
    "payload",
    [
        struct.pack(">i", 0x7FFFFFFF),  # larger than socket.request.max.bytes
        struct.pack(">i", -17),  # negative
        struct.pack(">i", 0),  # empty
        struct.pack(">i", 10) + struct.pack(">hhih", 999, 0, 1, -1),  # unknown API key
        struct.pack(">i", 10) + struct.pack(">hhih", 0, 2, 1, -1),  # Produce v2: not served
        struct.pack(">i", 12) + struct.pack(">hhih", 3, 12, 1, -1) + b"\xff\xff",  # Metadata: bad body
        struct.pack(">i", 3) + b"\x00\x03\x00",  # a header cut short
    ],
)
def test_bad_frames_close_only_that_connection(kafkalog_broker, payload):
    bootstrap = kafkalog_broker.bootstrap_servers
    with _raw.connect(bootstrap) as sock:
        sock.sendall(payload)
        assert _raw.is_closed(sock)
    _metadata_works(bootstrap)


def test_truncated_request_then_close(kafkalog_broker):
    bootstrap = kafkalog_broker.bootstrap_servers
    with _raw.connect(bootstrap) as sock:
        sock.sendall(struct.pack(">i", 1000) + b"\x00\x03")
    _metadata_works(bootstrap)


def test_api_versions_unsupported_version_gets_error_35_in_v0_body(kafkalog_broker):
    with _raw.connect(kafkalog_broker.bootstrap_servers) as sock:
        _raw.send_frame(sock, _raw.header(18, 9, 77) + b"\x00\x00\x00")
        frame = _raw.recv_frame(sock)
        assert struct.unpack_from(">i", frame)[0] == 77
        response, _ = entity_reader(ApiVersionsV0)(frame, 4)
        assert response.error_code == ErrorCode.unsupported_version
        served = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
        assert served[18] == (0, 4) and served[0][1] >= 9 and 71 not in served
        # the connection stays usable: v3 now
        cls, _ = _raw.request_class(18, 3)
        ok = _raw.request(sock, cls(client_software_name="raw", client_software_version="1"), 78)
        assert ok.error_code == ErrorCode.none


@pytest.mark.kafkalog_broker_config({"connections.max.idle.ms": 300})
def test_idle_connection_closed(kafkalog_broker):
    with _raw.connect(kafkalog_broker.bootstrap_servers) as sock:
        start = time.monotonic()
        assert _raw.is_closed(sock)
        assert 0.25 <= time.monotonic() - start < 5


def test_pipelined_requests_answered_in_order(kafkalog_broker):
    cls, _ = _raw.request_class(18, 0)
    body = _raw.encode_body(cls())
    with _raw.connect(kafkalog_broker.bootstrap_servers) as sock:
        frames = [_raw.header(18, 0, c, "x") + body for c in range(1, 21)]
        sock.sendall(b"".join(struct.pack(">i", len(f)) + f for f in frames))
        assert [struct.unpack_from(">i", _raw.recv_frame(sock))[0] for _ in range(20)] == list(range(1, 21))
