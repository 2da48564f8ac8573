"""Dynamic group configs: the GROUP config resource (type 32) of KIP-848 as Kafka 4.0 serves it
(Kafka's ``GroupConfig``, ``GroupConfigManager``, and the controller's validation of a GROUP change
in ``ControllerConfigurationValidator``).

A group config is set per group id, whether or not the group exists, and kept in
``kafkalog-group-configs.json`` in the data directory (docs/FORMAT.md §7; Kafka keeps them as
``ConfigRecord``s in its metadata log). Each name Kafka 4.0 knows has a default: the broker's
``group.consumer.*`` config for the consumer ones and ``group.share.record.lock.duration.ms`` for
the record lock (Kafka 4.0's ``extractGroupConfigMap``), Kafka's built-in default for the others;
a value set must also lie within the broker's ``group.consumer.min/max.*`` and ``group.share.*``
bounds. These configs govern KIP-848 consumer groups and KIP-932 share groups only; kafkalog runs
the classic protocol, so it keeps and describes them but nothing here reads them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafkalog.broker.alter_config_op import altered_values
from kafkalog.broker.config import GROUP_BOUNDED, KafkaConfig
from kafkalog.broker.handlers import component, register_component
from kafkalog.errors import InvalidConfigError, InvalidRequestError
from kafkalog.storage.config_def import at_least, java_trim, parse_int
from kafkalog.storage.files import write_file_atomically

__all__ = [
    "GROUP_CONFIGS",
    "GROUP_CONFIGS_FILE",
    "GROUP_CONFIG_MANAGER",
    "GroupConfigDef",
    "GroupConfigManager",
    "alter_group_configs",
    "group_config_defaults",
    "group_config_manager",
    "parse_group_config",
    "validate_group_configs",
]

GROUP_CONFIGS_FILE = "kafkalog-group-configs.json"
GROUP_CONFIG_MANAGER = "group_config_manager"  # the broker component: apis.components[...]
_VERSION = 1


@dataclass(frozen=True, slots=True)
class GroupConfigDef:
    """One of Kafka's ``GroupConfig`` definitions."""

    name: str
    type: str  # "int" or "string", Kafka's ConfigDef type
    default: str  # Kafka's built-in default
    broker_default: str | None = None  # the broker config whose value is the default, if any
    at_least: int | None = None


# Kafka 4.0's GroupConfig, in its definition order (the order values are parsed, so the order errors
# are found in).
GROUP_CONFIGS: tuple[GroupConfigDef, ...] = (
    GroupConfigDef("consumer.session.timeout.ms", "int", "45000", "group.consumer.session.timeout.ms", 1),
    GroupConfigDef("consumer.heartbeat.interval.ms", "int", "5000",
                   "group.consumer.heartbeat.interval.ms", 1),
    # Kafka 4.0 does not default the share session timeout and heartbeat interval to the broker's
    # group.share.* values (4.1 does, KAFKA-19075): their built-in defaults stand.
    GroupConfigDef("share.session.timeout.ms", "int", "45000", None, 1),
    GroupConfigDef("share.heartbeat.interval.ms", "int", "5000", None, 1),
    GroupConfigDef("share.record.lock.duration.ms", "int", "30000",
                   "group.share.record.lock.duration.ms", 1000),
    GroupConfigDef("share.auto.offset.reset", "string", "latest"),
)
_BY_NAME = {d.name: d for d in GROUP_CONFIGS}
# Kafka's GroupConfig.validateValues checks the bounds (the broker's min and max configs of each
# bounded group config, GROUP_BOUNDED) in that table's order, then each session timeout against its
# heartbeat interval.
_SESSION_OVER_HEARTBEAT = (
    ("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"),
    ("share.session.timeout.ms", "share.heartbeat.interval.ms"),
)
# java.time.Duration.parse's ISO-8601 form PnDTnHnMn.nS (case-insensitive, signs allowed per part).
_DURATION = re.compile(
    r"([-+]?)P(?:([-+]?[0-9]+)D)?"
    r"(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?",
    re.IGNORECASE,
)
_BY_DURATION = "by_duration:"


def _is_non_negative_duration(text: str) -> bool:
    """Whether ``text`` is what ``Duration.parse`` takes and not negative."""
    match = _DURATION.fullmatch(text)
    if match is None or match.group(3) == "T":
        return False
    sign, days, _, hours, minutes, seconds, fraction = match.groups()
    if days is None and hours is None and minutes is None and seconds is None:
        return False
    whole = int(days or 0) * 86400 + int(hours or 0) * 3600 + int(minutes or 0) * 60 + int(seconds or 0)
    nanos = int((fraction or "").ljust(9, "0")) * (-1 if (seconds or "").startswith("-") else 1)
    total = (whole * 10**9 + nanos) * (-1 if sign == "-" else 1)
    return 0 <= total // 10**9 < 2**63  # Duration's seconds are a long


def parse_group_config(name: str, value: str) -> str:
    """``value`` of the group config ``name`` in the form Kafka describes it (an int without sign or
    leading zeros, a trimmed string); InvalidConfigError with Kafka's ``ConfigException`` message if
    Kafka's ``ConfigDef`` would not take it (the broker's bounds are ``validate_group_configs``')."""
    definition = _BY_NAME[name]
    if definition.type == "int":
        number = parse_int(name, value)
        if definition.at_least is not None:
            at_least(definition.at_least)(name, number)
        return str(number)
    text = java_trim(value)
    # share.auto.offset.reset: ShareGroupAutoOffsetResetStrategy's validator (case-sensitive)
    if text in ("latest", "earliest") or (
        text.startswith(_BY_DURATION) and _is_non_negative_duration(text[len(_BY_DURATION) :])
    ):
        return text
    raise InvalidConfigError(
        f"Invalid value {text} for configuration {name}: Invalid value `{text}` for configuration {name}. "
        "The value must be either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS.>'."
    )


