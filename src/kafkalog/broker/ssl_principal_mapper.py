"""``ssl.principal.mapping.rules`` (Kafka's ``SslPrincipalMapper``): how a client certificate's
subject (its RFC 2253 name, :func:`kafkalog.broker.ssl_factory.x500_name`) becomes the name of the
``User:`` principal on an SSL listener.

The rules are a comma-separated list, tried in order; the first that applies gives the name:

* ``DEFAULT``: the distinguished name unchanged;
* ``RULE:pattern/replacement/`` (optionally ``/L`` or ``/U`` for lower or upper case): applies when
  ``pattern`` matches the *whole* name; the name is then every match of ``pattern`` replaced with
  ``replacement`` (Java's ``String.replaceAll``: ``$1`` a group, ``${name}`` a named group, ``\\x`` a
  literal ``x``; a ``$n`` above the pattern's group count is kept literally, as Kafka does).

No rule applying is an error (:class:`SslPrincipalMappingError`): Kafka's broker then closes the
connection at its first request. A rule Kafka cannot parse is an :class:`InvalidConfigError` at
startup. Patterns are Python ``re`` patterns, which read Java's usual ones the same way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kafkalog.errors import InvalidConfigError, SslPrincipalMappingError

__all__ = ["DEFAULT_SSL_PRINCIPAL_MAPPING_RULES", "SslPrincipalMapper"]

DEFAULT_SSL_PRINCIPAL_MAPPING_RULES = "DEFAULT"

# Kafka's rule grammar: DEFAULT, RULE:<pattern>/<replacement>/[LU] (a '/' or '\' in either part
# escaped with '\'), or anything else, which then fails as an "unmatched substring".
_RULE = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(,\s*|$)", re.ASCII)  # Java's \s is ASCII
_PARSER = re.compile(_RULE, re.ASCII)
_BACK_REFERENCE = re.compile(r"\$(\d+)")
_JAVA_NAMED_GROUP = re.compile(r"\(\?<(?=[A-Za-z])")  # Java's (?<name>…), Python's (?P<name>…)


def _java_trim(value: str) -> str:
    """Java's ``String.trim``: every character up to U+0020 off both ends."""
    start, end = 0, len(value)
    while start < end and value[start] <= " ":
        start += 1
    while end > start and value[end - 1] <= " ":
        end -= 1
    return value[start:end]


def _expand(match: re.Match[str], replacement: str) -> str:
    """``replacement`` for ``match`` as Java's ``Matcher.appendReplacement`` expands it."""
    out: list[str] = []
    pattern = match.re
    cursor, n = 0, len(replacement)
    while cursor < n:
        c = replacement[cursor]
        if c == "\\":
            cursor += 1
            if cursor == n:
                raise SslPrincipalMappingError("character to be escaped is missing")
            out.append(replacement[cursor])
            cursor += 1
        elif c == "$":
            cursor += 1
            if cursor == n:
                raise SslPrincipalMappingError("Illegal group reference: group index is missing")
            if replacement[cursor] == "{":
                cursor += 1
                start = cursor
                while cursor < n and replacement[cursor].isascii() and replacement[cursor].isalnum():
                    cursor += 1
                name = replacement[start:cursor]
                if not name:
                    raise SslPrincipalMappingError("named capturing group has 0 length name")
                if cursor == n or replacement[cursor] != "}":
                    raise SslPrincipalMappingError("named capturing group is missing trailing '}'")
                if name[0].isdigit():
                    raise SslPrincipalMappingError(
                        f"capturing group name {{{name}}} starts with digit character"
                    )
                if name not in pattern.groupindex:
                    raise SslPrincipalMappingError(f"No group with name {{{name}}}")
                group = pattern.groupindex[name]
                cursor += 1
            else:
                if not "0" <= replacement[cursor] <= "9":
                    raise SslPrincipalMappingError("Illegal group reference")
                group = int(replacement[cursor])
                cursor += 1
                # Java takes the longest run of digits that still names a group.
                while cursor < n and "0" <= replacement[cursor] <= "9":
                    longer = group * 10 + int(replacement[cursor])
                    if longer > pattern.groups:
                        break
                    group = longer
                    cursor += 1
            if group > pattern.groups:
                raise SslPrincipalMappingError(f"No group {group}")
            value = match.group(group)
            if value is not None:  # a group that did not take part adds nothing
                out.append(value)
        else:
            out.append(c)
            cursor += 1
    return "".join(out)


