"""Topic-level log configuration with Kafka's names, defaults and validation (spec §11).

``LogConfig`` holds every topic config of Kafka's ``LogConfig`` (3.9-era values: ``segment.bytes``
min 14, ``message.timestamp.after.max.ms`` default Long.MAX). Values are parsed the way Kafka's
``ConfigDef`` parses its string forms (``config_def``) and checked against the same validators, so
a config Kafka accepts is accepted here and one it rejects raises ``InvalidConfigError`` naming key
and reason.

Per-topic overrides are persisted in ``kafkalog-topic-configs.json`` at the top of the data
directory (a plain file: Kafka treats every sub-directory as a partition). Directories written before
that file existed have ``kafkalog-topic-configs.properties`` (one ``<topic>TAB<key>=<value>`` line per
override): it is still read when the JSON file is absent, and replaced by it on the next write.
"""

from __future__ import annotations

import json
import math
import random
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from decimal import Decimal
from pathlib import Path
from typing import Any

from kafkalog.errors import InvalidConfigError, KafkaStorageError
from kafkalog.records.types import MAGIC_V0, MAGIC_V1, MAGIC_V2, CompressionType, TimestampType
from kafkalog.storage.config_def import (
    INT_MIN,
    LONG_MAX,
    at_least,
    between,
    each_of,
    invalid,
    java_trim,
    one_of,
    parse_boolean,
    parse_double,
    parse_int,
    parse_list,
    parse_long,
    parse_string,
)
from kafkalog.storage.files import write_file_atomically
from kafkalog.storage.filesystem import LOCAL_FILESYSTEM, FileSystem
from kafkalog.storage.log_file_utils import validate_topic_name

__all__ = [
    "LEGACY_TOPIC_CONFIGS_FILE",
    "TOPIC_CONFIGS_FILE",
    "LogConfig",
    "broker_synonyms",
    "config_type",
    "read_topic_configs",
    "topic_config_for",
    "write_topic_configs",
]


TOPIC_CONFIGS_FILE = "kafkalog-topic-configs.json"
TOPIC_CONFIGS_VERSION = 1
# The format before TOPIC_CONFIGS_FILE: read when the JSON file is absent, removed by the next write.
LEGACY_TOPIC_CONFIGS_FILE = "kafkalog-topic-configs.properties"

# --- Kafka's MetadataVersion strings (message.format.version) --------------------------------------

# (release, sub-version) in Kafka's order; ids are "release" or "release-IVn".
_IBP_VERSIONS: tuple[tuple[str, str], ...] = (
    ("0.8.0", ""), ("0.8.1", ""), ("0.8.2", ""), ("0.9.0", ""),
    ("0.10.0", "IV0"), ("0.10.0", "IV1"), ("0.10.1", "IV0"), ("0.10.1", "IV1"), ("0.10.1", "IV2"),
    ("0.10.2", "IV0"), ("0.11.0", "IV0"), ("0.11.0", "IV1"), ("0.11.0", "IV2"),
    ("1.0", "IV0"), ("1.1", "IV0"), ("2.0", "IV0"), ("2.0", "IV1"),
    ("2.1", "IV0"), ("2.1", "IV1"), ("2.1", "IV2"), ("2.2", "IV0"), ("2.2", "IV1"),
    ("2.3", "IV0"), ("2.3", "IV1"), ("2.4", "IV0"), ("2.4", "IV1"), ("2.5", "IV0"), ("2.6", "IV0"),
    ("2.7", "IV0"), ("2.7", "IV1"), ("2.7", "IV2"), ("2.8", "IV0"), ("2.8", "IV1"),
    ("3.0", "IV0"), ("3.0", "IV1"), ("3.1", "IV0"), ("3.2", "IV0"),
    ("3.3", "IV0"), ("3.3", "IV1"), ("3.3", "IV2"), ("3.3", "IV3"), ("3.4", "IV0"),
    ("3.5", "IV0"), ("3.5", "IV1"), ("3.5", "IV2"), ("3.6", "IV0"), ("3.6", "IV1"), ("3.6", "IV2"),
    ("3.7", "IV0"), ("3.7", "IV1"), ("3.7", "IV2"), ("3.7", "IV3"), ("3.7", "IV4"),
    ("3.8", "IV0"), ("3.9", "IV0"),
    ("4.0", "IV0"), ("4.0", "IV1"), ("4.0", "IV2"), ("4.0", "IV3"),
)
_LATEST_PRODUCTION = _IBP_VERSIONS.index(("4.0", "IV0"))


