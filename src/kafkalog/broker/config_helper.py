"""What DescribeConfigs (and CreateTopics v5+) say about a topic's or the broker's configs (Kafka's
``ConfigHelper``): each config's effective value, where it came from, its synonyms and its type.

A topic config's value comes from the topic's override (TOPIC_CONFIG), else from a broker config in
``server.properties`` that sets its default (STATIC_BROKER_CONFIG, e.g. ``log.retention.hours`` for
``retention.ms``), else from Kafka's built-in default (DEFAULT_CONFIG). Synonyms list every source
that has a value, highest precedence first, as Kafka does. Broker configs are all static here (there
are no dynamic broker configs), so they are read-only; a name that looks like a secret is sensitive
and its value is withheld.
"""

from __future__ import annotations

from dataclasses import dataclass

from kafkalog.broker.config import BROKER_DEFAULTS, KafkaConfig
from kafkalog.storage.config import LogConfig, broker_synonyms, config_type

__all__ = [
    "ConfigEntry",
    "ConfigSource",
    "ConfigSynonym",
    "ResourceType",
    "describe_broker_configs",
    "describe_topic_configs",
]


class ConfigSource:
    """Kafka's ``DescribeConfigsResponse.ConfigSource`` ids."""

    UNKNOWN = 0
    TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6


class ResourceType:
    """Kafka's ``ConfigResource.Type`` ids."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8


# Kafka's ``ConfigDef.Type`` ids as DescribeConfigs v3+ sends them.
_TYPE_IDS = {
    "boolean": 1,
    "string": 2,
    "int": 3,
    "short": 4,
    "long": 5,
    "double": 6,
    "list": 7,
    "class": 8,
    "password": 9,
}
_SENSITIVE_WORDS = ("password", "secret", "keystore.key", "sasl.jaas")


@dataclass(frozen=True, slots=True)
class ConfigSynonym:
    name: str
    value: str | None
    source: int


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None
    source: int
    read_only: bool
    is_sensitive: bool
    synonyms: tuple[ConfigSynonym, ...]
    config_type: int

    @property
    def is_default(self) -> bool:
        return self.source == ConfigSource.DEFAULT_CONFIG


def describe_topic_configs(
    config: LogConfig, broker: KafkaConfig, names: tuple[str, ...] | None = None
) -> list[ConfigEntry]:
    """Every topic config of ``config`` (or only ``names``; unknown names are left out, as Kafka
    does), sorted by name."""
    values = config.to_props(include_defaults=True)
    builtin = LogConfig().to_props(include_defaults=True)
    wanted = LogConfig.config_names() if names is None else sorted(set(names) & set(values))
    entries = []
    for name in wanted:
        synonyms = []
        if name in config.overridden:
            synonyms.append(ConfigSynonym(name, values[name], ConfigSource.TOPIC_CONFIG))
        broker_names = broker_synonyms(name)
        for broker_name in broker_names:
            if broker_name in broker.originals:
                synonyms.append(
                    ConfigSynonym(
                        broker_name, broker.originals[broker_name], ConfigSource.STATIC_BROKER_CONFIG
                    )
                )
        default_name = broker_names[0] if broker_names else name
        synonyms.append(ConfigSynonym(default_name, builtin[name], ConfigSource.DEFAULT_CONFIG))
        # The topic's LogConfig was built on the broker-derived defaults: its value is the effective one.
        entries.append(
            ConfigEntry(
                name,
                values[name],
                synonyms[0].source,
                False,
                False,
                tuple(synonyms),
                _TYPE_IDS[config_type(name)],
            )
        )
    return entries


def _sensitive(name: str) -> bool:
    return any(word in name for word in _SENSITIVE_WORDS)


def describe_broker_configs(broker: KafkaConfig, names: tuple[str, ...] | None = None) -> list[ConfigEntry]:
    """The broker's configs: Kafka's defaults this broker knows, the topic defaults under their broker
    names, and everything set in ``server.properties`` / overrides (STATIC_BROKER_CONFIG)."""
    values: dict[str, tuple[str, int]] = {
        name: (value, ConfigSource.DEFAULT_CONFIG) for name, value in BROKER_DEFAULTS.items()
    }
    topic_defaults = broker.log_config.to_props(include_defaults=True)
    for topic_name in LogConfig.config_names():
        for broker_name in broker_synonyms(topic_name)[:1]:
            values.setdefault(broker_name, (topic_defaults[topic_name], ConfigSource.DEFAULT_CONFIG))
    for name, value in broker.originals.items():
        values[name] = (value, ConfigSource.STATIC_BROKER_CONFIG)
    wanted = sorted(values) if names is None else sorted(set(names) & set(values))
    entries = []
    for name in wanted:
        value, source = values[name]
        sensitive = _sensitive(name)
        shown = None if sensitive else value
        synonyms = [ConfigSynonym(name, shown, source)]
        if source == ConfigSource.STATIC_BROKER_CONFIG and name in BROKER_DEFAULTS:
            synonyms.append(ConfigSynonym(name, BROKER_DEFAULTS[name], ConfigSource.DEFAULT_CONFIG))
        entries.append(
            ConfigEntry(
                name,
                shown,
                source,
                True,
                sensitive,
                tuple(synonyms),
                _TYPE_IDS["password" if sensitive else "string"],
            )
        )
    return entries
