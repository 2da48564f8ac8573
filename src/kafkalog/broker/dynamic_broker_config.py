"""Dynamic broker configs (Kafka's ``DynamicBrokerConfig``): broker configs altered at runtime with
(Incremental)AlterConfigs on the BROKER resource — cluster-wide (resource name ``""``, what
``kafka-configs.sh --entity-default`` sets) or for this node (its id) — and kept across restarts
in ``kafkalog-broker-configs.json`` in the data directory (Kafka keeps them in its metadata log).

Precedence, as in Kafka: this node's dynamic value, then the cluster-wide one, then the static
config (``server.properties``), then the default. Topic-config defaults (the ``log.*`` names,
``message.max.bytes``) apply at once to every topic without an override of its own
(``LogManager.reconfigure_default_config``); the other names Kafka lets you change at runtime
(thread counts, connection limits, cleaner settings, producer-state expiry) are kept and described
and take effect where kafkalog reads them (``apis.config``; the log cleaner's restart its threads
with them, as Kafka's do; ``producer.id.expiration.ms`` goes to the ``ProducerStateManagerConfig``
every partition shares), the rest at the next start; per-broker
TLS/SASL configs are kept as Kafka keeps them (they take effect when the listeners next start). A
name Kafka only reads at startup is refused ("Cannot update these configs dynamically"), and so are
the listeners, which kafkalog does not rebind at runtime.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, TypeGuard

from kafkalog.broker.alter_config_op import altered_values, topic_list_default
from kafkalog.broker.config import BROKER_DEFAULTS, INTERNAL_BROKER_DEFAULTS, KafkaConfig
from kafkalog.broker.connection_quotas import CONNECTION_QUOTAS, validate_connection_quota_configs
from kafkalog.errors import InvalidConfigError, InvalidRequestError, KafkaLogError
from kafkalog.storage.cleaner.cleaner_config import CleanerConfig
from kafkalog.storage.config import broker_synonyms, topic_config_for
from kafkalog.storage.files import write_file_atomically
from kafkalog.storage.producer_state import ProducerStateManagerConfig

__all__ = ["DYNAMIC_BROKER_CONFIGS_FILE", "alter_broker_configs", "is_dynamic", "load_dynamic_configs"]

log = logging.getLogger(__name__)

DYNAMIC_BROKER_CONFIGS_FILE = "kafkalog-broker-configs.json"

# Kafka's AllDynamicConfigs, less what needs listeners kafkalog does not have.
_CLEANER_CONFIGS = frozenset(
    {
        "log.cleaner.threads",
        "log.cleaner.dedupe.buffer.size",
        "log.cleaner.io.buffer.load.factor",
        "log.cleaner.io.buffer.size",
        "message.max.bytes",
        "log.cleaner.io.max.bytes.per.second",
        "log.cleaner.backoff.ms",
    }
)
# Kafka's thread-pool defaults: a dynamic count must stay within half and double the current one.
_THREAD_POOLS = {
    "num.io.threads": 8,
    "num.replica.fetchers": 1,
    "num.recovery.threads.per.data.dir": 2,
    "background.threads": 10,
}
_OTHER_CONFIGS = frozenset(
    {
        "max.connections",
        "max.connection.creation.rate",
        "max.connections.per.ip",
        "max.connections.per.ip.overrides",
        "num.network.threads",
        "producer.id.expiration.ms",
        "transaction.partition.verification.enable",
        "metric.reporters",
    }
)
# With every broker config that sets a topic config's default (Kafka's DynamicLogConfig; see
# is_dynamic), these are the names Kafka can change at runtime.
_NON_LOG_DYNAMIC_CONFIGS = _CLEANER_CONFIGS | frozenset(_THREAD_POOLS) | _OTHER_CONFIGS
_LISTENER_CONFIGS = frozenset({"listeners", "advertised.listeners", "listener.security.protocol.map"})
# Kafka's per-listener TLS/SASL configs: accepted per broker and kept (read when the listeners next
# start).
_SECURITY_PREFIXES = ("ssl.", "sasl.", "principal.builder.class")
_STORE_PREFIXES = ("ssl.keystore.", "ssl.truststore.", "ssl.key.password")


def _is_security(name: str) -> bool:
    return name.startswith(_SECURITY_PREFIXES)


def is_dynamic(name: str) -> bool:
    """Whether Kafka (and kafkalog) let ``name`` change at runtime: of a topic config's broker
    synonyms only the first (``log.retention.ms``, not ``.hours``; Kafka's
    ``DynamicLogConfig.ReconfigurableConfigs``), and never ``log.message.format.version``."""
    if name in _NON_LOG_DYNAMIC_CONFIGS:
        return True
    topic = topic_config_for(name)
    return (topic is not None and broker_synonyms(topic)[0] == name
            and name != "log.message.format.version")


def _scala_set(names: list[str]) -> str:
    return "Set(" + ", ".join(sorted(names)) + ")"


def _is_str_map(value: object) -> TypeGuard[dict[str, str]]:
    return isinstance(value, dict) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    )


def load_dynamic_configs(data_dir: Path, static: KafkaConfig) -> KafkaConfig:
    """``static`` under the dynamic configs kept in ``data_dir`` (none if the file is absent)."""
    path = Path(data_dir) / DYNAMIC_BROKER_CONFIGS_FILE
    try:
        stored = json.loads(path.read_text())
    except FileNotFoundError:
        return static
    except (OSError, ValueError) as e:
        raise InvalidConfigError(f"Cannot read the dynamic broker configs in {path}: {e}") from e
    brokers = stored.get("brokers", {}) if isinstance(stored, dict) else None
    default = stored.get("cluster_default", {}) if isinstance(stored, dict) else None
    broker = brokers.get(str(static.node_id), {}) if isinstance(brokers, dict) else None
    if not _is_str_map(default) or not _is_str_map(broker):
        raise InvalidConfigError(
            f"Cannot read the dynamic broker configs in {path}: expected "
            '{"cluster_default": {name: value}, "brokers": {node id: {name: value}}} with string values'
        )
    try:
        return static.with_dynamic(default, broker)
    except KafkaLogError as e:
        raise InvalidConfigError(f"Invalid dynamic broker config in {path}: {e}") from e


def _store(data_dir: Path, config: KafkaConfig) -> None:
    path = Path(data_dir) / DYNAMIC_BROKER_CONFIGS_FILE
    brokers: dict[str, Any] = {}
    try:
        brokers = json.loads(path.read_text()).get("brokers", {})
    except (OSError, ValueError, AttributeError):
        pass
    brokers[str(config.node_id)] = dict(sorted(config.dynamic_broker.items()))
    document = {
        "version": 1,
        "cluster_default": dict(sorted(config.dynamic_default.items())),
        "brokers": {k: v for k, v in brokers.items() if v},
    }
    write_file_atomically(path, (json.dumps(document, indent=2) + "\n").encode())


def _list_default(name: str) -> str | None:
    """Kafka's base for APPEND/SUBTRACT on a broker config without a value: the default of the
    topic config it sets, when that is a list (``log.cleanup.policy``); None for any other name."""
    topic_name = topic_config_for(name)
    return topic_list_default(topic_name) if topic_name is not None else None


def _validate_names(names: list[str], per_broker: bool) -> None:
    """Kafka's ``DynamicBrokerConfig.validateConfigs`` on the names: a config Kafka reads only at
    startup is refused, a keystore or truststore config needs a listener prefix, the listener and
    security configs are per-broker only; a name neither knows is kept, as Kafka keeps custom
    configs. kafkalog also refuses to change its listeners at runtime (Kafka rebinds its sockets)."""
    static_names = [
        n
        for n in names
        if not is_dynamic(n)
        and not _is_security(n)
        and (n in BROKER_DEFAULTS or n in INTERNAL_BROKER_DEFAULTS or n.startswith("log."))
    ]
    if static_names:
        raise InvalidRequestError(f"Cannot update these configs dynamically: {_scala_set(static_names)}")
    listener_names = [n for n in names if n in _LISTENER_CONFIGS or n.startswith("listener.name.")]
    if listener_names:
        raise InvalidRequestError(
            f"Cannot update these configs dynamically: kafkalog does not rebind its listener at runtime: "
            f"{_scala_set(listener_names)}"
        )
    unprefixed = [n for n in names if n.startswith(_STORE_PREFIXES)]
    if unprefixed:
        raise InvalidRequestError(
            "These security configs can be dynamically updated only per-listener using "
            f"the listener prefix: {_scala_set(unprefixed)}"
        )
    if not per_broker:
        per_broker_only = [n for n in names if _is_security(n)]
        if per_broker_only:
            raise InvalidRequestError(
                "Cannot update these configs at default cluster level, broker id must be "
                f"specified: {_scala_set(per_broker_only)}"
            )


def _validate_thread_counts(old: KafkaConfig, new: KafkaConfig) -> None:
    for name, default in _THREAD_POOLS.items():
        before, after = old.get_int(name, default), new.get_int(name, default)
        if before == after:
            continue
        message = f"Dynamic thread count update validation failed for {name}={after}"
        if after <= 0:
            raise InvalidRequestError(f"{message}, value should be at least 1")
        if after < before // 2:
            raise InvalidRequestError(f"{message}, value should be at least half the current value {before}")
        if after > before * 2:
            raise InvalidRequestError(
                f"{message}, value should not be greater than double the current value {before}"
            )


def _reconfigure_producer_state(shared: ProducerStateManagerConfig, new: KafkaConfig) -> None:
    """Kafka's ``DynamicProducerStateManagerConfig``: every partition's producer state reads the one
    shared object, so the new expiry applies at the next snapshot load and expiration check."""
    expiration_ms = new.producer_id_expiration_ms
    if shared.producer_id_expiration_ms != expiration_ms:
        log.info("Reconfigure producer.id.expiration.ms from %d to %d",
                 shared.producer_id_expiration_ms, expiration_ms)
        shared.producer_id_expiration_ms = expiration_ms


def alter_broker_configs(
    apis: Any,
    resource_name: str,
    configs: list[tuple[str, int, str | None]],
    incremental: bool,
    validate_only: bool,
) -> KafkaConfig:
    """Alter this node's (``resource_name`` its id) or the cluster-wide (``""``) dynamic configs
    with (name, op, value) ``configs`` — IncrementalAlterConfigs' operations, or AlterConfigs'
    (``incremental`` false: the values replace the entity's whole set). Everything is checked
    first; then, unless ``validate_only``, the result is kept, applied and returned. Raises
    InvalidRequestError / InvalidConfigError saying what was wrong (and then nothing changes)."""
    config: KafkaConfig = apis.config
    per_broker = resource_name != ""
    if per_broker:
        try:
            requested = int(resource_name)
        except ValueError:
            raise InvalidRequestError(f"Node id must be an integer, but it is: {resource_name}") from None
        if requested != config.node_id:
            raise InvalidRequestError(
                f"Unexpected broker id, expected {config.node_id}, but received {resource_name}"
            )
    current = dict(config.dynamic_broker if per_broker else config.dynamic_default)
    updated = altered_values(current, configs, incremental, _list_default)
    _validate_names([name for name, _, _ in configs], per_broker)
    try:
        new_config = (
            config.with_dynamic(config.dynamic_default, updated)
            if per_broker
            else config.with_dynamic(updated, config.dynamic_broker)
        )
        new_config.log_config  # noqa: B018 - the topic defaults must still make a valid LogConfig
    except KafkaLogError as e:
        raise InvalidRequestError(str(e)) from e
    _validate_thread_counts(config, new_config)
    try:
        validate_connection_quota_configs(new_config)
    except KafkaLogError as e:
        raise InvalidRequestError(str(e)) from e
    try:
        cleaner = CleanerConfig.from_broker_props(new_config.values)
        CleanerConfig.from_broker_props(config.values).check_reconfiguration(cleaner)
    except KafkaLogError as e:
        raise InvalidRequestError(str(e)) from e
    if not validate_only:
        _store(apis.log_manager.data_dir, new_config)
        apis.config = new_config
        apis.log_manager.reconfigure_default_config(new_config.log_config)
        apis.log_manager.reconfigure_cleaner(cleaner)  # Kafka restarts its cleaner threads
        _reconfigure_producer_state(apis.log_manager.producer_state_manager_config, new_config)
        quotas = apis.components.get(CONNECTION_QUOTAS)
        if quotas is not None:
            quotas.notify()  # a raised max.connections lets waiting connections in
    return new_config