def _build_ibp_index() -> dict[str, int]:
    index: dict[str, int] = {}
    latest_of_release: dict[str, int] = {}
    for i, (release, sub) in enumerate(_IBP_VERSIONS):
        index[f"{release}-{sub}" if sub else release] = i
        if i <= _LATEST_PRODUCTION:
            latest_of_release[release] = i
    # A bare release ("0.10.0", "2.8") means its latest production sub-version.
    index.update(latest_of_release)
    return index


_IBP_INDEX = _build_ibp_index()
_IBP_0_10_0_IV0 = _IBP_INDEX["0.10.0-IV0"]
_IBP_0_11_0_IV0 = _IBP_INDEX["0.11.0-IV0"]


def _metadata_version_index(text: str) -> int | None:
    """Kafka's ``MetadataVersion.fromVersionString``: "0.10.2.1" -> "0.10.2", "2.8.1" -> "2.8"."""
    segments = text.split(".")
    while len(segments) > 1 and segments[-1] == "":  # Java's split drops trailing empty strings
        segments.pop()
    keep = 3 if text.startswith("0.") else 2
    key = text if keep >= len(segments) else ".".join(segments[:keep])
    return _IBP_INDEX.get(key)


# --- the topic configs' own parser and validators (the common ones are config_def's) ----------------


def _parse_timestamp_type(name: str, value: object) -> TimestampType:
    if isinstance(value, TimestampType) and value is not TimestampType.NO_TIMESTAMP_TYPE:
        return value
    text = parse_string(name, value)
    if text not in ("CreateTime", "LogAppendTime"):
        raise invalid(name, value, "String must be one of: CreateTime, LogAppendTime")
    return TimestampType.for_name(text)


def _gzip_level(name: str, value: Any) -> None:
    # 1..9, or -1 (zlib's default level).
    if value > 9 or (value < 1 and value != -1):
        raise invalid(name, value, "Value must be between 1 and 9 or equal to -1")


def _metadata_version(name: str, value: Any) -> None:
    if _metadata_version_index(value) is None:
        raise invalid(name, value, f"Version {value} is not a valid version")


_REPLICA_PAIR = re.compile(r"([0-9]+:[0-9]+)?")


def _throttled_replicas(name: str, value: Any) -> None:
    items = [java_trim(item) for item in value]
    if not (all(_REPLICA_PAIR.fullmatch(item) for item in items) or "".join(items) == "*"):
        raise invalid(
            name, ",".join(value),
            f"{name} must be the literal '*' or a list of replicas in the following format: "
            "[partitionId]:[brokerId],[partitionId]:[brokerId],...",
        )


@dataclass(frozen=True, slots=True)
class _ConfigKey:
    name: str
    parse: Callable[[str, object], Any]
    default: Any
    validator: Callable[[str, Any], None] | None = None

    @property
    def attr(self) -> str:
        return self.name.replace(".", "_")


_L = parse_long
_I = parse_int
_B = parse_boolean

