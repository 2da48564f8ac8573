"""A request body's lengths checked against its frame before kio decodes it.

kio's native reader sizes an array's storage by the element count the request announces: a forged
count of 2^32 in twenty bytes asks for 32 GiB and aborts the whole process. It also reads a null
(length -1, or 0 in the compact encoding) where Kafka's schema allows none and hands the handler a
``None`` where a tuple belongs. Kafka's generated parsers refuse both — an array announcing more
elements than bytes remain ("Tried to read N elements, but there are only M bytes remaining") and
a non-nullable field serialized as null — and the broker closes the connection. This walk applies
the same rules, per the schema kio's dataclasses describe, without building anything: every length
is checked against the bytes left in the frame before anything is read past it.

A plan is compiled once per message class: per field, a fixed width, a string or bytes (nullable or
not), an array (of fixed-width values, strings or structs) or a struct; flexible versions add the
compact encodings and each struct's tagged-field section, whose known tags are checked inside their
announced size. Kafka skips a tag it does not know (a newer client's); kio refuses the request, so
such tags are cut from the body, and their section's count lowered, before kio reads it.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from functools import cache
from typing import Any, Union

from kafkalog.errors import InvalidRequestError

__all__ = ["CheckedBody", "check_request_body"]

_FIXED = {
    "bool": 1, "int8": 1, "int16": 2, "uint16": 2, "int32": 4, "int64": 8, "float64": 8,
    "uuid": 16, "timedelta_i32": 4, "timedelta_i64": 8,
}  # fmt: skip
_VARIABLE = {"string", "bytes", "records"}

# Field operations: (kind, name, nullable, detail).
_WIDTH, _STRING, _BYTES, _ARRAY, _STRUCT = range(5)
_Op = tuple[int, str, bool, Any]


@dataclasses.dataclass(frozen=True, slots=True)
class _Plan:
    name: str
    flexible: bool
    fields: tuple[_Op, ...]
    tagged: dict[int, _Op]


def _optional(hint: Any) -> tuple[Any, bool]:
    if typing.get_origin(hint) in (Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return args[0], len(args) < len(typing.get_args(hint))
    return hint, False


def _operation(name: str, kafka_type: str | None, hint: Any, flexible: bool) -> _Op:
    inner, nullable = _optional(hint)
    if typing.get_origin(inner) is tuple:
        element = typing.get_args(inner)[0]
        return (_ARRAY, name, nullable, _operation(name, kafka_type, element, flexible))
    if kafka_type is None:
        if not dataclasses.is_dataclass(inner):
            raise TypeError(f"{name}: no kafka_type and not a message struct: {hint!r}")
        return (_STRUCT, name, nullable, _plan(inner))  # type: ignore[arg-type]
    if kafka_type in _FIXED:
        return (_WIDTH, name, False, _FIXED[kafka_type])
    if kafka_type in _VARIABLE:
        return (_STRING if kafka_type == "string" else _BYTES, name, nullable, None)
    raise TypeError(f"{name}: kafka_type {kafka_type!r} has no bounds rule")


@cache
def _plan(cls: Any) -> _Plan:
    flexible = bool(getattr(cls, "__flexible__", False))
    hints = typing.get_type_hints(cls)
    fields: list[_Op] = []
    tagged: dict[int, _Op] = {}
    for f in dataclasses.fields(cls):
        op = _operation(f.name, f.metadata.get("kafka_type"), hints[f.name], flexible)
        if "tag" in f.metadata:
            tagged[f.metadata["tag"]] = op
        elif op[0] == _WIDTH and fields and fields[-1][0] == _WIDTH:  # one step for a run of them
            fields[-1] = (_WIDTH, fields[-1][1], False, fields[-1][3] + op[3])
        else:
            fields.append(op)
    return _Plan(cls.__name__, flexible, tuple(fields), tagged)


class _Walk:
    """One pass over ``buf[pos:end]``; raises ``InvalidRequestError`` at the first violation."""

    __slots__ = ("buf", "edits", "end", "path", "pos")

    def __init__(self, buf: memoryview, pos: int, end: int) -> None:
        self.buf, self.pos, self.end = buf, pos, end
        self.path: list[str] = []
        # (start, end, replacement): unknown tagged fields to drop, their sections' counts to lower
        self.edits: list[tuple[int, int, bytes]] = []

    def fail(self, what: str) -> typing.NoReturn:
        where = ".".join(self.path) or "body"
        raise InvalidRequestError(f"{where}: {what} at position {self.pos}")

    def take(self, n: int) -> int:
        start = self.pos
        if n > self.end - start:
            self.fail(f"{n} bytes announced, {self.end - start} left")
        self.pos = start + n
        return start

    def uvarint(self) -> int:
        value = shift = 0
        buf, pos = self.buf, self.pos
        while True:
            if pos >= self.end:
                self.fail("unsigned varint cut short")
            b = buf[pos]
            pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                self.pos = pos
                return value
            shift += 7
            if shift > 28:
                self.fail("unsigned varint longer than five bytes")

    def signed(self, width: int) -> int:
        start = self.take(width)
        return int.from_bytes(self.buf[start : start + width], "big", signed=True)

    def length(self, flexible: bool, width: int, nullable: bool, what: str) -> int:
        """A string's, bytes' or array's length; -1 for null."""
        n = self.uvarint() - 1 if flexible else self.signed(width)
        if n < -1:
            self.fail(f"negative {what} length {n}")
        if n == -1 and not nullable:
            self.fail(f"non-nullable {what} serialized as null")
        return n

    def struct(self, plan: _Plan) -> None:
        for op in plan.fields:
            self.field(op, plan.flexible)
        if plan.flexible:
            self.tagged_fields(plan)

    def tagged_fields(self, plan: _Plan) -> None:
        count_at = self.pos
        count = self.uvarint()
        count_end = self.pos
        unknown: list[tuple[int, int, bytes]] = []
        for _ in range(count):
            entry_at = self.pos
            tag = self.uvarint()
            size = self.uvarint()
            start = self.take(size)
            op = plan.tagged.get(tag)
            if op is None:  # Kafka skips a tag it does not know; kio would refuse the request
                unknown.append((entry_at, start + size, b""))
            else:  # a known tag's value is read, so it is checked, inside its size
                outer_end, self.pos, self.end = self.end, start, start + size
                edits = len(self.edits)
                self.field(op, True)
                # Unknown tags nested in a known tag's value stay (dropping them would change the
                # size before it): kio refuses those requests, as before.
                del self.edits[edits:]
                self.pos, self.end = start + size, outer_end
        if unknown:
            self.edits.append((count_at, count_end, _uvarint(count - len(unknown))))
            self.edits.extend(unknown)

    def field(self, op: _Op, flexible: bool) -> None:
        kind, name, nullable, detail = op
        if kind == _WIDTH:
            self.take(detail)
            return
        self.path.append(name)
        if kind == _ARRAY:
            n = self.length(flexible, 4, nullable, "array")
            # Kafka's rule: every element takes at least one byte.
            if n > self.end - self.pos:
                self.fail(f"array of {n} elements with only {self.end - self.pos} bytes left")
            if n > 0 and detail[0] == _WIDTH:
                self.take(n * detail[3])
            else:
                for _ in range(n):
                    self.field(detail, flexible)
        elif kind == _STRUCT:
            if nullable and self.signed(1) < 0:
                pass  # Kafka's null struct marker: -1, nothing follows
            else:
                self.struct(detail)
        else:
            n = self.length(
                flexible, 2 if kind == _STRING else 4, nullable, "string" if kind == _STRING else "bytes"
            )
            if n > 0:
                self.take(n)
        self.path.pop()


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


@dataclasses.dataclass(frozen=True, slots=True)
class CheckedBody:
    """``frame`` holds the body at the same offset, without tagged fields the schema does not know
    (a new frame only when there were some); the body ends at ``end``."""

    frame: memoryview
    end: int
    unknown_tags: int


def check_request_body(cls: Any, frame: memoryview, offset: int) -> CheckedBody:
    """Raise ``InvalidRequestError`` unless every length in ``frame[offset:]`` fits the frame and
    every null is where ``cls``'s schema allows one."""
    walk = _Walk(frame, offset, len(frame))
    walk.struct(_plan(cls))
    if not walk.edits:
        return CheckedBody(frame, walk.pos, 0)
    out = bytearray()
    at = 0
    for start, end, replacement in walk.edits:  # in walk order: positions only grow
        out += frame[at:start]
        out += replacement
        at = end
    out += frame[at:]
    unknown = sum(1 for _, _, replacement in walk.edits if not replacement)
    return CheckedBody(memoryview(bytes(out)), walk.pos - (len(frame) - len(out)), unknown)