def group_config_defaults(broker: KafkaConfig) -> dict[str, str]:
    """Every group config's default under the broker's configs, in Kafka's text form."""
    return {
        d.name: str(broker.get_int(d.broker_default)) if d.broker_default is not None else d.default
        for d in GROUP_CONFIGS
    }


def validate_group_configs(props: Mapping[str, str], broker: KafkaConfig) -> None:
    """Kafka's ``GroupConfigManager.validate`` of a group's whole new set of configs: every name
    known, every value parsed (over the defaults), within the broker's bounds, and each session
    timeout above its heartbeat interval. InvalidConfigError saying what is wrong."""
    for name in props:
        if name not in _BY_NAME:
            raise InvalidConfigError(f"Unknown group config name: {name}")
    combined = {**group_config_defaults(broker), **props}
    values = {d.name: parse_group_config(d.name, combined[d.name]) for d in GROUP_CONFIGS}
    for name, (_, lower, upper) in GROUP_BOUNDED.items():
        number = int(values[name])
        if number < broker.get_int(lower):
            raise InvalidConfigError(f"{name} must be greater than or equal to {lower}")
        if number > broker.get_int(upper):
            raise InvalidConfigError(f"{name} must be less than or equal to {upper}")
    for session, heartbeat in _SESSION_OVER_HEARTBEAT:
        if int(values[session]) <= int(values[heartbeat]):
            raise InvalidConfigError(f"{session} must be greater than {heartbeat}")


def _read_error(path: Path, what: str) -> InvalidConfigError:
    return InvalidConfigError(
        f"Cannot read the group configs in {path}: {what} (expected "
        f'{{"version": {_VERSION}, "groups": {{group: {{name: value}}}}}} with string values)'
    )


class GroupConfigManager:
    """group id -> its dynamic configs (names Kafka knows, raw values), persisted in ``directory``.
    A group without configs is not kept."""

    def __init__(self, directory: Path | str, configs: dict[str, dict[str, str]]) -> None:
        self.path = Path(directory) / GROUP_CONFIGS_FILE
        self._configs = configs

    @classmethod
    def load(cls, directory: Path | str) -> GroupConfigManager:
        """The group configs kept in ``directory`` (none if it has no file); InvalidConfigError
        naming the file and what is wrong with it otherwise."""
        path = Path(directory) / GROUP_CONFIGS_FILE
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return cls(directory, {})
        except (OSError, ValueError) as e:
            raise _read_error(path, str(e)) from e
        if not isinstance(document, dict) or document.get("version") != _VERSION:
            raise _read_error(path, f"not a version {_VERSION} file")
        groups = document.get("groups")
        if not isinstance(groups, dict):
            raise _read_error(path, 'no "groups" object')
        configs: dict[str, dict[str, str]] = {}
        for group, props in groups.items():
            if not group or not isinstance(props, dict):
                raise _read_error(path, f"group {group!r}")
            for name, value in props.items():
                if not isinstance(value, str):
                    raise _read_error(path, f"the value of {name} for group {group} is not a string")
                if name not in _BY_NAME:
                    raise _read_error(path, f"unknown group config name {name} for group {group}")
                try:
                    parse_group_config(name, value)
                except InvalidConfigError as e:
                    raise _read_error(path, f"group {group}: {e}") from e
            if props:
                configs[group] = dict(props)
        return cls(directory, configs)

    def group_config(self, group: str) -> dict[str, str]:
        """The configs set on ``group`` (empty if none)."""
        return dict(self._configs.get(group, {}))

    def groups(self) -> list[str]:
        """Every group with a config set, sorted."""
        return sorted(self._configs)

    def update_group_config(self, group: str, props: Mapping[str, str]) -> None:
        """Replace ``group``'s configs with ``props`` (none: forget the group); persisted first."""
        configs = dict(self._configs)
        if props:
            configs[group] = dict(props)
        else:
            configs.pop(group, None)
        document = {
            "version": _VERSION,
            "groups": {g: dict(sorted(p.items())) for g, p in sorted(configs.items())},
        }
        text = json.dumps(document, indent=2, ensure_ascii=False)
        write_file_atomically(self.path, (text + "\n").encode("utf-8"))
        self._configs = configs


def group_config_manager(apis: Any) -> GroupConfigManager:
    """The broker's ``GroupConfigManager`` (loaded at startup, or on first use in a test)."""
    manager: GroupConfigManager = component(apis, GROUP_CONFIG_MANAGER)
    return manager


def alter_group_configs(
    apis: Any,
    group: str,
    configs: list[tuple[str, int, str | None]],
    incremental: bool,
    validate_only: bool,
) -> None:
    """Alter ``group``'s configs with (name, op, value) ``configs`` — IncrementalAlterConfigs'
    operations, or AlterConfigs' (``incremental`` false: the values replace the group's whole set) —
    as Kafka's controller does: the operations first (APPEND/SUBTRACT: INVALID_CONFIG, no group
    config is a list), then the group name, then the whole new set is validated. Unless
    ``validate_only`` it is then kept. Raises InvalidRequestError / InvalidConfigError (and nothing
    changes)."""
    manager = group_config_manager(apis)
    updated = altered_values(manager.group_config(group), configs, incremental, lambda _name: None)
    if not group:
        raise InvalidRequestError("Default group resources are not allowed.")
    validate_group_configs(updated, apis.config)
    if not validate_only:
        manager.update_group_config(group, updated)


register_component(GROUP_CONFIG_MANAGER, lambda apis: GroupConfigManager.load(apis.log_manager.data_dir))