_CONFIG_KEYS: tuple[_ConfigKey, ...] = (
    _ConfigKey("segment.bytes", _I, 1024 * 1024 * 1024, at_least(14)),
    _ConfigKey("segment.ms", _L, 7 * 24 * 3600 * 1000, at_least(1)),
    _ConfigKey("segment.jitter.ms", _L, 0, at_least(0)),
    _ConfigKey("segment.index.bytes", _I, 10 * 1024 * 1024, at_least(4)),
    _ConfigKey("flush.messages", _L, LONG_MAX, at_least(1)),
    _ConfigKey("flush.ms", _L, LONG_MAX, at_least(0)),
    _ConfigKey("retention.bytes", _L, -1),
    _ConfigKey("retention.ms", _L, 7 * 24 * 3600 * 1000, at_least(-1)),
    _ConfigKey("max.message.bytes", _I, 1024 * 1024 + 12, at_least(0)),
    _ConfigKey("index.interval.bytes", _I, 4096, at_least(0)),
    _ConfigKey("delete.retention.ms", _L, 24 * 3600 * 1000, at_least(0)),
    _ConfigKey("min.compaction.lag.ms", _L, 0, at_least(0)),
    _ConfigKey("max.compaction.lag.ms", _L, LONG_MAX, at_least(1)),
    _ConfigKey("file.delete.delay.ms", _L, 60000, at_least(0)),
    _ConfigKey("min.cleanable.dirty.ratio", parse_double, 0.5, between(0, 1)),
    _ConfigKey("cleanup.policy", parse_list, ("delete",), each_of("compact", "delete")),
    _ConfigKey("unclean.leader.election.enable", _B, False),
    _ConfigKey("min.insync.replicas", _I, 1, at_least(1)),
    _ConfigKey(
        "compression.type", parse_string, "producer",
        one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
    ),
    _ConfigKey("compression.gzip.level", _I, -1, _gzip_level),
    _ConfigKey("compression.lz4.level", _I, 9, between(1, 17)),
    _ConfigKey("compression.zstd.level", _I, 3, between(-131072, 22)),
    _ConfigKey("preallocate", _B, False),
    _ConfigKey("message.format.version", parse_string, "3.0-IV1", _metadata_version),
    _ConfigKey("message.timestamp.type", _parse_timestamp_type, TimestampType.CREATE_TIME),
    _ConfigKey("message.timestamp.difference.max.ms", _L, LONG_MAX, at_least(0)),
    _ConfigKey("message.timestamp.before.max.ms", _L, LONG_MAX, at_least(0)),
    _ConfigKey("message.timestamp.after.max.ms", _L, LONG_MAX, at_least(0)),
    _ConfigKey("leader.replication.throttled.replicas", parse_list, (), _throttled_replicas),
    _ConfigKey("follower.replication.throttled.replicas", parse_list, (), _throttled_replicas),
    _ConfigKey("message.downconversion.enable", _B, True),
    _ConfigKey("remote.storage.enable", _B, False),
    _ConfigKey("local.retention.ms", _L, -2, at_least(-2)),
    _ConfigKey("local.retention.bytes", _L, -2, at_least(-2)),
    _ConfigKey("remote.log.copy.disable", _B, False),
    _ConfigKey("remote.log.delete.on.disable", _B, False),
)
_KEYS_BY_NAME = {key.name: key for key in _CONFIG_KEYS}
_KEYS_BY_ATTR = {key.attr: key for key in _CONFIG_KEYS}


def _java_double_str(value: float) -> str:
    """``Double.toString``: shortest digits, plain for 1e-3 <= |v| < 1e7, else ``1.0E-5`` style."""
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    if 1e-3 <= abs(value) < 1e7:
        text = repr(value)
        return text if "." in text else text + ".0"
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    assert isinstance(exponent, int)
    text_digits = "".join(map(str, digits))
    mantissa = text_digits[0] + "." + (text_digits[1:] or "0")
    return f"{'-' if sign else ''}{mantissa}E{len(text_digits) - 1 + exponent}"


def _to_kafka_string(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, TimestampType):
        return str(value)
    if isinstance(value, float):
        return _java_double_str(value)
    if isinstance(value, tuple):
        return ",".join(value)
    return str(value)


# --- broker-level names (server.properties) --------------------------------------------------------

