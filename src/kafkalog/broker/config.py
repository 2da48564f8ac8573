"""``KafkaConfig``: the broker's configs, by Kafka's names and with Kafka's defaults, read from a
``server.properties`` file and/or ``key=value`` overrides.

The ``log.*`` names (``log.segment.bytes``, ``log.retention.hours``, ``message.max.bytes`` …) are the
defaults of every topic's config; ``LogConfig.from_broker_props`` maps them with Kafka's synonyms and
precedence, so that rule lives in one place. Names a broker-side helper needs later are read with
``get_int``/``get_bool``/``get_str`` against the defaults table below.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from kafkalog.errors import InvalidConfigError
from kafkalog.storage.cleaner.cleaner_config import CleanerConfig
from kafkalog.storage.config import LogConfig
from kafkalog.storage.config_def import (
    INT_MAX,
    LONG_MAX,
    LONG_MIN,
    invalid,
    java_int,
    java_trim,
    parse_boolean,
)
from kafkalog.storage.java_properties import read_properties_file

__all__ = ["BROKER_DEFAULTS", "GROUP_BOUNDED", "INTERNAL_BROKER_DEFAULTS", "KafkaConfig", "ListenerSpec"]

log = logging.getLogger(__name__)


# Kafka's broker configs this broker reads, with Kafka's defaults (as strings, as in a properties file).
BROKER_DEFAULTS: dict[str, str] = {
    "node.id": "1",
    "listeners": "PLAINTEXT://127.0.0.1:9092",
    "advertised.listeners": "",
    "listener.security.protocol.map": (
        "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"
    ),
    # TLS on an SSL listener (broker/ssl_factory.py): Kafka's names and defaults
    "ssl.keystore.type": "JKS",
    "ssl.truststore.type": "JKS",
    "ssl.client.auth": "none",
    "ssl.enabled.protocols": "TLSv1.2,TLSv1.3",
    "ssl.principal.mapping.rules": "DEFAULT",
    "num.partitions": "1",
    "auto.create.topics.enable": "true",
    "delete.topic.enable": "true",
    "default.replication.factor": "1",  # what CreateTopics' replication factor -1 means
    "message.max.bytes": str(1024 * 1024 + 12),
    "fetch.max.bytes": str(55 * 1024 * 1024),  # a fetch response's cap, whatever the request asks
    "socket.request.max.bytes": str(100 * 1024 * 1024),
    "socket.send.buffer.bytes": str(100 * 1024),
    "connections.max.idle.ms": "600000",
    # connection limits (broker/connection_quotas.py)
    "max.connections": str(2**31 - 1),
    "max.connections.per.ip": str(2**31 - 1),
    "max.connections.per.ip.overrides": "",
    "socket.listen.backlog.size": "50",
    "log.retention.check.interval.ms": "300000",
    **CleanerConfig.broker_defaults(),
    "log.flush.scheduler.interval.ms": str(LONG_MAX),
    "log.flush.offset.checkpoint.interval.ms": "60000",
    "log.flush.start.offset.checkpoint.interval.ms": "60000",
    "replica.high.watermark.checkpoint.interval.ms": "5000",
    "log.dirs": "",
    "log.dir": "/tmp/kafka-logs",
    "transactional.id.expiration.ms": "604800000",
    "producer.id.expiration.ms": "86400000",
    "group.initial.rebalance.delay.ms": "3000",
    "group.min.session.timeout.ms": "6000",
    "group.max.session.timeout.ms": "1800000",
    "group.max.size": str(2**31 - 1),
    # KIP-848 consumer groups and KIP-932 share groups (Kafka's GroupCoordinatorConfig and
    # ShareGroupConfig): kafkalog runs neither, but these give the group configs (GROUP config
    # resource, broker/group/group_config.py) their defaults and bounds
    "group.consumer.session.timeout.ms": "45000",
    "group.consumer.min.session.timeout.ms": "45000",
    "group.consumer.max.session.timeout.ms": "60000",
    "group.consumer.heartbeat.interval.ms": "5000",
    "group.consumer.min.heartbeat.interval.ms": "5000",
    "group.consumer.max.heartbeat.interval.ms": "15000",
    "group.share.session.timeout.ms": "45000",
    "group.share.min.session.timeout.ms": "45000",
    "group.share.max.session.timeout.ms": "60000",
    "group.share.heartbeat.interval.ms": "5000",
    "group.share.min.heartbeat.interval.ms": "5000",
    "group.share.max.heartbeat.interval.ms": "15000",
    "group.share.record.lock.duration.ms": "30000",
    "group.share.min.record.lock.duration.ms": "15000",
    "group.share.max.record.lock.duration.ms": "60000",
    "offsets.topic.num.partitions": "50",
    "offsets.retention.minutes": "10080",
    "offsets.retention.check.interval.ms": "600000",
    "offsets.topic.segment.bytes": str(100 * 1024 * 1024),
    "offsets.topic.compression.codec": "0",
    "offset.metadata.max.bytes": "4096",
    "transaction.state.log.num.partitions": "50",
    "transaction.state.log.segment.bytes": str(100 * 1024 * 1024),
    "transaction.max.timeout.ms": "900000",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "10000",
    "transaction.remove.expired.transaction.cleanup.interval.ms": "3600000",
    "transaction.partition.verification.enable": "true",
    "max.request.partition.size.limit": "2000",  # DescribeTopicPartitions' partitions per response
    # authorization (broker/standard_authorizer.py): none unless a class is named, as in Kafka
    "authorizer.class.name": "",
    "super.users": "",
    "allow.everyone.if.no.acl.found": "false",
}

# Kafka's internal broker configs (``defineInternal``): read with these defaults, but DescribeConfigs
# lists one only when it is set, and it cannot be changed at runtime.
INTERNAL_BROKER_DEFAULTS: dict[str, str] = {
    "producer.id.expiration.check.interval.ms": "600000",  # PeriodicProducerExpirationCheck
}


def _parse_int(name: str, value: str, lo: int = LONG_MIN, hi: int = LONG_MAX) -> int:
    number = java_int(java_trim(value), LONG_MIN, LONG_MAX)
    if number is None:
        raise invalid(name, value, "Not a number")
    if not lo <= number <= hi:
        raise invalid(name, value, f"must be in [{lo}, {hi}]")
    return number


# The group coordinator's bounded configs: group config (KIP-848/932, broker/group/group_config.py)
# -> the broker configs of its value, lower bound and upper bound, each an int within its range
# (Kafka's ``atLeast(1)``, or ``between`` for the record-lock ones).
GROUP_BOUNDED: dict[str, tuple[str, str, str]] = {
    f"{kind}.{what}": (f"group.{kind}.{what}", f"group.{kind}.min.{what}", f"group.{kind}.max.{what}")
    for kind, what in (
        ("consumer", "heartbeat.interval.ms"),
        ("consumer", "session.timeout.ms"),
        ("share", "heartbeat.interval.ms"),
        ("share", "session.timeout.ms"),
        ("share", "record.lock.duration.ms"),
    )
}
_GROUP_RANGES = {
    "group.share.record.lock.duration.ms": (1000, 3_600_000),
    "group.share.min.record.lock.duration.ms": (1000, 30_000),
    "group.share.max.record.lock.duration.ms": (30_000, 3_600_000),
}


def _check_group_coordinator_configs(get_int: Callable[[str], int]) -> None:
    """What Kafka's ``GroupCoordinatorConfig`` and ``ShareGroupConfig`` require at startup: each
    value within its range and within its min and max, and a heartbeat interval below its session
    timeout."""
    for triple in GROUP_BOUNDED.values():
        value, lo, hi = (get_int(name) for name in triple)
        for name, number in zip(triple, (value, lo, hi), strict=True):
            least, most = _GROUP_RANGES.get(name, (1, INT_MAX))
            if number < least:
                raise InvalidConfigError(
                    f"Invalid value {number} for configuration {name}: Value must be at least {least}"
                )
            if number > most:
                raise InvalidConfigError(
                    f"Invalid value {number} for configuration {name}: Value must be no more than {most}"
                )
        if hi < lo:
            raise InvalidConfigError(f"{triple[2]} must be greater than or equal to {triple[1]}")
        if value < lo:
            raise InvalidConfigError(f"{triple[0]} must be greater than or equal to {triple[1]}")
        if value > hi:
            raise InvalidConfigError(f"{triple[0]} must be less than or equal to {triple[2]}")
    for kind in ("consumer", "share"):
        heartbeat, session = f"group.{kind}.heartbeat.interval.ms", f"group.{kind}.session.timeout.ms"
        if get_int(heartbeat) >= get_int(session):
            raise InvalidConfigError(f"{heartbeat} must be less than {session}")


def _parse_listener_entries(value: str, what: str = "listeners") -> list[tuple[str, str, int]]:
    """(name, host, port) of every listener of ``value`` (``NAME://host:port``, comma separated;
    empty host: all addresses), names unique."""
    found: list[tuple[str, str, int]] = []
    for entry in (e.strip() for e in value.split(",") if e.strip()):
        name, sep, address = entry.partition("://")
        if not sep:
            raise InvalidConfigError(f"Invalid listener {entry!r} in {what}: expected NAME://host:port")
        host, colon, port = address.rpartition(":")
        if not colon:
            raise InvalidConfigError(f"Invalid listener {entry!r} in {what}: no port")
        name = name.strip().upper()
        if any(name == seen for seen, _, _ in found):
            raise InvalidConfigError(
                f"Each listener must have a different name, but {what} names {name} twice"
            )
        found.append((name, host.strip("[]"), _parse_int(what, port, 0, 65535)))
    return found


def _security_protocol_map(value: str) -> dict[str, str]:
    """``listener.security.protocol.map``: listener name -> security protocol."""
    found: dict[str, str] = {}
    for entry in (e.strip() for e in value.split(",") if e.strip()):
        name, colon, protocol = entry.partition(":")
        if not colon or not name.strip() or not protocol.strip():
            raise InvalidConfigError(
                f"Invalid listener.security.protocol.map entry {entry!r}: expected NAME:PROTOCOL"
            )
        found[name.strip().upper()] = protocol.strip().upper()
    return found


@dataclass(frozen=True, slots=True)
class ListenerSpec:
    """One listener: its name, address, security protocol, and the address advertised to clients
    (empty host / port 0: the listener's own)."""

    name: str
    host: str
    port: int
    security_protocol: str
    advertised_host: str = ""
    advertised_port: int = 0


@dataclass(frozen=True)
class KafkaConfig:
    """Broker configuration; build with ``from_props`` (or ``KafkaConfig()`` for all defaults).

    ``originals`` are the static configs (``server.properties`` and overrides); ``dynamic_default``
    and ``dynamic_broker`` the cluster-wide and this node's dynamic configs (``dynamic_broker_config``),
    which take precedence over them in that order, as in Kafka."""

    originals: Mapping[str, str] = field(default_factory=dict)
    dynamic_default: Mapping[str, str] = field(default_factory=dict)
    dynamic_broker: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("originals", "dynamic_default", "dynamic_broker"):
            object.__setattr__(self, name, {str(k): str(v) for k, v in getattr(self, name).items()})
        # Parse everything now: a bad value is a startup error, never a failure later.
        self.log_config  # noqa: B018
        self.listeners  # noqa: B018
        for name in (
            "node.id",
            "num.partitions",
            "message.max.bytes",
            "fetch.max.bytes",
            "socket.request.max.bytes",
            "connections.max.idle.ms",
            "log.retention.check.interval.ms",
            "log.flush.scheduler.interval.ms",
            "log.flush.offset.checkpoint.interval.ms",
            "log.flush.start.offset.checkpoint.interval.ms",
            "replica.high.watermark.checkpoint.interval.ms",
        ):
            self.get_int(name)
        self.get_bool("auto.create.topics.enable")
        self.get_bool("delete.topic.enable")
        self.get_bool("transaction.partition.verification.enable")
        for name in (
            "num.partitions",
            "transaction.state.log.num.partitions",
            "max.request.partition.size.limit",
            "transaction.max.timeout.ms",
            "transaction.abort.timed.out.transaction.cleanup.interval.ms",
            "transaction.remove.expired.transaction.cleanup.interval.ms",
            "producer.id.expiration.ms",
            "producer.id.expiration.check.interval.ms",
        ):
            if (count := self.get_int(name)) < 1:
                raise InvalidConfigError(
                    f"Invalid value {count} for configuration {name}: Value must be at least 1"
                )
        if self.socket_request_max_bytes < 1:
            raise InvalidConfigError("socket.request.max.bytes must be at least 1")
        _check_group_coordinator_configs(self.get_int)

    @classmethod
    def from_props(
        cls, props: Mapping[str, Any] | None = None, *, file: Path | str | None = None
    ) -> KafkaConfig:
        """Configs from a ``server.properties`` file, overridden by ``props``."""
        merged: dict[str, str] = dict(read_properties_file(file)) if file is not None else {}
        merged.update({str(k): str(v) for k, v in (props or {}).items()})
        return cls(merged)

    def with_overrides(self, props: Mapping[str, Any]) -> KafkaConfig:
        merged = dict(self.originals)
        merged.update({str(k): str(v) for k, v in props.items()})
        return KafkaConfig(merged, self.dynamic_default, self.dynamic_broker)

    def with_dynamic(
        self, dynamic_default: Mapping[str, str], dynamic_broker: Mapping[str, str]
    ) -> KafkaConfig:
        """The same static configs under other dynamic ones (every value checked, as at startup)."""
        return KafkaConfig(self.originals, dynamic_default, dynamic_broker)

    @cached_property
    def values(self) -> dict[str, str]:
        """Every config set, whatever its source: this node's dynamic configs over the cluster-wide
        dynamic ones over the static ones."""
        return {**self.originals, **self.dynamic_default, **self.dynamic_broker}

    # --- generic access ---

    def get_str(self, name: str, default: str | None = None) -> str:
        value = self.values.get(name)
        if value is not None:
            return value
        if default is not None:
            return default
        if name in BROKER_DEFAULTS:
            return BROKER_DEFAULTS[name]
        if name in INTERNAL_BROKER_DEFAULTS:
            return INTERNAL_BROKER_DEFAULTS[name]
        raise InvalidConfigError(f"Unknown broker config {name} and no default given")

    def get_int(self, name: str, default: int | None = None) -> int:
        return _parse_int(name, self.get_str(name, None if default is None else str(default)))

    def get_bool(self, name: str, default: bool | None = None) -> bool:
        return parse_boolean(name, self.get_str(name, None if default is None else str(default).lower()))

    # --- the configs the core broker uses ---

    @cached_property
    def node_id(self) -> int:
        return self.get_int("node.id")

    @cached_property
    def listener(self) -> tuple[str, int]:
        """Host and port of the first listener."""
        return self.listeners[0].host, self.listeners[0].port

    @cached_property
    def listener_name(self) -> str:
        return self.listeners[0].name

    @cached_property
    def listeners(self) -> tuple[ListenerSpec, ...]:
        """Every listener (``listeners``), each with its security protocol (by its name, through
        ``listener.security.protocol.map``: PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL) and where
        clients are told to connect (``advertised.listeners`` by name, else the listener's own
        host and port)."""
        protocols = _security_protocol_map(self.get_str("listener.security.protocol.map"))
        advertised_value = self.get_str("advertised.listeners")
        advertised = (
            {
                name: (host, port)
                for name, host, port in _parse_listener_entries(advertised_value, "advertised.listeners")
            }
            if advertised_value
            else {}
        )
        entries = _parse_listener_entries(self.get_str("listeners"))
        if not entries:
            raise InvalidConfigError("No listener in listeners")
        specs = []
        for name, host, port in entries:
            protocol = protocols.get(name)
            if protocol is None:
                raise InvalidConfigError(
                    f"Listener {name} has no security protocol in listener.security.protocol.map"
                )
            if protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
                raise InvalidConfigError(f"Listener {name} has the unknown security protocol {protocol}")
            specs.append(ListenerSpec(name, host, port, protocol, *advertised.get(name, ("", 0))))
        unknown = set(advertised) - {spec.name for spec in specs}
        if unknown:
            raise InvalidConfigError(
                f"advertised.listeners names {', '.join(sorted(unknown))}, which listeners does not"
            )
        ports = [spec.port for spec in specs if spec.port]
        if len(set(ports)) != len(ports):
            raise InvalidConfigError("Each listener must listen on a different port")
        return tuple(specs)

    def listener_config(self, listener: str) -> KafkaConfig:
        """The configs as one listener reads them: ``listener.name.<listener>.<name>`` over
        ``<name>`` (Kafka's ``valuesWithPrefixOverride``), every source flattened into one."""
        prefix = f"listener.name.{listener.lower()}."
        scoped = {k[len(prefix) :]: v for k, v in self.values.items() if k.startswith(prefix)}
        return KafkaConfig({**self.values, **scoped}) if scoped else self

    @cached_property
    def advertised_listener(self) -> tuple[str, int] | None:
        """Where clients of the first listener are told to connect, if ``advertised.listeners``
        says."""
        first = self.listeners[0]
        if not first.advertised_host and not first.advertised_port:
            return None
        return first.advertised_host, first.advertised_port

    @cached_property
    def num_partitions(self) -> int:
        return self.get_int("num.partitions")

    @cached_property
    def auto_create_topics_enable(self) -> bool:
        return self.get_bool("auto.create.topics.enable")

    @cached_property
    def message_max_bytes(self) -> int:
        return self.get_int("message.max.bytes")

    @cached_property
    def socket_request_max_bytes(self) -> int:
        return self.get_int("socket.request.max.bytes")

    @cached_property
    def connections_max_idle_ms(self) -> int:
        return self.get_int("connections.max.idle.ms")

    @cached_property
    def log_retention_check_interval_ms(self) -> int:
        return self.get_int("log.retention.check.interval.ms")

    @cached_property
    def log_flush_scheduler_interval_ms(self) -> int:
        return self.get_int("log.flush.scheduler.interval.ms")

    @cached_property
    def log_flush_offset_checkpoint_interval_ms(self) -> int:
        return self.get_int("log.flush.offset.checkpoint.interval.ms")

    @cached_property
    def log_flush_start_offset_checkpoint_interval_ms(self) -> int:
        return self.get_int("log.flush.start.offset.checkpoint.interval.ms")

    @cached_property
    def replica_high_watermark_checkpoint_interval_ms(self) -> int:
        return self.get_int("replica.high.watermark.checkpoint.interval.ms")

    @cached_property
    def producer_id_expiration_ms(self) -> int:
        return self.get_int("producer.id.expiration.ms")

    @cached_property
    def producer_id_expiration_check_interval_ms(self) -> int:
        return self.get_int("producer.id.expiration.check.interval.ms")

    @cached_property
    def log_config(self) -> LogConfig:
        """Every topic's default config, from the ``log.*`` names (Kafka's ``LogConfig`` defaults)."""
        return LogConfig.from_broker_props(self.values)
