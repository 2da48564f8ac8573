"""What DescribeConfigs (and CreateTopics v5+) say about a topic's, a group's or the broker's configs
(Kafka's ``ConfigHelper``): each config's effective value, where it came from, its synonyms and its
type.

A topic config's value comes from the topic's override (TOPIC_CONFIG), else from a broker config
that sets its default — this node's dynamic one (DYNAMIC_BROKER_CONFIG), the cluster-wide dynamic
one (DYNAMIC_DEFAULT_BROKER_CONFIG), then ``server.properties`` (STATIC_BROKER_CONFIG), e.g.
``log.retention.hours`` for ``retention.ms`` — else from Kafka's built-in default (DEFAULT_CONFIG).
Synonyms list every source that has a value, highest precedence first, as Kafka does. A broker
config is read-only unless Kafka lets it change at runtime (``dynamic_broker_config``); a name that
looks like a secret is sensitive and its value is withheld.

A group config's value is the group's own (GROUP_CONFIG), else its default (DEFAULT_CONFIG), which
for some is a broker config's value (``consumer.session.timeout.ms`` takes
``group.consumer.session.timeout.ms``'s) though Kafka 4.0 names no broker synonym for it.

Who may see or change a resource's configs (``config_authorization_error``): DESCRIBE_CONFIGS or
ALTER_CONFIGS on the topic for a topic's, on the group for a group's, on the cluster for the
broker's, its loggers' and client-metrics subscriptions'.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from kafkalog.broker import acl
from kafkalog.broker.auth_helper import authorize
from kafkalog.broker.config import BROKER_DEFAULTS, KafkaConfig
from kafkalog.broker.dynamic_broker_config import is_dynamic
from kafkalog.broker.group.group_config import GROUP_CONFIGS, group_config_defaults, parse_group_config
from kafkalog.broker.request import RequestContext
from kafkalog.errors import InvalidConfigError
from kafkalog.storage.config import LogConfig, broker_synonyms, config_type, topic_config_for

__all__ = [
    "ConfigEntry",
    "ConfigSource",
    "ConfigSynonym",
    "ResourceType",
    "config_authorization_error",
    "describe_broker_configs",
    "describe_group_configs",
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
    GROUP_CONFIG = 8


class ResourceType:
    """Kafka's ``ConfigResource.Type`` ids."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


_CLUSTER_GUARDED = frozenset({ResourceType.BROKER, ResourceType.BROKER_LOGGER, ResourceType.CLIENT_METRICS})


def config_authorization_error(
    apis: Any, request: RequestContext, operation: acl.AclOperation, resource_type: int, resource_name: str
) -> ErrorCode:
    """NONE when ``request`` may ``operation`` (DESCRIBE_CONFIGS or ALTER_CONFIGS) the configs of
    the resource, else the error Kafka answers for it (``ConfigHelper.handleDescribeConfigsRequest``,
    ``ControllerApis.authorizeAlterResource``). NONE for a type Kafka authorizes nothing on: it is
    refused as unknown."""
    if resource_type == ResourceType.TOPIC:
        guard, name = acl.ResourceType.TOPIC, resource_name
        denied = ErrorCode.topic_authorization_failed
    elif resource_type == ResourceType.GROUP:
        guard, name = acl.ResourceType.GROUP, resource_name
        denied = ErrorCode.group_authorization_failed
    elif resource_type in _CLUSTER_GUARDED:
        guard, name = acl.ResourceType.CLUSTER, acl.CLUSTER_NAME
        denied = ErrorCode.cluster_authorization_failed
    else:
        return ErrorCode.none
    return ErrorCode.none if authorize(apis, request, operation, guard, name) else denied


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


def _broker_name_synonyms(name: str) -> tuple[str, ...]:
    """The broker configs that name one setting in several units (Kafka's ``brokerConfigSynonyms``:
    ``log.retention.ms``/``.minutes``/``.hours``, ...), in precedence order; else ``name`` alone."""
    topic_name = topic_config_for(name)
    return broker_synonyms(topic_name) if topic_name is not None else (name,)


def _layers(broker: KafkaConfig) -> tuple[tuple[int, Mapping[str, str]], ...]:
    """Where a broker config's value can come from, highest precedence first."""
    return (
        (ConfigSource.DYNAMIC_BROKER_CONFIG, broker.dynamic_broker),
        (ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, broker.dynamic_default),
        (ConfigSource.STATIC_BROKER_CONFIG, broker.originals),
    )


def _set_synonyms(
    broker: KafkaConfig, names: tuple[str, ...], sensitive: bool = False
) -> list[ConfigSynonym]:
    """Every value set for ``names`` (synonyms of one setting), source by source (Kafka's
    ``configSynonyms``: all names of a source before the next source)."""
    return [
        ConfigSynonym(name, None if sensitive else layer[name], source)
        for source, layer in _layers(broker)
        for name in names
        if name in layer
    ]


