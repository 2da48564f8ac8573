"""Request header v1/v2 and response header v0/v1 (Kafka's ``RequestHeader`` / ``ResponseHeader``).

v1: api_key int16, api_version int16, correlation_id int32, client_id nullable string (int16 length).
v2 adds tagged fields after it; the client_id stays a non-compact string (KIP-482 kept it so that a
broker can always read it). Which one a request carries follows from its API's first flexible version.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kafkalog.errors import InvalidRequestError
from kafkalog.protocol.api_keys import request_header_version, response_header_version
from kafkalog.protocol.primitives import Reader

__all__ = ["RequestHeader", "encode_response_header", "parse_request_header", "peek_api"]

_PEEK = struct.Struct(">hhi")
_CORRELATION = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    header_version: int


def peek_api(frame: memoryview) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id): the fixed first 8 bytes, readable for any API key."""
    if len(frame) < _PEEK.size:
        raise InvalidRequestError(f"Truncated request header: {len(frame)} bytes")
    key, version, correlation = _PEEK.unpack_from(frame, 0)
    return int(key), int(version), int(correlation)


def parse_request_header(frame: memoryview) -> tuple[RequestHeader, int]:
    """The header and the position where the body starts."""
    api_key, api_version, correlation_id = peek_api(frame)
    reader = Reader(frame, _PEEK.size)
    client_id = reader.nullable_string()
    version = request_header_version(api_key, api_version)
    if version >= 2:
        reader.skip_tagged_fields()
    return RequestHeader(api_key, api_version, correlation_id, client_id, version), reader.pos


def encode_response_header(api_key: int, api_version: int, correlation_id: int) -> bytes:
    if response_header_version(api_key, api_version) >= 1:
        return _CORRELATION.pack(correlation_id) + b"\x00"
    return _CORRELATION.pack(correlation_id)