def _replace_all(pattern: re.Pattern[str], text: str, replacement: str) -> str:
    """Java's ``String.replaceAll``: after an empty match the next search starts one further on."""
    out: list[str] = []
    tail = position = 0
    while position <= len(text):
        match = pattern.search(text, position)
        if match is None:
            break
        out.append(text[tail : match.start()])
        out.append(_expand(match, replacement))
        tail = match.end()
        position = match.end() + 1 if match.end() == match.start() else match.end()
    out.append(text[tail:])
    return "".join(out)


def _escape_literal_back_references(replacement: str, groups: int) -> str:
    """Kafka's ``escapeLiteralBackReferences``: ``$n`` naming no group (its digits cut back while
    above the group count and ten or more) becomes ``\\$n``, a literal. As in Kafka, the positions
    are those of the original string, so a second such reference lands one place off."""
    if groups == 0:
        return replacement
    value = replacement
    for match in _BACK_REFERENCE.finditer(replacement):
        digits = match.group(1)
        if digits.startswith("0"):
            continue
        index = int(digits)
        while index > groups and index >= 10:
            index //= 10
        if index > groups:
            dollar = match.start(1) - 1
            value = value[:dollar] + "\\" + value[dollar:]
    return value


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    to_lower: bool = False
    to_upper: bool = False
    text: str = "DEFAULT"

    def apply(self, name: str) -> str | None:
        if self.pattern is None:
            return name
        if self.pattern.fullmatch(name) is None:
            return None
        result = _replace_all(
            self.pattern, name, _escape_literal_back_references(self.replacement, self.pattern.groups)
        )
        if self.to_lower:
            return result.lower()
        if self.to_upper:
            return result.upper()
        return result


def _compile(pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(_JAVA_NAMED_GROUP.sub("(?P<", pattern))
    except re.error as e:
        raise InvalidConfigError(f"Invalid ssl.principal.mapping.rules pattern {pattern!r}: {e}") from e


class SslPrincipalMapper:
    """The parsed rules of ``ssl.principal.mapping.rules``; :meth:`get_name` maps a DN."""

    def __init__(self, rules: str | None) -> None:
        self._rules = self._parse(rules if rules is not None else DEFAULT_SSL_PRINCIPAL_MAPPING_RULES)

    @staticmethod
    def _parse(rules: str) -> list[_Rule]:
        parsed: list[_Rule] = []
        for split in _SPLITTER.finditer(_java_trim(rules)):
            rule = split.group(1)
            match = _PARSER.match(rule)
            assert match is not None  # the last alternative matches anything
            if match.end() != len(rule):
                raise InvalidConfigError(
                    f"Invalid rule: `{rule}`, unmatched substring: `{rule[match.end():]}`"
                )
            if match.group(1) is not None:
                parsed.append(_Rule(None))
            elif match.group(2) is not None:
                case = match.group(6)
                text = f"RULE:{match.group(2)}/{match.group(4)}" + (f"/{case}" if case else "")
                parsed.append(
                    _Rule(_compile(match.group(2)), match.group(4), case == "L", case == "U", text)
                )
            # an empty rule is skipped, as in Kafka
        return parsed

    def get_name(self, distinguished_name: str) -> str:
        """The principal name of ``distinguished_name``; SslPrincipalMappingError when no rule applies."""
        for rule in self._rules:
            name = rule.apply(distinguished_name)
            if name is not None:
                return name
        raise SslPrincipalMappingError(f"No rules apply to {distinguished_name}, rules {self}")

    def __str__(self) -> str:
        return "[" + ", ".join(rule.text for rule in self._rules) + "]"