_HOURS = 3600 * 1000
_MINUTES = 60 * 1000

# topic config -> broker synonyms in precedence order: (broker name, parser, ms multiplier or None).
_BROKER_SYNONYMS: dict[str, tuple[tuple[str, Callable[[str, object], int], int | None], ...]] = {
    "segment.ms": (("log.roll.ms", _L, None), ("log.roll.hours", _I, _HOURS)),
    "segment.jitter.ms": (("log.roll.jitter.ms", _L, None), ("log.roll.jitter.hours", _I, _HOURS)),
    "flush.ms": (("log.flush.interval.ms", _L, None), ("log.flush.scheduler.interval.ms", _L, None)),
    "retention.ms": (
        ("log.retention.ms", _L, None),
        ("log.retention.minutes", _I, _MINUTES),
        ("log.retention.hours", _I, _HOURS),
    ),
}
# Same value, other name: topic config -> broker config.
_BROKER_RENAMES: dict[str, str] = {
    "segment.bytes": "log.segment.bytes",
    "segment.index.bytes": "log.index.size.max.bytes",
    "flush.messages": "log.flush.interval.messages",
    "retention.bytes": "log.retention.bytes",
    "max.message.bytes": "message.max.bytes",
    "index.interval.bytes": "log.index.interval.bytes",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
    "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
    "file.delete.delay.ms": "log.segment.delete.delay.ms",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
    "cleanup.policy": "log.cleanup.policy",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
    "min.insync.replicas": "min.insync.replicas",
    "compression.type": "compression.type",
    "compression.gzip.level": "compression.gzip.level",
    "compression.lz4.level": "compression.lz4.level",
    "compression.zstd.level": "compression.zstd.level",
    "preallocate": "log.preallocate",
    "message.format.version": "log.message.format.version",
    "message.timestamp.type": "log.message.timestamp.type",
    "message.timestamp.difference.max.ms": "log.message.timestamp.difference.max.ms",
    "message.timestamp.before.max.ms": "log.message.timestamp.before.max.ms",
    "message.timestamp.after.max.ms": "log.message.timestamp.after.max.ms",
    "message.downconversion.enable": "log.message.downconversion.enable",
    "local.retention.ms": "log.local.retention.ms",
    "local.retention.bytes": "log.local.retention.bytes",
}


# broker config -> the topic config it sets the default of
_TOPIC_CONFIG_OF: dict[str, str] = {
    **{broker_name: topic for topic, names in _BROKER_SYNONYMS.items() for broker_name, _, _ in names},
    **{broker_name: topic for topic, broker_name in _BROKER_RENAMES.items()},
}


_TYPE_NAMES: dict[Callable[[str, object], Any], str] = {
    parse_long: "long",
    parse_int: "int",
    parse_boolean: "boolean",
    parse_double: "double",
    parse_list: "list",
    parse_string: "string",
    _parse_timestamp_type: "string",
}


def config_type(name: str) -> str:
    """Kafka's ``ConfigDef.Type`` of a topic config, lower case (``long``, ``int``, ``boolean``,
    ``double``, ``list``, ``string``); InvalidConfigError for an unknown name."""
    key = _KEYS_BY_NAME.get(name)
    if key is None:
        raise InvalidConfigError(f"Unknown topic config name: {name}")
    return _TYPE_NAMES[key.parse]


def broker_synonyms(name: str) -> tuple[str, ...]:
    """The broker configs (``server.properties`` names) that set a topic config's default, in Kafka's
    precedence order (``retention.ms`` -> ``log.retention.ms``, ``.minutes``, ``.hours``)."""
    if name not in _KEYS_BY_NAME:
        raise InvalidConfigError(f"Unknown topic config name: {name}")
    names = [broker_name for broker_name, _, _ in _BROKER_SYNONYMS.get(name, ())]
    renamed = _BROKER_RENAMES.get(name)
    if renamed is not None:
        names.append(renamed)
    return tuple(names)


