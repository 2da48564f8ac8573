"""``ConnectionQuotas``: how many connections the broker holds, per listener and per client address
(Kafka's ``SocketServer.ConnectionQuotas``).

- ``max.connections`` bounds the connections of the whole broker, and of each listener
  (``listener.name.<l>.max.connections``, else the same value). At the limit a new connection is
  not refused: it waits, unread, until another closes, as Kafka's acceptor blocks. Kafka's waiting
  connections sit in the kernel's accept backlog; kafkalog has already accepted them, so it bounds
  them as that backlog is (``socket.listen.backlog.size``) and waits at most
  ``connections.max.idle.ms`` for a slot — a connection beyond either is closed.
- The inter-broker listener (``inter.broker.listener.name``, else the one named after
  ``security.inter.broker.protocol``) is exempt from the broker-wide limit when there are other
  listeners, so that the cluster's own traffic is never starved (Kafka's protected listener).
- ``max.connections.per.ip`` (``max.connections.per.ip.overrides``: ``host:count,…``) bounds each
  client address; a connection over it is closed at once ("Rejected connection …").

Every limit is read from the live config at each connection, so a dynamic change
(IncrementalAlterConfigs) applies to the next connection, and a raised limit wakes the waiters.
Everything runs on the broker's event loop.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import socket
from collections import Counter
from collections.abc import Callable

from kafkalog.broker.config import KafkaConfig
from kafkalog.errors import InvalidConfigError, KafkaLogError
from kafkalog.storage._java_text import java_trim

__all__ = [
    "CONNECTION_QUOTAS",
    "ConnectionQuotas",
    "TooManyConnectionsError",
    "max_connections_per_ip_overrides",
    "validate_connection_quota_configs",
]


CONNECTION_QUOTAS = "connection_quotas"  # the broker component: apis.components[CONNECTION_QUOTAS]


class TooManyConnectionsError(KafkaLogError):
    """A client address already holds ``max.connections.per.ip`` connections."""


def _address_key(host: str) -> str:
    """One spelling per address (``::ffff:127.0.0.1`` and ``127.0.0.1`` are not merged, as Java's
    InetAddress does not merge them either)."""
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return host


@functools.lru_cache(maxsize=8)  # read at each connection; a host name is resolved once per value
def max_connections_per_ip_overrides(value: str) -> dict[str, int]:
    """``max.connections.per.ip.overrides`` (``host:count`` pairs, comma-separated) by address; a
    host name is resolved as Kafka's ``InetAddress.getByName`` does. InvalidConfigError otherwise."""
    overrides: dict[str, int] = {}
    for entry in value.split(","):
        entry = java_trim(entry)
        if not entry:
            continue
        host, sep, count = entry.rpartition(":")
        host = java_trim(host)
        if not sep or not host or not java_trim(count).isascii() or not java_trim(count).isdigit():
            raise InvalidConfigError(
                f"Invalid value {value} for configuration max.connections.per.ip.overrides: "
                f"Map entry '{entry}' is not of the form host:count"
            )
        try:
            address = _address_key(host) if _is_ip(host) else socket.gethostbyname(host)
        except OSError:
            raise InvalidConfigError(
                f"Invalid value {value} for configuration max.connections.per.ip.overrides: "
                f"unknown host {host}"
            ) from None
        overrides[address] = int(java_trim(count))
    return overrides


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


class ConnectionQuotas:
    """The counts of one broker's connections; ``config_of()`` gives its current config."""

    def __init__(self, config_of: Callable[[], KafkaConfig], listeners: list[str]) -> None:
        self._config_of = config_of
        self._listeners = list(listeners)
        self._total = 0
        self._per_listener: Counter[str] = Counter()
        self._per_ip: Counter[str] = Counter()
        self._waiters: set[asyncio.Future[None]] = set()

    def _slot_available(self, listener: str) -> bool:
        config = self._config_of()
        if self._per_listener[listener] >= config.listener_config(listener).get_int("max.connections"):
            return False
        if self._protected(config, listener):
            return True
        return self._total < config.get_int("max.connections")

    def _protected(self, config: KafkaConfig, listener: str) -> bool:
        if len(self._listeners) < 2:
            return False
        named = config.values.get("inter.broker.listener.name")
        if named is None:
            named = config.values.get("security.inter.broker.protocol", "PLAINTEXT")
        return java_trim(named).upper() == listener.upper()

    async def inc(self, listener: str, host: str, timeout_s: float | None) -> None:
        """Count a new connection from ``host`` on ``listener``, once a slot is free. Raises
        TooManyConnectionsError over the per-address limit, TimeoutError when no slot came free in
        ``timeout_s`` or too many connections already wait for one."""
        if not self._slot_available(listener):
            backlog = self._config_of().get_int("socket.listen.backlog.size")
            if len(self._waiters) >= backlog:
                raise TimeoutError(f"{len(self._waiters)} connections already wait for a free slot")
            async with asyncio.timeout(timeout_s):
                while not self._slot_available(listener):
                    waiter = asyncio.get_running_loop().create_future()
                    self._waiters.add(waiter)
                    try:
                        await waiter
                    finally:
                        self._waiters.discard(waiter)
        config = self._config_of()
        address = _address_key(host)
        overrides = max_connections_per_ip_overrides(config.get_str("max.connections.per.ip.overrides"))
        limit = overrides.get(address, config.get_int("max.connections.per.ip"))
        if self._per_ip[address] >= limit:
            raise TooManyConnectionsError(
                f"Rejected connection from {address}, address already has the configured maximum of "
                f"{limit} connections."
            )
        self._per_ip[address] += 1
        self._per_listener[listener] += 1
        self._total += 1

    def dec(self, listener: str, host: str) -> None:
        address = _address_key(host)
        self._per_ip[address] -= 1
        if self._per_ip[address] <= 0:
            del self._per_ip[address]
        self._per_listener[listener] -= 1
        self._total -= 1
        self.notify()

    def notify(self) -> None:
        """Wake the connections waiting for a slot (one closed, or a limit changed): each checks
        again."""
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)


def validate_connection_quota_configs(config: KafkaConfig) -> None:
    """Kafka's checks of the connection limits (``atLeast(0)``; a per-address limit of 0 only with
    overrides); InvalidConfigError saying which."""
    for name in ("max.connections", "max.connections.per.ip"):
        if config.get_int(name) < 0:
            raise InvalidConfigError(
                f"Invalid value {config.get_str(name)} for configuration {name}: Value must be at least 0"
            )
    overrides = max_connections_per_ip_overrides(config.get_str("max.connections.per.ip.overrides"))
    if config.get_int("max.connections.per.ip") == 0 and not overrides:
        raise InvalidConfigError(
            "max.connections.per.ip can be set to zero only if max.connections.per.ip.overrides "
            "property is set."
        )
