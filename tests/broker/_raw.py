"""A raw Kafka-protocol client for tests: requests encoded with kio, one socket, bounded waits."""

from __future__ import annotations

import io
import socket
import struct
from typing import Any

from kio.serial import entity_reader, entity_writer

from kafkalog.protocol.api_keys import request_header_version, response_header_version
from kafkalog.protocol.codec import request_type, response_type

TIMEOUT_S = 10.0


def connect(bootstrap: str) -> socket.socket:
    host, port = bootstrap.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=TIMEOUT_S)


def header(api_key: int, version: int, correlation_id: int, client_id: str | None = "raw") -> bytes:
    out = struct.pack(">hhi", api_key, version, correlation_id)
    if client_id is None:
        out += struct.pack(">h", -1)
    else:
        out += struct.pack(">h", len(client_id)) + client_id.encode()
    if request_header_version(api_key, version) >= 2:
        out += b"\x00"
    return out


def encode_body(entity: Any) -> bytes:
    out = io.BytesIO()
    entity_writer(type(entity))(out, entity)
    return out.getvalue()


def send_frame(sock: socket.socket, payload: bytes) -> None:
    sock.sendall(struct.pack(">i", len(payload)) + payload)


def recv_exact(sock: socket.socket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError(f"closed after {len(data)} of {n} bytes")
        data += chunk
    return bytes(data)


def recv_frame(sock: socket.socket) -> bytes:
    (size,) = struct.unpack(">i", recv_exact(sock, 4))
    return recv_exact(sock, size)


def request(sock: socket.socket, entity: Any, correlation_id: int = 1) -> Any:
    """Send kio request ``entity``; return the decoded kio response."""
    api_key, version = int(entity.__api_key__), int(entity.__version__)
    send_frame(sock, header(api_key, version, correlation_id) + encode_body(entity))
    frame = recv_frame(sock)
    (got_correlation,) = struct.unpack_from(">i", frame, 0)
    assert got_correlation == correlation_id
    offset = 4 + (1 if response_header_version(api_key, version) >= 1 else 0)
    response, _ = entity_reader(response_type(api_key, version))(frame, offset)
    return response


def request_class(api_key: int, version: int) -> tuple[type[Any], Any]:
    cls = request_type(api_key, version)
    return cls, __import__(cls.__module__, fromlist=["x"])


def is_closed(sock: socket.socket) -> bool:
    """True when the peer closed the connection (bounded wait)."""
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
