"""Kafka's ``AlterConfigOp``: the operations of IncrementalAlterConfigs and how they change a set of
config values — one rule for topic overrides and dynamic broker configs alike (Kafka's
``prepareIncrementalConfigs``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from kafkalog.errors import InvalidConfigError, InvalidRequestError
from kafkalog.storage.config import LogConfig, config_type

__all__ = ["AlterOp", "altered_values", "apply_alter_ops", "topic_list_default"]


class AlterOp:
    """Kafka's ``AlterConfigOp.OpType`` ids."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


def _as_list(text: str | None) -> list[str]:
    return [item.strip() for item in (text or "").split(",") if item.strip()]


def apply_alter_ops(
    current: dict[str, str],
    ops: Iterable[tuple[str, int, str | None]],
    list_default: Callable[[str], str | None],
) -> dict[str, str]:
    """``current`` after (name, op, value) operations. APPEND and SUBTRACT take items (comma
    separated) into or out of a list config, starting from its default when it has no value here;
    ``list_default(name)`` gives that default, or None when ``name`` is not a list config (then
    INVALID_CONFIG, as Kafka answers)."""
    result = dict(current)
    for name, op, value in ops:
        if op == AlterOp.SET:
            if value is None:
                raise InvalidRequestError(f"Null value not supported for : {name}")
            result[name] = value
        elif op == AlterOp.DELETE:
            result.pop(name, None)
        elif op in (AlterOp.APPEND, AlterOp.SUBTRACT):
            default = list_default(name)
            if default is None:  # Kafka's controller, ConfigurationControlManager's text
                verb = "APPEND" if op == AlterOp.APPEND else "SUBTRACT"
                raise InvalidConfigError(f"Can't {verb} to key {name} because its type is not LIST.")
            items = _as_list(result.get(name, default))
            changes = _as_list(value)
            if op == AlterOp.APPEND:
                items += [item for item in changes if item not in items]
            else:
                items = [item for item in items if item not in changes]
            result[name] = ",".join(items)
        else:
            raise InvalidRequestError(f"Unknown operations type {op}")
    return result


def altered_values(
    current: dict[str, str],
    configs: list[tuple[str, int, str | None]],
    incremental: bool,
    list_default: Callable[[str], str | None],
) -> dict[str, str]:
    """A resource's new set of values: IncrementalAlterConfigs' operations on ``current``
    (``incremental``), or AlterConfigs' values replacing it whole."""
    if incremental:
        return apply_alter_ops(current, configs, list_default)
    return {name: value for name, _, value in configs if value is not None}


def topic_list_default(name: str) -> str | None:
    """The default of the topic config ``name`` in Kafka's text form when it is a list (the base of
    APPEND/SUBTRACT), else None — an unknown name too (Kafka's ``isSplittable`` is false for it)."""
    try:
        if config_type(name) != "list":
            return None
    except InvalidConfigError:
        return None
    return str(LogConfig().to_props(include_defaults=True)[name])
