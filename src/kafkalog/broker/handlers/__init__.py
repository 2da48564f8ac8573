"""One module per API; each registers its handler here by API key (Kafka's ``KafkaApis.handle`` match).

A handler module calls ``register(ApiHandler(...))`` (or uses the ``handles`` decorator) at import;
``load_handlers`` imports every module of this package, so a new API is a new file and nothing else.
The versions given at registration are the ones the broker serves and advertises in ApiVersions; they
must lie within the codec's range (``kafkalog.protocol.api_keys``).

A handler is ``async def handle(apis, request, body) -> response``: ``apis`` is the ``KafkaApis`` that
owns the broker's components, ``request`` the ``RequestContext`` (header, client), ``body`` what
``decode`` returned (kio's dataclass unless the handler decodes itself). The response is a kio
response dataclass, a list of body chunks (``bytes`` and records regions), or None for no response
at all (Produce with acks=0).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from kafkalog.protocol.api_keys import API_KEYS

__all__ = ["COMPONENT_FACTORIES", "HANDLERS", "ApiHandler", "handles", "load_handlers", "register",
           "component", "register_component"]

Decoder = Callable[[memoryview, int, int], Any]  # (frame, body offset, version) -> request body
Handle = Callable[[Any, Any, Any], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class ApiHandler:
    api_key: int
    min_version: int
    max_version: int
    handle: Handle
    decode: Decoder | None = None  # None: kio's reader for (api_key, version)

    def __post_init__(self) -> None:
        spec = API_KEYS.get(self.api_key)
        if spec is None or not spec.min_version <= self.min_version <= self.max_version <= spec.max_version:
            raise ValueError(
                f"Handler for API key {self.api_key} serves v{self.min_version}-{self.max_version}, "
                "outside what the codec parses"
            )


HANDLERS: dict[int, ApiHandler] = {}

# name -> factory(apis) of a component that handlers share (a group coordinator, a transaction
# coordinator): built when the broker starts, ``apis.components[name]``; its ``shutdown()`` (sync or
# async), if any, runs when the broker stops, before the logs are closed.
COMPONENT_FACTORIES: dict[str, Callable[[Any], Any]] = {}


def register_component(name: str, factory: Callable[[Any], Any]) -> None:
    COMPONENT_FACTORIES[name] = factory


def component(apis: Any, name: str) -> Any:
    """``apis.components[name]``, built by its registered factory if the ``KafkaApis`` was made
    without it (e.g. in a test)."""
    found = apis.components.get(name)
    if found is None:
        found = apis.components[name] = COMPONENT_FACTORIES[name](apis)
    return found


def register(handler: ApiHandler) -> None:
    """Serve ``handler.api_key`` with ``handler`` (a later registration replaces an earlier one)."""
    HANDLERS[handler.api_key] = handler


def handles(
    api_key: int, min_version: int, max_version: int, decode: Decoder | None = None
) -> Callable[[Handle], Handle]:
    """Decorator form of ``register``."""

    def wrap(fn: Handle) -> Handle:
        register(ApiHandler(api_key, min_version, max_version, fn, decode))
        return fn

    return wrap


_loaded = False


def load_handlers() -> dict[int, ApiHandler]:
    """Import every handler module of this package (once); returns the registry."""
    global _loaded
    if not _loaded:
        for module in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
            if not module.name.startswith("_"):
                importlib.import_module(f"{__name__}.{module.name}")
        _loaded = True
    return HANDLERS
