"""What a handler knows about the request it serves, and helpers to build kio responses."""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from kafkalog.protocol.headers import RequestHeader

__all__ = ["RequestContext", "build", "millis", "nested_type"]

ZERO_DELAY = timedelta(0)
_MS = timedelta(milliseconds=1)


def millis(value: Any) -> int:
    """A duration field in ms: kio gives i32 durations as timedelta. Integer division is exact
    (``total_seconds() * 1000`` is not: it gives 1000.9999… for 1001 ms)."""
    return value // _MS if isinstance(value, timedelta) else int(value)


ANONYMOUS = "User:ANONYMOUS"  # a PLAINTEXT connection, or SSL without a client certificate


@dataclass(frozen=True, slots=True)
class RequestContext:
    header: RequestHeader
    client_host: str
    client_port: int
    connection_id: str
    listener_name: str = ""  # the listener the connection came in on (its advertised endpoint)
    principal: str = ANONYMOUS  # who the connection authenticated as (Kafka's KafkaPrincipal)

    @property
    def api_version(self) -> int:
        return self.header.api_version


_FIELD_NAMES: dict[type[Any], frozenset[str]] = {}


def _field_names(cls: type[Any]) -> frozenset[str]:
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = frozenset(f.name for f in dataclasses.fields(cls))
    return names


def build(cls: type[Any], **values: Any) -> Any:
    """An instance of kio's dataclass ``cls`` from ``values``, ignoring the names this version of the
    message lacks (so one handler serves every version)."""
    names = _field_names(cls)
    return cls(**{k: v for k, v in values.items() if k in names})


def nested_type(message_cls: type[Any], name: str) -> type[Any]:
    """A struct type of the same message and version (e.g. ``MetadataResponseTopic``); a class that
    builds nothing (``None``) when this version lacks it."""
    found: type[Any] | None = getattr(sys.modules[message_cls.__module__], name, None)
    return found if found is not None else _Absent


class _Absent:
    def __new__(cls, **_: Any) -> None:  # type: ignore[misc]
        return None
