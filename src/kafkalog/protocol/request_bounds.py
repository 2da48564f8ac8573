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
from kafkalog.protocol.primitives import Reader, write_uvarint

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
    """One pass over a body through a bounds-checked ``Reader``; raises ``InvalidRequestError`` at
    the first violation, naming the field."""

    __slots__ = ("edits", "path", "reader")

    def __init__(self, frame: memoryview, offset: int) -> None:
        self.reader = Reader(frame, offset)
        self.path: list[str] = []
        # (start, end, replacement): unknown tagged fields to drop, their sections' counts to lower
        self.edits: list[tuple[int, int, bytes]] = []

    def fail(self, what: str) -> typing.NoReturn:
        where = ".".join(self.path) or "body"
        raise InvalidRequestError(f"{where}: {what} at position {self.reader.pos}")

    def take(self, n: int) -> int:
        start, left = self.reader.pos, self.reader.remaining()
        if n > left:
            self.fail(f"{n} bytes announced, {left} left")
        self.reader.pos = start + n
        return start

    def length(self, flexible: bool, width: int, nullable: bool, what: str) -> int:
        """A string's, bytes' or array's length; -1 for null."""
        r = self.reader
        n = r.uvarint() - 1 if flexible else (r.int16() if width == 2 else r.int32())
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
        r = self.reader
        count_at = r.pos
        count = r.uvarint()
        count_end = r.pos
        unknown: list[tuple[int, int, bytes]] = []
        for _ in range(count):
            entry_at = r.pos
            tag = r.uvarint()
            size = r.uvarint()
            start = self.take(size)
            op = plan.tagged.get(tag)
            if op is None:  # Kafka skips a tag it does not know; kio would refuse the request
                unknown.append((entry_at, start + size, b""))
            else:  # a known tag's value is read, so it is checked, inside its size
                self.reader = Reader(r.view[: start + size], start)
                edits = len(self.edits)
                self.field(op, True)
                # Unknown tags nested in a known tag's value stay (dropping them would change the
                # size before it): kio refuses those requests, as before.
                del self.edits[edits:]
                self.reader = r
        if unknown:
            count_bytes = bytearray()
            write_uvarint(count_bytes, count - len(unknown))
            self.edits.append((count_at, count_end, bytes(count_bytes)))
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
            if n > self.reader.remaining():
                self.fail(f"array of {n} elements with only {self.reader.remaining()} bytes left")
            if n > 0 and detail[0] == _WIDTH:
                self.take(n * detail[3])
            else:
                for _ in range(n):
                    self.field(detail, flexible)
        elif kind == _STRUCT:
            if not (nullable and self.reader.int8() < 0):  # Kafka's null struct marker: -1
                self.struct(detail)
        else:
            is_string = kind == _STRING
            n = self.length(flexible, 2 if is_string else 4, nullable, "string" if is_string else "bytes")
            if n > 0:
                self.take(n)
        self.path.pop()


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
    walk = _Walk(frame, offset)
    walk.struct(_plan(cls))
    end = walk.reader.pos
    if not walk.edits:
        return CheckedBody(frame, end, 0)
    out = bytearray()
    at = 0
    for start, end, replacement in walk.edits:  # in walk order: positions only grow
        out += frame[at:start]
        out += replacement
        at = end
    out += frame[at:]
    unknown = sum(1 for _, _, replacement in walk.edits if not replacement)
    return CheckedBody(memoryview(bytes(out)), end - (len(frame) - len(out)), unknown)
