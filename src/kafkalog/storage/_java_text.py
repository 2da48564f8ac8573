"""Java's text-parsing rules, which Kafka's text side files are read with.

Checkpoints, ``partition.metadata``, partition-directory names and ``meta.properties`` are parsed
by Kafka with ``BufferedReader.readLine``, ``Pattern.compile("\\\\s+")`` and ``Integer.parseInt``;
these helpers reproduce those rules (ASCII whitespace only, optional sign, range-checked) so that
whatever Kafka accepts is accepted here. ``String.trim``, which ``ConfigDef`` applies to every config
value (``config_def``), is here too.
"""

from __future__ import annotations

import re
from pathlib import Path

from kafkalog.errors import KafkaStorageError

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

# Java's \s and \S (ASCII only), unlike Python's Unicode-aware classes.
JAVA_WS = " \t\n\x0b\f\r"
JAVA_WS_RUN = re.compile(f"[{JAVA_WS}]+")
JAVA_LINE_END = re.compile(r"\r\n|\r|\n")
JAVA_INT = re.compile(r"[+-]?[0-9]+")

def java_lines(text: str) -> list[str]:
    """Lines as Java's ``BufferedReader.readLine`` yields them (\\n, \\r or \\r\\n end a line)."""
    if not text:
        return []
    lines = JAVA_LINE_END.split(text)
    if lines[-1] == "":  # a terminator at the very end does not start another line
        lines.pop()
    return lines


def java_split_ws(line: str) -> list[str]:
    """Java's ``Pattern.compile("\\\\s+").split(line)``: a leading separator yields an empty first
    field, trailing empty fields are dropped."""
    parts = JAVA_WS_RUN.split(line)
    while parts and parts[-1] == "":
        parts.pop()
    return parts or [""]


_JAVA_BLANKS = "".join(chr(c) for c in range(0x21))


def java_trim(text: str) -> str:
    """Java's ``String.trim``: every char up to U+0020 off both ends (and nothing else)."""
    return text.strip(_JAVA_BLANKS)


def java_int(text: str, lo: int, hi: int) -> int | None:
    """``Integer.parseInt`` / ``Long.parseLong`` (no surrounding whitespace, optional sign) or None."""
    if not JAVA_INT.fullmatch(text):
        return None
    value = int(text)
    return value if lo <= value <= hi else None


def read_text(path: Path, what: str) -> str:
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise KafkaStorageError(f"Error while reading {what} {path}: {e}") from e
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise KafkaStorageError(f"Error while reading {what} {path}: not valid UTF-8 ({e})") from e


def check_int(value: object, lo: int, hi: int, what: str, where: Path) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise KafkaStorageError(f"Cannot write {what} {value!r} to {where}: must be an int in [{lo}, {hi}]")
    return value