# Kafka's KafkaConfig defaults of the broker configs that set a topic config in another unit: the
# first name of these four has no default (null) — the value comes from a later name — which is why
# Kafka reports `retention.ms` without a DEFAULT synonym (its synonyms are cut to those from the
# first name on). Every other broker synonym defaults to its topic config's default.
_BROKER_SYNONYM_DEFAULTS: dict[str, str | None] = {
    "log.retention.ms": None,
    "log.retention.minutes": None,
    "log.retention.hours": "168",
    "log.roll.ms": None,
    "log.roll.hours": "168",
    "log.roll.jitter.ms": None,
    "log.roll.jitter.hours": "0",
    "log.flush.interval.ms": None,
    "log.flush.scheduler.interval.ms": BROKER_DEFAULTS["log.flush.scheduler.interval.ms"],
}


def _broker_synonym_default(broker_name: str, topic_name: str, builtin: Mapping[str, Any]) -> str | None:
    """Kafka's default of one broker synonym of ``topic_name`` (None: it has none)."""
    if broker_name in _BROKER_SYNONYM_DEFAULTS:
        return _BROKER_SYNONYM_DEFAULTS[broker_name]
    return str(builtin[topic_name])


def _topic_config_synonyms(broker: KafkaConfig, topic_name: str, builtin: Mapping[str, Any]
                           ) -> list[ConfigSynonym]:
    """Kafka's ``configSynonyms`` for a topic config: the broker synonyms set, source by source, then
    their defaults, all cut to those from the first synonym's name on (none for a topic config no
    broker config sets)."""
    names = broker_synonyms(topic_name)
    if not names:
        return []
    synonyms = _set_synonyms(broker, names)
    for name in names:
        default = _broker_synonym_default(name, topic_name, builtin)
        if default is not None:
            synonyms.append(ConfigSynonym(name, default, ConfigSource.DEFAULT_CONFIG))
    while synonyms and synonyms[0].name != names[0]:
        synonyms.pop(0)
    return synonyms


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
        synonyms.extend(_topic_config_synonyms(broker, name, builtin))
        # The topic's LogConfig was built on the broker-derived defaults: its value is the effective one.
        entries.append(
            ConfigEntry(
                name,
                values[name],
                synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG,
                False,
                False,
                tuple(synonyms),
                _TYPE_IDS[config_type(name)],
            )
        )
    return entries


def created_topic_configs(config: LogConfig, broker: KafkaConfig, given: Mapping[str, str]
                          ) -> list[ConfigEntry]:
    """The configs CreateTopics v5+ returns for a new topic (Kafka's controller,
    ``KafkaConfigSchema.resolveEffectiveTopicConfig``, not DescribeConfigs' rules): a config given in
    the request as its string, as given; otherwise the value with the source of the first broker
    synonym set (dynamic for this node, cluster-wide, static), else the default. No synonyms."""
    values = config.to_props(include_defaults=True)
    entries = []
    for name in LogConfig.config_names():
        if name in given:
            value, source = given[name], ConfigSource.TOPIC_CONFIG
        else:
            found = _set_synonyms(broker, broker_synonyms(name))
            value = str(values[name])
            source = found[0].source if found else ConfigSource.DEFAULT_CONFIG
        entries.append(ConfigEntry(name, value, source, False, False, (), _TYPE_IDS[config_type(name)]))
    return entries


def describe_group_configs(
    props: Mapping[str, str], broker: KafkaConfig, names: tuple[str, ...] | None = None
) -> list[ConfigEntry]:
    """Every group config (or only ``names``; unknown names are left out) of a group whose own
    configs are ``props``, sorted by name (Kafka's ``createGroupConfigEntry``): the group's value
    (GROUP_CONFIG) or the default (DEFAULT_CONFIG), first among the synonyms, then a broker config
    of the same name if one is set; never read-only or sensitive."""
    defaults = group_config_defaults(broker)
    types = {d.name: d.type for d in GROUP_CONFIGS}
    wanted = sorted(types) if names is None else sorted(set(names) & set(types))
    entries = []
    for name in wanted:
        if name in props:
            value, source = parse_group_config(name, props[name]), ConfigSource.GROUP_CONFIG
        else:
            value, source = defaults[name], ConfigSource.DEFAULT_CONFIG
        synonyms = (ConfigSynonym(name, value, source), *_set_synonyms(broker, (name,)))
        entries.append(ConfigEntry(name, value, source, False, False, synonyms, _TYPE_IDS[types[name]]))
    return entries


