"""Message bodies through ``kio`` (Aiven's generated dataclasses, one per message and version, with
a Rust-native reader): ``decode_request`` and ``encode_response``.

kio's request decoding is the fastest measured (docs/BROKER.md); its Python writer costs ~10 µs per
partition entry, fine for every response except Fetch, which ``fetch_response`` frames itself.
"""

from __future__ import annotations

import io
from functools import cache
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from kafkalog.errors import InvalidRequestError, UnsupportedVersionError
from kafkalog.protocol.request_bounds import check_request_body

__all__ = ["decode_request", "encode_response", "request_type", "response_type"]


@cache
def request_type(api_key: int, api_version: int) -> type[Any]:
    try:
        return load_request_schema(api_key, api_version)
    except Exception:
        raise UnsupportedVersionError(
            f"No request schema for API key {api_key} version {api_version}"
        ) from None


@cache
def response_type(api_key: int, api_version: int) -> type[Any]:
    try:
        return load_response_schema(api_key, api_version)
    except Exception:
        raise UnsupportedVersionError(
            f"No response schema for API key {api_key} version {api_version}"
        ) from None


_READERS: dict[type[Any], Any] = {}
_WRITERS: dict[type[Any], Any] = {}


def _reader(cls: type[Any]) -> Any:
    found = _READERS.get(cls)
    if found is None:
        found = _READERS[cls] = entity_reader(cls)
    return found


def _writer(cls: type[Any]) -> Any:
    found = _WRITERS.get(cls)
    if found is None:
        found = _WRITERS[cls] = entity_writer(cls)
    return found


def decode_request(api_key: int, api_version: int, frame: memoryview, offset: int) -> Any:
    """The request body at ``frame[offset:]`` as kio's dataclass for that API and version."""
    cls = request_type(api_key, api_version)
    try:
        # kio would size arrays by a forged count, and refuses tagged fields it does not know
        frame = check_request_body(cls, frame, offset).frame
    except InvalidRequestError as e:
        raise InvalidRequestError(f"Cannot parse {cls.__name__} v{api_version} body: {e}") from None
    try:
        entity, _size = _reader(cls)(frame, offset)
    except Exception as e:  # kio raises its own and builtin errors on bad bytes
        raise InvalidRequestError(
            f"Cannot parse {cls.__name__} v{api_version} body at position {offset}: {type(e).__name__}: {e}"
        ) from None
    return entity


def encode_response(entity: Any) -> bytes:
    """The body bytes of a kio response dataclass (no header, no size prefix)."""
    out = io.BytesIO()
    _writer(type(entity))(out, entity)
    return out.getvalue()
