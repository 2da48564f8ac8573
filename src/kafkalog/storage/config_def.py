"""How Kafka's ``ConfigDef`` reads a config value, and its common validators.

Every config kafkalog reads -- topic configs (``storage.config``), ``server.properties``
(``broker.config``), group configs (``broker.group.group_config``) -- goes through these, so a
value Kafka takes is taken and one it refuses is refused with Kafka's ``ConfigException`` wording:
``Invalid value X for configuration NAME: reason``.

Java's rules, not Python's: ``String.trim`` removes every char up to U+0020 (not Unicode spaces),
``Integer.parseInt`` takes ASCII digits with an optional sign (no ``_``, no other scripts' digits),
and a list splits at commas with ASCII whitespace around them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from kafkalog.errors import InvalidConfigError
from kafkalog.storage._java_text import JAVA_WS, java_int, java_trim

__all__ = [
    "INT_MAX",
    "INT_MIN",
    "LONG_MAX",
    "LONG_MIN",
    "Validator",
    "at_least",
    "between",
    "each_of",
    "invalid",
    "java_int",
    "java_trim",
    "one_of",
    "parse_boolean",
    "parse_double",
    "parse_int",
    "parse_list",
    "parse_long",
    "parse_string",
]

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1

Validator = Callable[[str, Any], None]

_JAVA_DOUBLE = re.compile(r"[+-]?(NaN|Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?)[fFdD]?")
# Kafka's COMMA_WITH_WHITESPACE, "\\s*,\\s*": Java's \s is ASCII whitespace only.
_LIST_SPLIT = re.compile(f"[{JAVA_WS}]*,[{JAVA_WS}]*")


def invalid(name: str, value: object, reason: str) -> InvalidConfigError:
    """Kafka's ``ConfigException`` for a value: "Invalid value X for configuration NAME: reason"."""
    return InvalidConfigError(f"Invalid value {value} for configuration {name}: {reason}")


# --- ConfigDef.parseType, per type -------------------------------------------------------------------


def _parse_integer(name: str, value: object, lo: int, hi: int, type_name: str) -> int:
    kind = "INT" if hi == INT_MAX else "LONG"
    if isinstance(value, bool):
        raise invalid(name, value, f"Expected value to be a {type_name}, but it was a bool")
    if isinstance(value, int):
        if not lo <= value <= hi:
            raise invalid(name, value, f"Not a number of type {kind}")
        return value
    if isinstance(value, str):
        number = java_int(java_trim(value), lo, hi)
        if number is None:
            raise invalid(name, value, f"Not a number of type {kind}")
        return number
    raise invalid(name, value, f"Expected value to be a {type_name}, but it was a {type(value).__name__}")


def parse_int(name: str, value: object) -> int:
    """An INT config: a Python int in range, or its text."""
    return _parse_integer(name, value, INT_MIN, INT_MAX, "32-bit integer")


def parse_long(name: str, value: object) -> int:
    """A LONG config: a Python int in range, or its text."""
    return _parse_integer(name, value, LONG_MIN, LONG_MAX, "64-bit integer (long)")


def parse_double(name: str, value: object) -> float:
    """A DOUBLE config (``Double.parseDouble``'s decimal forms, an f/d suffix allowed)."""
    if isinstance(value, bool):
        raise invalid(name, value, "Expected value to be a double, but it was a bool")
    if isinstance(value, int | float):
        result = float(value)
    elif isinstance(value, str) and _JAVA_DOUBLE.fullmatch(java_trim(value)):
        result = float(java_trim(value).rstrip("fFdD"))
    else:
        raise invalid(name, value, "Not a number of type DOUBLE")
    if math.isnan(result):
        # Kafka's Range check lets NaN through (every comparison is false); NaN is refused here
        # because a NaN config can never compare equal to itself.
        raise invalid(name, value, "NaN is not a usable value")
    return result


def parse_boolean(name: str, value: object) -> bool:
    """A BOOLEAN config: ``true`` or ``false`` in any case."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        text = java_trim(value).lower()
        if text in ("true", "false"):
            return text == "true"
    raise invalid(name, value, "Expected value to be either true or false")


def parse_string(name: str, value: object) -> str:
    """A STRING config, trimmed."""
    if isinstance(value, str):
        return java_trim(value)
    raise invalid(name, value, f"Expected value to be a string, but it was a {type(value).__name__}")


def parse_list(name: str, value: object) -> tuple[str, ...]:
    """A LIST config: a comma-separated string (empty: no items) or a sequence of strings."""
    if isinstance(value, list | tuple):
        if not all(isinstance(item, str) for item in value):
            raise invalid(name, value, "Expected a comma separated list.")
        return tuple(value)
    if isinstance(value, str):
        text = java_trim(value)
        return tuple(_LIST_SPLIT.split(text)) if text else ()
    raise invalid(name, value, "Expected a comma separated list.")


# --- ConfigDef.Range, ValidString, ValidList ---------------------------------------------------------


def at_least(minimum: int) -> Validator:
    def check(name: str, value: Any) -> None:
        if value < minimum:
            raise invalid(name, value, f"Value must be at least {minimum}")

    return check


def between(lo: float, hi: float) -> Validator:
    def check(name: str, value: Any) -> None:
        if value < lo:
            raise invalid(name, value, f"Value must be at least {lo}")
        if value > hi:
            raise invalid(name, value, f"Value must be no more than {hi}")

    return check


def one_of(*allowed: str) -> Validator:
    def check(name: str, value: Any) -> None:
        if value not in allowed:  # case-sensitive, like ValidString
            raise invalid(name, value, f"String must be one of: {', '.join(allowed)}")

    return check


def each_of(*allowed: str) -> Validator:
    def check(name: str, value: Any) -> None:
        for item in value:
            if item not in allowed:
                raise invalid(name, item, f"String must be one of: {', '.join(allowed)}")

    return check
