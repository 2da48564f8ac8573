"""The broker's log levels as a config resource (Kafka's ``RuntimeLoggerManager`` and
``Log4jController``, KIP-412): DescribeConfigs on a BROKER_LOGGER resource (type 8, named by the
node id) lists every logger of this process with its effective level, and IncrementalAlterConfigs
SETs a logger's level or DELETEs it (back to inheriting its parent's), at runtime — what
``kafka-configs.sh --entity-type broker-loggers`` does against a Kafka broker.

Kafka's loggers are log4j's; kafkalog's are Python's ``logging`` loggers (``kafkalog.broker.…``,
``kafkalog.storage.…``, one per module, and any a host application made). Levels travel under
log4j's names: TRACE (below DEBUG; Python has none), DEBUG, INFO, WARN, ERROR and FATAL
(CRITICAL). The root logger is ``root``, as in Kafka, and its level cannot be deleted.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from kafkalog.broker.alter_config_op import AlterOp
from kafkalog.errors import InvalidConfigError, InvalidRequestError

__all__ = ["ROOT_LOGGER", "VALID_LOG_LEVELS", "apply_changes_for_resource", "loggers"]

log = logging.getLogger(__name__)

ROOT_LOGGER = "root"
TRACE = 5  # log4j's TRACE: below Python's DEBUG (10)
_LEVELS = {
    "TRACE": TRACE,
    "DEBUG": logging.DEBUG,
    "INFO": logging.INFO,
    "WARN": logging.WARNING,
    "ERROR": logging.ERROR,
    "FATAL": logging.CRITICAL,
}
VALID_LOG_LEVELS = frozenset(_LEVELS)  # case-sensitive, as Kafka's LogLevelConfig
_VALID_LOG_LEVELS_STRING = ", ".join(sorted(VALID_LOG_LEVELS))


def _level_name(level: int) -> str:
    """The log4j name of a Python level: the highest log4j level at or below it (NOTSET on the
    root logger, which logs everything, is TRACE)."""
    found = "TRACE"
    for name, value in _LEVELS.items():
        if level >= value:
            found = name
    return found


def _existing(name: str) -> logging.Logger | None:
    """The logger ``name`` if this process has made it (``logging.getLogger`` would make one)."""
    if name == ROOT_LOGGER:
        return logging.getLogger()
    found = logging.Logger.manager.loggerDict.get(name)
    return found if isinstance(found, logging.Logger) else None


def loggers() -> dict[str, str]:
    """Every logger's effective level by name, ``root`` first (Kafka's ``Log4jController.loggers``)."""
    found = {ROOT_LOGGER: _level_name(logging.getLogger().level)}
    for name in sorted(logging.Logger.manager.loggerDict):
        logger = _existing(name)
        if logger is not None:
            found[name] = _level_name(logger.getEffectiveLevel())
    return found


def _validate_node(node_id: int, resource_name: str) -> None:
    try:
        requested = int(resource_name)
    except ValueError:
        raise InvalidRequestError(f"Node id must be an integer, but it is: {resource_name}") from None
    if requested != node_id:
        raise InvalidRequestError(f"Unexpected node id. Expected {node_id}, but received {resource_name}")


def _validate(ops: list[tuple[str, int, str | None]]) -> None:
    for name, op, value in ops:
        if op == AlterOp.SET:
            if _existing(name) is None:
                raise InvalidConfigError(f"Logger {name} does not exist!")
            if value not in VALID_LOG_LEVELS:
                raise InvalidConfigError(
                    f"Cannot set the log level of {name} to {value} as it is not a supported log level. "
                    f"Valid log levels are {_VALID_LOG_LEVELS_STRING}"
                )
        elif op == AlterOp.DELETE:
            if _existing(name) is None:
                raise InvalidConfigError(f"Logger {name} does not exist!")
            if name == ROOT_LOGGER:
                raise InvalidRequestError(
                    f"Removing the log level of the {ROOT_LOGGER} logger is not allowed"
                )
        elif op in (AlterOp.APPEND, AlterOp.SUBTRACT):
            verb = "APPEND" if op == AlterOp.APPEND else "SUBTRACT"
            raise InvalidRequestError(f"{verb} operation is not allowed for the BROKER_LOGGER resource")
        else:
            raise InvalidRequestError(
                f"Unknown operation type {op} is not allowed for the BROKER_LOGGER resource"
            )


def apply_changes_for_resource(
    node_id: int, resource_name: str, ops: Iterable[tuple[str, int, str | None]], validate_only: bool
) -> None:
    """Check every (logger, op, level) of one BROKER_LOGGER resource, then (unless
    ``validate_only``) apply them all; InvalidRequestError / InvalidConfigError say what was wrong,
    and then nothing is changed."""
    _validate_node(node_id, resource_name)
    checked = list(ops)
    _validate(checked)
    if validate_only:
        return
    for name, op, value in checked:
        logger = _existing(name)
        assert logger is not None  # checked above
        if op == AlterOp.SET:
            assert value is not None
            logger.setLevel(_LEVELS[value])
            log.warning("Updated the log level of %s to %s", name, value)
        else:
            logger.setLevel(logging.NOTSET)  # inherit the parent's, as log4j's setLevel(null)
            log.warning("Unset the log level of %s", name)
