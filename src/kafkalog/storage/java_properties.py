"""``java.util.Properties`` text, as ``Properties.load`` reads it and Kafka's
``PropertiesUtils.writePropertiesFile`` writes it (``meta.properties``).

Kept here rather than taken from PyPI's ``javaproperties``: that library reads the same, but writes
``\\uXXXX`` escapes in lower case (``\\u00e9``) where Java's ``Properties.store`` writes upper case
(``\\u00E9``), so its files would not be byte-identical to Kafka's, and its errors are not
kafkalog's. Everything here raises ``KafkaStorageError`` naming the file.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

from kafkalog.errors import KafkaStorageError
from kafkalog.storage._java_text import java_lines
from kafkalog.storage.files import write_file_atomically

__all__ = ["load_properties", "read_properties_file", "store_properties", "write_properties_file"]

_PROPS_WS = " \t\f"
_DAY_NAMES = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTH_NAMES = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def _logical_lines(text: str) -> list[str]:
    """Java ``Properties.LineReader``: skip blanks and comments, join backslash-continued lines."""
    result: list[str] = []
    pending: str | None = None
    for natural in java_lines(text):
        stripped = natural.lstrip(_PROPS_WS)
        if pending is None and (not stripped or stripped[0] in "#!"):
            continue
        trailing = len(stripped) - len(stripped.rstrip("\\"))
        continued = trailing % 2 == 1  # an odd number of trailing backslashes escapes the line end
        body = stripped[:-1] if continued else stripped
        pending = body if pending is None else pending + body
        if not continued:
            result.append(pending)
            pending = None
    if pending is not None:
        result.append(pending)
    return result


def _unescape(text: str, where: str) -> str:
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        i += 1
        if c != "\\":
            out.append(c)
            continue
        if i >= n:  # a lone trailing backslash is dropped, as Java does
            break
        c = text[i]
        i += 1
        if c == "u":
            digits = text[i : i + 4]
            if len(digits) != 4 or not re.fullmatch("[0-9a-fA-F]{4}", digits):
                raise KafkaStorageError(f"Malformed \\uxxxx encoding in {where}")
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append({"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(c, c))
    # Java strings are UTF-16: \\ud83d\\ude00 escapes form one character.
    return "".join(out).encode("utf-16", "surrogatepass").decode("utf-16", "surrogatepass")


def load_properties(text: str, where: str = "properties") -> dict[str, str]:
    """Parse ``java.util.Properties.load`` text (``key=value``, ``key: value``, ``key value``)."""
    props: dict[str, str] = {}
    for line in _logical_lines(text):
        i, n = 0, len(line)
        while i < n:  # the key ends at the first unescaped '=', ':' or whitespace
            c = line[i]
            if c == "\\":
                i += 2
                continue
            if c in "=:" or c in _PROPS_WS:
                break
            i += 1
        key_end = min(i, n)
        j = key_end
        while j < n and line[j] in _PROPS_WS:
            j += 1
        if j < n and line[j] in "=:":
            j += 1
            while j < n and line[j] in _PROPS_WS:
                j += 1
        props[_unescape(line[:key_end], where)] = _unescape(line[j:], where)
    return props


def _escape(text: str, *, is_key: bool) -> str:
    out = []
    for index, c in enumerate(text):
        if c == " ":
            out.append("\\ " if is_key or index == 0 else " ")
        elif c in "\\=:#!":
            out.append("\\" + c)
        elif c in "\t\n\r\f":
            out.append({"\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f"}[c])
        elif " " < c <= "~":
            out.append(c)
        else:
            # Escaped like Properties.store(OutputStream): readable whatever charset the reader assumes.
            units = c.encode("utf-16-be", "surrogatepass")
            out.extend(f"\\u{units[k]:02X}{units[k + 1]:02X}" for k in range(0, len(units), 2))
    return "".join(out)


def _java_date(moment: datetime) -> str:
    """``java.util.Date.toString()`` in UTC: ``Fri Oct 25 03:33:01 UTC 2024``."""
    moment = moment.astimezone(UTC)
    return (
        f"{_DAY_NAMES[moment.weekday()]} {_MONTH_NAMES[moment.month - 1]} {moment.day:02d} "
        f"{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d} UTC {moment.year}"
    )


def store_properties(
    props: Mapping[str, str], comments: str | None = "", date: datetime | None = None
) -> str:
    """Text as ``Properties.store`` writes it: optional comment line, ``#<date>``, then sorted entries.

    Kafka's ``PropertiesUtils.writePropertiesFile`` passes an empty comment, hence a bare ``#`` line.
    Entries are sorted by key (what JDK 18+ does; older JDKs used hash order, which reads the same).
    """
    lines: list[str] = []
    if comments is not None:
        lines.extend("#" + part for part in java_lines(comments) or [""])
    lines.append("#" + _java_date(date or datetime.now(UTC)))
    for key in sorted(props):
        lines.append(f"{_escape(key, is_key=True)}={_escape(props[key], is_key=False)}")
    return "".join(line + "\n" for line in lines)


def read_properties_file(path: Path | str) -> dict[str, str]:
    """Read a ``.properties`` file. Like Java's ``Properties.load(InputStream)`` bytes are ISO-8859-1
    (non-ASCII must be ``\\uXXXX``-escaped)."""
    path = Path(path)
    try:
        text = path.read_bytes().decode("latin-1")
    except OSError as e:
        raise KafkaStorageError(f"Error while reading properties file {path}: {e}") from e
    return load_properties(text, str(path))


def write_properties_file(
    path: Path | str, props: Mapping[str, str], *, date: datetime | None = None, sync: bool = True
) -> None:
    """Write like Kafka's ``PropertiesUtils.writePropertiesFile``: tmp file, fsync, atomic rename."""
    for key, value in props.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise KafkaStorageError(
                f"Cannot write property {key!r}={value!r} to {path}: keys and values must be str"
            )
    write_file_atomically(Path(path), store_properties(props, "", date).encode("ascii"), sync=sync)