def topic_config_for(broker_name: str) -> str | None:
    """The topic config whose default the broker config ``broker_name`` sets (``log.retention.hours``
    -> ``retention.ms``), or None for a broker config that sets none."""
    return _TOPIC_CONFIG_OF.get(broker_name)


# --- LogConfig -------------------------------------------------------------------------------------

PropValue = str | int | float | bool | list[str] | tuple[str, ...] | TimestampType


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Every topic-level config of Kafka's ``LogConfig``; attribute = Kafka name with '.' -> '_'.

    Constructing one directly validates like ``from_props`` (strings in Kafka's forms are accepted
    too). ``overridden`` names the configs that were set explicitly for the topic (not compared).
    """

    segment_bytes: int = 1024 * 1024 * 1024
    segment_ms: int = 7 * 24 * 3600 * 1000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10 * 1024 * 1024
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    retention_bytes: int = -1
    retention_ms: int = 7 * 24 * 3600 * 1000
    max_message_bytes: int = 1024 * 1024 + 12
    index_interval_bytes: int = 4096
    delete_retention_ms: int = 24 * 3600 * 1000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    file_delete_delay_ms: int = 60000
    min_cleanable_dirty_ratio: float = 0.5
    cleanup_policy: tuple[str, ...] = ("delete",)
    unclean_leader_election_enable: bool = False
    min_insync_replicas: int = 1
    compression_type: str = "producer"
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_zstd_level: int = 3
    preallocate: bool = False
    message_format_version: str = "3.0-IV1"
    message_timestamp_type: TimestampType = TimestampType.CREATE_TIME
    message_timestamp_difference_max_ms: int = LONG_MAX
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = LONG_MAX
    leader_replication_throttled_replicas: tuple[str, ...] = ()
    follower_replication_throttled_replicas: tuple[str, ...] = ()
    message_downconversion_enable: bool = True
    remote_storage_enable: bool = False
    local_retention_ms: int = -2
    local_retention_bytes: int = -2
    remote_log_copy_disable: bool = False
    remote_log_delete_on_disable: bool = False
    overridden: frozenset[str] = field(default=frozenset(), compare=False)

    def __post_init__(self) -> None:
        for key in _CONFIG_KEYS:
            value = key.parse(key.name, getattr(self, key.attr))
            if key.validator is not None:
                key.validator(key.name, value)
            object.__setattr__(self, key.attr, value)
        unknown = set(self.overridden) - _KEYS_BY_NAME.keys()
        if unknown:
            raise InvalidConfigError(f"Unknown topic config name: {sorted(unknown)[0]}")
        object.__setattr__(self, "overridden", frozenset(self.overridden))
        # Kafka's LogConfig.validateValues (run on topic create/alter).
        if self.min_compaction_lag_ms > self.max_compaction_lag_ms:
            raise InvalidConfigError(
                f"conflict topic config setting min.compaction.lag.ms ({self.min_compaction_lag_ms}) > "
                f"max.compaction.lag.ms ({self.max_compaction_lag_ms})"
            )

    # --- construction ---

    @staticmethod
    def config_names() -> list[str]:
        """Every topic config name, sorted (Kafka's ``LogConfig.configNames``)."""
        return sorted(_KEYS_BY_NAME)

    @staticmethod
    def default_value(name: str) -> PropValue:
        """Kafka's built-in default of a topic config, as the attribute holds it."""
        value: PropValue = LogConfig._key(name).default
        return value

    @staticmethod
    def _key(name: str) -> _ConfigKey:
        key = _KEYS_BY_NAME.get(name) if isinstance(name, str) else None
        if key is None:
            raise InvalidConfigError(f"Unknown topic config name: {name}")
        return key

    @classmethod
    def from_props(
        cls,
        props: Mapping[str, PropValue] | None,
        defaults: LogConfig | Mapping[str, PropValue] | None = None,
    ) -> LogConfig:
        """Topic config from Kafka-named ``props`` on top of ``defaults`` (broker-derived config or
        a props mapping); ``overridden`` becomes the names given in ``props``."""
        props = dict(props or {})
        if isinstance(defaults, LogConfig):
            base = defaults
        else:
            base = cls.from_props(defaults) if defaults else cls()
        changes: dict[str, Any] = {}
        for name, value in props.items():
            key = cls._key(name)
            if value is None:
                raise invalid(name, value, "Value must be non-null")
            changes[key.attr] = value
        return replace(base, **changes, overridden=frozenset(props))

    @classmethod
    def from_broker_props(cls, props: Mapping[str, PropValue]) -> LogConfig:
        """Topic defaults from broker configs (``server.properties`` names), with Kafka's synonyms and
        precedence: ``log.roll.ms`` over ``log.roll.hours``, ``log.retention.ms`` over ``.minutes`` over
        ``.hours`` (a negative retention means unlimited, -1), ``log.flush.interval.ms`` over
        ``log.flush.scheduler.interval.ms``. Names that are not log configs are ignored, as a broker
        ignores configs it does not use. Nothing is marked ``overridden``.
        """
        values: dict[str, Any] = {}
        for topic_name, synonyms in _BROKER_SYNONYMS.items():
            for broker_name, parse, multiplier in synonyms:
                raw = props.get(broker_name)
                if raw is None:
                    continue
                number = parse(broker_name, raw)
                values[topic_name] = (number, broker_name) if multiplier is None else (
                    number * multiplier, broker_name
                )
                break
        if "retention.ms" in values and values["retention.ms"][0] < 0:
            values["retention.ms"] = (-1, values["retention.ms"][1])
        for topic_name, broker_name in _BROKER_RENAMES.items():
            if props.get(broker_name) is not None:
                values[topic_name] = (props[broker_name], broker_name)
        attrs: dict[str, Any] = {}
        for topic_name, (value, broker_name) in values.items():
            key = _KEYS_BY_NAME[topic_name]
            try:
                parsed = key.parse(topic_name, value)
                if key.validator is not None:
                    key.validator(topic_name, parsed)
            except InvalidConfigError as e:
                raise InvalidConfigError(f"{e} (from broker config {broker_name})") from None
            attrs[key.attr] = parsed
        return cls(**attrs)

    # --- back to Kafka's string forms ---

    def to_props(self, *, include_defaults: bool = False) -> dict[str, str]:
        """Kafka string forms of the values that differ from Kafka's defaults (or of all values)."""
        result = {}
        for key in _CONFIG_KEYS:
            value = getattr(self, key.attr)
            if include_defaults or value != key.default:
                result[key.name] = _to_kafka_string(value)
        return result

    def overridden_props(self) -> dict[str, str]:
        """Kafka string forms of the ``overridden`` configs only: what to persist for a topic."""
        return {
            key.name: _to_kafka_string(getattr(self, key.attr))
            for key in _CONFIG_KEYS
            if key.name in self.overridden
        }

    def get(self, name: str) -> PropValue:
        """Value of a config by its Kafka name."""
        value: PropValue = getattr(self, self._key(name).attr)
        return value

    # --- derived values (Kafka's LogConfig methods) ---

    @property
    def compact(self) -> bool:
        return "compact" in (p.lower() for p in self.cleanup_policy)

    @property
    def delete(self) -> bool:
        return "delete" in (p.lower() for p in self.cleanup_policy)

    @property
    def init_file_size(self) -> int:
        """Size a new ``.log`` file is created with: segment.bytes when preallocating, else 0."""
        return self.segment_bytes if self.preallocate else 0

    @property
    def max_segment_ms(self) -> int:
        """Age after which a segment rolls; compacted topics also honour max.compaction.lag.ms."""
        if self.compact and self.max_compaction_lag_ms > 0:
            return min(self.max_compaction_lag_ms, self.segment_ms)
        return self.segment_ms

    def random_segment_jitter(self, rng: random.Random | None = None) -> int:
        """Roll jitter for a new segment: ``abs(randomInt) % min(segment.jitter.ms, segment.ms)``, or 0."""
        if self.segment_jitter_ms == 0:
            return 0
        n = (rng or random).getrandbits(32)
        n = n - 2**32 if n >= 2**31 else n
        positive = 0 if n == INT_MIN else abs(n)  # Kafka's Utils.abs maps Int.MIN to 0
        return positive % min(self.segment_jitter_ms, self.segment_ms)

    @property
    def target_magic(self) -> int:
        """Record format written to this topic, from message.format.version (2 for 0.11.0 and later)."""
        index = _metadata_version_index(self.message_format_version)
        assert index is not None  # validated in __post_init__
        if index < _IBP_0_10_0_IV0:
            return MAGIC_V0
        if index < _IBP_0_11_0_IV0:
            return MAGIC_V1
        return MAGIC_V2

    @property
    def effective_message_timestamp_before_max_ms(self) -> int:
        """before.max.ms, or the deprecated difference.max.ms while before.max.ms is Long.MAX."""
        if self.message_timestamp_before_max_ms != LONG_MAX:
            return self.message_timestamp_before_max_ms
        return self.message_timestamp_difference_max_ms

    @property
    def effective_message_timestamp_after_max_ms(self) -> int:
        """after.max.ms, or the deprecated difference.max.ms while after.max.ms is Long.MAX."""
        if self.message_timestamp_after_max_ms != LONG_MAX:
            return self.message_timestamp_after_max_ms
        return self.message_timestamp_difference_max_ms

    @property
    def effective_local_retention_ms(self) -> int:
        return self.retention_ms if self.local_retention_ms == -2 else self.local_retention_ms

    @property
    def effective_local_retention_bytes(self) -> int:
        return self.retention_bytes if self.local_retention_bytes == -2 else self.local_retention_bytes

    @property
    def compression(self) -> CompressionType | None:
        """The codec the broker writes with; None for "producer" (keep the producer's codec)."""
        if self.compression_type == "producer":
            return None
        return CompressionType.for_name(self.compression_type)

    @property
    def compression_level(self) -> int | None:
        """Level for ``compression`` (gzip, lz4, zstd); None when the codec has no level or is "producer"."""
        return {
            "gzip": self.compression_gzip_level,
            "lz4": self.compression_lz4_level,
            "zstd": self.compression_zstd_level,
        }.get(self.compression_type)


# --- per-topic config persistence ------------------------------------------------------------------

_PROP_NAME = re.compile(r"[^\s=]+")


def _check_persistable(topic: str, key: object, value: object, where: Path) -> str:
    if not isinstance(key, str) or not _PROP_NAME.fullmatch(key):
        raise InvalidConfigError(f"Config name {key!r} for topic {topic} cannot be stored in {where}")
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if not isinstance(value, str):
        raise InvalidConfigError(
            f"Value {value!r} of {key} for topic {topic} cannot be stored in {where}: "
            "a str or int is required"
        )
    return value


def read_topic_configs(data_dir: Path | str, *, fs: FileSystem | None = None) -> dict[str, dict[str, str]]:
    """Per-topic config overrides kept in ``<data_dir>/kafkalog-topic-configs.json``.

    Returns ``{topic: {name: value}}`` with raw strings (``LogConfig.from_props`` validates them);
    a missing file means no overrides. The file is ``{"version": 1, "topics": {topic: {name:
    value}}}``, every value a string. Without it, the legacy properties-like file is read.
    ``fs``: read through that filesystem (a reader's, maybe remote; default: the local one).
    """
    fs = fs or LOCAL_FILESYSTEM
    path = Path(data_dir) / TOPIC_CONFIGS_FILE
    try:
        data = fs.read_file(path)
    except KafkaStorageError as e:
        raise KafkaStorageError(f"Error while reading topic configs {path}: {e}") from e
    if data is None:
        return _read_legacy_topic_configs(Path(data_dir) / LEGACY_TOPIC_CONFIGS_FILE, fs)
    try:
        doc = json.loads(data)
    except (UnicodeDecodeError, ValueError) as e:
        raise KafkaStorageError(f"Topic config file {path} is not valid JSON: {e}") from None
    if not isinstance(doc, dict) or doc.get("version") != TOPIC_CONFIGS_VERSION:
        raise KafkaStorageError(
            f"Topic config file {path} is not a version {TOPIC_CONFIGS_VERSION} kafkalog topic config file"
        )
    topics = doc.get("topics")
    if not isinstance(topics, dict):
        raise KafkaStorageError(f"Topic config file {path} has no \"topics\" object")
    result: dict[str, dict[str, str]] = {}
    for topic, configs in topics.items():
        try:
            validate_topic_name(topic)
        except InvalidConfigError as e:
            raise KafkaStorageError(f"Topic config file {path}: {e}") from None
        if not isinstance(configs, dict) or not all(
                isinstance(k, str) and _PROP_NAME.fullmatch(k) and isinstance(v, str)
                for k, v in configs.items()):
            raise KafkaStorageError(
                f"Topic config file {path}: the configs of topic {topic} must map names to strings"
            )
        result[topic] = dict(configs)
    return result


def _read_legacy_topic_configs(path: Path, fs: FileSystem) -> dict[str, dict[str, str]]:
    """The format before the JSON file: ``<topic>TAB<key>=<value>`` lines, blank lines and ``#``
    comments ignored."""
    try:
        data = fs.read_file(path)
        if data is None:
            return {}
        text = data.decode("utf-8")
    except (KafkaStorageError, UnicodeDecodeError) as e:
        raise KafkaStorageError(f"Error while reading topic configs {path}: {e}") from e
    result: dict[str, dict[str, str]] = {}
    for line_no, raw_line in enumerate(text.split("\n"), start=1):
        line = raw_line.rstrip("\r")
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        topic, tab, assignment = line.partition("\t")
        key, equals, value = assignment.partition("=")
        if not tab or not equals or not _PROP_NAME.fullmatch(key):
            raise KafkaStorageError(
                f"Malformed line {line_no} in topic config file {path}: {line!r} "
                "(expected '<topic>\\t<key>=<value>')"
            )
        try:
            validate_topic_name(topic)
        except InvalidConfigError as e:
            raise KafkaStorageError(f"Malformed line {line_no} in topic config file {path}: {e}") from None
        configs = result.setdefault(topic, {})
        if key in configs:
            raise KafkaStorageError(
                f"Line {line_no} in topic config file {path} repeats {key} for topic {topic}"
            )
        configs[key] = value
    return result


def write_topic_configs(data_dir: Path | str, mapping: Mapping[str, Mapping[str, str | int]]) -> None:
    """Replace the whole topic-config file with ``mapping`` (tmp + fsync + rename + dir fsync), then
    remove a legacy file (so it is never read again). Topics without overrides are left out."""
    path = Path(data_dir) / TOPIC_CONFIGS_FILE
    topics: dict[str, dict[str, str]] = {}
    for topic in sorted(mapping):
        validate_topic_name(topic)
        configs = mapping[topic]
        if configs:
            topics[topic] = {key: _check_persistable(topic, key, configs[key], path)
                             for key in sorted(configs)}
    text = json.dumps({"version": TOPIC_CONFIGS_VERSION, "topics": topics}, indent=2, ensure_ascii=False)
    write_file_atomically(path, (text + "\n").encode("utf-8"))
    legacy = Path(data_dir) / LEGACY_TOPIC_CONFIGS_FILE
    try:
        legacy.unlink()
    except FileNotFoundError:
        pass
    except OSError as e:
        raise KafkaStorageError(f"Cannot remove the legacy topic config file {legacy}: {e}") from e
