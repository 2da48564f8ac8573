"""Bad input costs one connection and nothing else; ApiVersions answers any version; idle
connections are closed after connections.max.idle.ms."""

import struct
import time
from pathlib import Path

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
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",  # garbage: an HTTP request (size prefix "GET " ~ 1.2 GB)
        struct.pack(">i", 12) + bytes(range(200, 212)),  # garbage inside a plausible frame
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
        # KIP-511: only ApiVersions' own versions, as Kafka's ApiVersionsRequest.getErrorResponse
        assert [(k.api_key, k.min_version, k.max_version) for k in response.api_keys] == [(18, 0, 4)]
        # the connection stays usable: v3 now
        cls, _ = _raw.request_class(18, 3)
        ok = _raw.request(sock, cls(client_software_name="raw", client_software_version="1"), 78)
        assert ok.error_code == ErrorCode.none


@pytest.mark.parametrize("name, version", [("", "1"), ("raw", ""), ("bad name!", "1"), ("raw", "-1.0"),
                                           ("raw", "1.0."), ("r\u00e9sum\u00e9", "1"), ("kafka_python", "2")])
def test_api_versions_refuses_a_client_software_name_out_of_kafkas_pattern(kafkalog_broker, name, version):
    """v3+: ApiVersionsRequest.isValid — INVALID_REQUEST and no table; the connection stays open."""
    cls, _ = _raw.request_class(18, 3)
    with _raw.connect(kafkalog_broker.bootstrap_servers) as sock:
        refused = _raw.request(sock, cls(client_software_name=name, client_software_version=version), 5)
        assert refused.error_code == ErrorCode.invalid_request and refused.api_keys == ()
        ok = _raw.request(sock, cls(client_software_name="confluent-kafka-python",
                                    client_software_version="2.6.1-rdkafka-2.6.1"), 6)
        assert ok.error_code == ErrorCode.none and len(ok.api_keys) > 40


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


def _rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def test_announced_sizes_allocate_nothing(kafkalog_broker):
    """Frames announced at just under socket.request.max.bytes (100 MiB) whose bodies never come:
    the broker (in this process) buffers only what arrived, keeps serving, and drops them all."""
    bootstrap = kafkalog_broker.bootstrap_servers
    _metadata_works(bootstrap)
    before = _rss_bytes()
    socks = [_raw.connect(bootstrap) for _ in range(10)]
    try:
        for sock in socks:
            sock.sendall(struct.pack(">i", 100 * 1024 * 1024 - 1) + b"\x00\x03\x00\x0c")
        _metadata_works(bootstrap)
        assert _rss_bytes() - before < 64 * 1024 * 1024  # 10 x 100 MiB announced; nothing reserved
    finally:
        for sock in socks:
            sock.close()
    _metadata_works(bootstrap)


@pytest.mark.kafkalog_broker_config({"socket.request.max.bytes": 4096})
def test_frame_over_socket_request_max_bytes_closed(kafkalog_broker):
    bootstrap = kafkalog_broker.bootstrap_servers
    with _raw.connect(bootstrap) as sock:
        sock.sendall(struct.pack(">i", 4097) + b"\x00" * 4097)
        assert _raw.is_closed(sock)
    _metadata_works(bootstrap)


def test_running_out_of_file_handles_logs_a_warning_not_a_storm(tmp_path):
    """With its file-handle limit reached, the broker cannot accept: asyncio would log a traceback
    for every failed accept (tens of thousands a minute); the broker logs one warning per interval,
    keeps serving the connections it has, and accepts again once handles are free."""
    import resource
    import signal
    import socket
    import subprocess
    import sys

    def low_limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (48, 48))

    proc = subprocess.Popen(
        [sys.executable, "-m", "kafkalog.cli", "serve", "--data-dir", str(tmp_path / "d"), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=low_limit,
    )
    clients: list[socket.socket] = []
    try:
        line = proc.stdout.readline()
        assert "serving" in line, line
        bootstrap = line.rsplit(" on ", 1)[1].strip()
        host, port = bootstrap.rsplit(":", 1)
        for _ in range(80):  # more than the limit: the kernel queues them, accept fails
            clients.append(socket.create_connection((host, int(port)), timeout=5))
        time.sleep(3)
        for c in clients:
            c.close()
        clients.clear()
        deadline = time.monotonic() + 30
        while True:  # accepting again once the handles are back
            try:
                _metadata_works(bootstrap)
                break
            except OSError:
                assert time.monotonic() < deadline, "the broker did not accept again"
                time.sleep(0.5)
    finally:
        for c in clients:
            c.close()
        proc.send_signal(signal.SIGTERM)
        try:
            _, stderr = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
    assert 1 <= stderr.count("Cannot accept connections") <= 3, stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]


@pytest.mark.parametrize("peer, java", [
    ("127.0.0.1", "127.0.0.1"),
    ("::1", "0:0:0:0:0:0:0:1"),
    ("2001:db8::ff00:42:8329", "2001:db8:0:0:0:ff00:42:8329"),
    ("::ffff:10.0.0.7", "10.0.0.7"),
    ("fe80::1%eth0", "fe80:0:0:0:0:0:0:1%eth0"),
])
def test_client_addresses_are_written_as_java_writes_them(peer, java):
    """ACL host rules and group member hosts compare with InetAddress.getHostAddress's text."""
    from kafkalog.broker.socket_server import java_host_address

    assert java_host_address(peer) == java