def _sensitive(name: str) -> bool:
    return any(word in name for word in _SENSITIVE_WORDS)


# The types Kafka's KafkaConfig defines for the broker configs kafkalog lists beyond the topic
# defaults (those take their topic config's type; Kafka's hour and minute variants are ints).
_BROKER_TYPES: dict[str, str] = {
    **dict.fromkeys(("advertised.listeners", "authorizer.class.name", "listener.security.protocol.map",
                     "listeners", "log.dir", "log.dirs", "max.connections.per.ip.overrides",
                     "ssl.client.auth", "ssl.keystore.type", "ssl.principal.mapping.rules",
                     "ssl.truststore.type"), "string"),
    **dict.fromkeys(("auto.create.topics.enable", "delete.topic.enable", "log.cleaner.enable",
                     "transaction.partition.verification.enable"), "boolean"),
    **dict.fromkeys(("connections.max.idle.ms", "log.cleaner.backoff.ms", "log.cleaner.dedupe.buffer.size",
                     "log.flush.scheduler.interval.ms", "log.retention.check.interval.ms",
                     "offsets.retention.check.interval.ms", "replica.high.watermark.checkpoint.interval.ms"),
                    "long"),
    **dict.fromkeys(("log.cleaner.io.buffer.load.factor", "log.cleaner.io.max.bytes.per.second"), "double"),
    "ssl.enabled.protocols": "list",
    "producer.id.expiration.check.interval.ms": "int",  # internal: listed only when set
}


def _broker_config_type(name: str) -> int:
    """The config's type id as Kafka's DescribeConfigs gives it (0, UNKNOWN, for a name its
    KafkaConfig does not define, such as the StandardAuthorizer's)."""
    known = _BROKER_TYPES.get(name)
    if known is not None:
        return _TYPE_IDS[known]
    topic = topic_config_for(name)
    if topic is not None:
        return _TYPE_IDS["int" if name.endswith((".hours", ".minutes")) else config_type(topic)]
    if name in ("allow.everyone.if.no.acl.found", "super.users"):
        return 0
    if name in BROKER_DEFAULTS:
        return _TYPE_IDS["int"]  # the rest of the broker's own defaults are ints in Kafka (counts, ms)
    return _TYPE_IDS["string"]  # a config this table does not know, as it was given


def describe_broker_configs(
    broker: KafkaConfig, names: tuple[str, ...] | None = None, per_broker: bool = True
) -> list[ConfigEntry]:
    """The broker's configs (``per_broker``: this node's — Kafka's defaults this broker knows, the
    topic defaults under their broker names, and every config set, statically or dynamically), or
    the cluster-wide dynamic ones only (the resource named ``""``). Only the names Kafka can change
    at runtime are not read-only."""
    values: dict[str, str | None] = {}
    defaults: dict[str, str | None] = dict(BROKER_DEFAULTS)
    if per_broker:
        builtin = LogConfig().to_props(include_defaults=True)
        for topic_name in LogConfig.config_names():
            for broker_name in broker_synonyms(topic_name):
                defaults.setdefault(broker_name, _broker_synonym_default(broker_name, topic_name, builtin))
        values.update(defaults)
        values.update(broker.values)
    else:
        values.update(broker.dynamic_default)
    wanted = sorted(values) if names is None else sorted(set(names) & set(values))
    entries = []
    for name in wanted:
        sensitive = _sensitive(name)
        all_names = _broker_name_synonyms(name)
        synonyms = [
            s
            for s in _set_synonyms(broker, all_names, sensitive)
            if per_broker or s.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
        ]
        if per_broker:
            synonyms += [ConfigSynonym(n, None if sensitive else default, ConfigSource.DEFAULT_CONFIG)
                         for n in all_names if (default := defaults.get(n)) is not None]
        while synonyms and synonyms[0].name != name:  # Kafka drops other names' values ahead of its own
            synonyms.pop(0)
        source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
        entries.append(
            ConfigEntry(
                name,
                None if sensitive else values[name],
                source,
                not is_dynamic(name),
                sensitive,
                tuple(synonyms)
                if synonyms
                else (ConfigSynonym(name, None if sensitive else values[name], source),),
                _TYPE_IDS["password"] if sensitive else _broker_config_type(name),
            )
        )
    return entries


def check_topic_config_for_this_broker(config: LogConfig) -> None:
    """What Kafka's broker refuses in a topic's configs beyond their own rules
    (``LogConfig.validateRemoteStorageOnlyIfSystemEnabled``): this broker has no tiered storage."""
    if config.remote_storage_enable:
        raise InvalidConfigError("Tiered Storage functionality is disabled in the broker. Topic cannot be "
                                 "configured with remote log storage.")
