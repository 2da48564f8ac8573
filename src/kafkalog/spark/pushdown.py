"""Filter pushdown: which Spark filters narrow a kafkalog read, and how.

Spark (4.1+, with ``spark.sql.python.filterPushdown.enabled=true``) offers the reader the
conjuncts of a ``WHERE`` clause as ``pyspark.sql.datasource.Filter`` objects. We keep those on
``topic``, ``partition``, ``offset`` (=, <=>, <, <=, >, >=, IN, IS NOT NULL) and on ``timestamp``
(the lower bounds =, >, >=, IN):

* ``topic``/``partition``/``offset`` constraints are applied *exactly* by planning narrower offset
  ranges, so Spark need not evaluate them again;
* a ``timestamp`` lower bound becomes a start offset through the time index
  (``Log.offset_for_timestamp``: the first offset, in offset order, holding a timestamp >= X —
  every record before it has a smaller timestamp, so nothing qualifying is skipped). Timestamps in
  a partition need not increase, so the range is only a superset: the filter is handed back to
  Spark. Upper bounds on ``timestamp`` cannot narrow anything (a later record may carry an older
  timestamp) and are handed back as well.

Everything else (OR, NOT, LIKE, filters on key/value/headers...) is returned to Spark untouched.

**Guard against Spark 4.3.0 reusing a narrowed plan** (``check_plan_reuse``). Spark keeps the
partitions and read function of a DataFrame's last pushdown and, for a later query on the same
DataFrame with no filter it can push (none, or only OR/NOT/LIKE...), reuses them without calling
any Python planning code: ``df.where("partition = 1").count(); df.count()`` would count partition
1 only. No planning hook can notice (nothing of ours runs), and the executor receives the very
same bytes as for the first query; what differs is the Spark SQL execution the task belongs to
(the ``spark.sql.execution.root.id`` local property). So a plan narrowed by pushed filters carries
a random id, and each of its input partitions, when read, is claimed for the execution reading it
in a small file under the temp directory; the same input partition read again by *another*
execution is that reuse, and fails with an explanation instead of silently returning the narrowed
rows. Legitimate repeats are not affected: task retries and speculative copies belong to the same
execution, each action on a filtered DataFrame re-plans (new id), a cached DataFrame materialised by
several actions reads each input partition once, and RDD jobs (no execution id) are not checked.
The claims are per host, so on a cluster a reuse is caught only where an input partition lands on
a host that read it before; a cached block lost and recomputed by a later action would be a false
alarm (the error names the ``filterPushdown=false`` way out).
"""

from __future__ import annotations

import datetime as _dt
import os
import tempfile
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from kafkalog.errors import KafkaLogError

__all__ = [
    "Constraints",
    "IntConstraint",
    "StalePlanError",
    "check_plan_reuse",
    "new_plan_id",
    "split_filters",
]

_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
_US = _dt.timedelta(microseconds=1)


@dataclass(frozen=True, slots=True)
class IntConstraint:
    """A set of integers: ``lo <= x <= hi`` and, if ``values`` is set, ``x in values``."""

    lo: int | None = None
    hi: int | None = None
    values: frozenset[int] | None = None

    def and_lo(self, lo: int) -> IntConstraint:
        return replace(self, lo=lo if self.lo is None else max(self.lo, lo))

    def and_hi(self, hi: int) -> IntConstraint:
        return replace(self, hi=hi if self.hi is None else min(self.hi, hi))

    def and_in(self, values: Iterable[int]) -> IntConstraint:
        vs = frozenset(values)
        return replace(self, values=vs if self.values is None else self.values & vs)

    def contains(self, x: int) -> bool:
        if self.lo is not None and x < self.lo:
            return False
        if self.hi is not None and x > self.hi:
            return False
        return self.values is None or x in self.values

    def ranges_within(self, start: int, end: int) -> list[tuple[int, int]]:
        """Half-open ranges of [start, end) allowed by the constraint, ascending."""
        lo = start if self.lo is None else max(start, self.lo)
        hi = end if self.hi is None else min(end, self.hi + 1)
        if lo >= hi:
            return []
        if self.values is None:
            return [(lo, hi)]
        out: list[tuple[int, int]] = []
        for v in sorted(v for v in self.values if lo <= v < hi):
            if out and out[-1][1] == v:
                out[-1] = (out[-1][0], v + 1)
            else:
                out.append((v, v + 1))
        return out


@dataclass(frozen=True, slots=True)
class Constraints:
    """What the accepted filters say about the rows wanted."""

    topics: frozenset[str] | None = None
    partition: IntConstraint = IntConstraint()
    offset: IntConstraint = IntConstraint()
    min_timestamp_ms: int | None = None
    empty: bool = False  # a contradiction such as topic IN () was seen

    @property
    def is_trivial(self) -> bool:
        return self == Constraints()

    def wants_topic(self, topic: str) -> bool:
        return not self.empty and (self.topics is None or topic in self.topics)


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _timestamp_us(v: object) -> int | None:
    if isinstance(v, _dt.datetime):
        if v.tzinfo is None:
            # Spark hands over tz-aware UTC datetimes; a naive one is taken as UTC, like the session zone.
            v = v.replace(tzinfo=_dt.UTC)
        return (v - _EPOCH) // _US
    return None


def _ceil_ms(us: int) -> int:
    return -((-us) // 1000)


def split_filters(filters: Iterable[object]) -> tuple[Constraints, list[object]]:
    """Returns the constraints of the filters we act on, and the filters Spark must still apply."""
    from pyspark.sql.datasource import (
        EqualNullSafe,
        EqualTo,
        GreaterThan,
        GreaterThanOrEqual,
        In,
        IsNotNull,
        LessThan,
        LessThanOrEqual,
    )

    c = Constraints()
    remaining: list[object] = []
    for f in filters:
        attr = getattr(f, "attribute", None)
        column = attr[0] if isinstance(attr, tuple) and len(attr) == 1 else None
        if column not in ("topic", "partition", "offset", "timestamp"):
            remaining.append(f)
            continue
        if isinstance(f, IsNotNull):
            continue  # these columns are never null
        value = getattr(f, "value", None)
        if column == "timestamp":
            # Narrow by lower bounds only; Spark always re-applies timestamp filters.
            remaining.append(f)
            if isinstance(f, (EqualTo, EqualNullSafe, GreaterThanOrEqual)):
                us = _timestamp_us(value)
                lo = None if us is None else _ceil_ms(us)
            elif isinstance(f, GreaterThan):
                us = _timestamp_us(value)
                lo = None if us is None else us // 1000 + 1
            elif isinstance(f, In):
                uss = [_timestamp_us(v) for v in value] if isinstance(value, (list, tuple)) else [None]
                lo = None if not uss or any(u is None for u in uss) else _ceil_ms(min(uss))  # type: ignore[type-var]
            else:
                lo = None
            if lo is not None:
                if c.min_timestamp_ms is not None:
                    lo = max(c.min_timestamp_ms, lo)
                c = replace(c, min_timestamp_ms=lo)
            continue
        if column == "topic":
            if isinstance(f, (EqualTo, EqualNullSafe)) and isinstance(value, str):
                names = frozenset([value])
            elif isinstance(f, In) and isinstance(value, (list, tuple)) and all(
                    isinstance(v, str) for v in value):
                names = frozenset(value)
            else:
                remaining.append(f)
                continue
            topics = names if c.topics is None else c.topics & names
            c = replace(c, topics=topics, empty=c.empty or not topics)
            continue
        # partition / offset: integers
        current: IntConstraint = c.partition if column == "partition" else c.offset
        if isinstance(f, (EqualTo, EqualNullSafe)) and _is_int(value):
            new = current.and_lo(value).and_hi(value)  # type: ignore[arg-type]
        elif isinstance(f, GreaterThan) and _is_int(value):
            new = current.and_lo(value + 1)  # type: ignore[operator]
        elif isinstance(f, GreaterThanOrEqual) and _is_int(value):
            new = current.and_lo(value)  # type: ignore[arg-type]
        elif isinstance(f, LessThan) and _is_int(value):
            new = current.and_hi(value - 1)  # type: ignore[operator]
        elif isinstance(f, LessThanOrEqual) and _is_int(value):
            new = current.and_hi(value)  # type: ignore[arg-type]
        elif isinstance(f, In) and isinstance(value, (list, tuple)) and all(_is_int(v) for v in value):
            new = current.and_in(value)
        else:
            remaining.append(f)
            continue
        c = replace(c, partition=new) if column == "partition" else replace(c, offset=new)
    return c, remaining


# --- Spark 4.3.0 plan reuse --------------------------------------------------------------------

STALE_PLAN_MESSAGE = (
    "kafkalog: Spark is reusing the offset ranges it planned for an earlier query on this DataFrame, "
    "which were narrowed by that query's pushed-down filters (a Spark 4.3.0 bug: a later query on the "
    "same DataFrame whose filters cannot be pushed down - none, or only OR/NOT/LIKE... - gets the "
    "previous query's partitions). Reading them would silently return only the earlier query's rows. "
    "Load the DataFrame again for this query (spark.read.format('kafkalog')...load()), or read with "
    ".option('filterPushdown', 'false')."
)

# Claims older than this are deleted (once per process): a DataFrame is rarely reused later than that.
_CLAIM_RETENTION_S = 7 * 24 * 3600
_pruned = False


class StalePlanError(KafkaLogError):
    """An input partition of a pushdown-narrowed plan is read by a second Spark SQL execution."""


def new_plan_id() -> str:
    return uuid.uuid4().hex


def _registry_dir() -> Path:
    user = os.getuid() if hasattr(os, "getuid") else "user"
    return Path(tempfile.gettempdir()) / f"kafkalog-spark-plans-{user}"


def current_execution() -> str | None:
    """The root Spark SQL execution id of the running task, or None outside one (RDD jobs, no Spark)."""
    try:
        from pyspark import TaskContext
    except ImportError:  # pragma: no cover - pyspark is a dependency of this package
        return None
    tc = TaskContext.get()
    if tc is None:
        return None
    return tc.getLocalProperty("spark.sql.execution.root.id") or tc.getLocalProperty("spark.sql.execution.id")


def _prune(directory: Path) -> None:
    global _pruned
    if _pruned:
        return
    _pruned = True
    horizon = time.time() - _CLAIM_RETENTION_S
    try:
        with os.scandir(directory) as entries:
            for entry in entries:
                try:
                    if entry.stat().st_mtime < horizon:
                        os.unlink(entry.path)
                except OSError:
                    pass
    except OSError:
        pass


def check_plan_reuse(plan_id: str, index: int, execution: str | None = None,
                     directory: Path | None = None) -> None:
    """Claim input partition ``index`` of plan ``plan_id`` for the current execution; raise
    ``StalePlanError`` if another execution claimed it (see the module docstring). Anything that
    prevents the check (no execution id, an unwritable temp directory) lets the read proceed."""
    if execution is None:
        execution = current_execution()
        if execution is None:
            return
    directory = directory or _registry_dir()
    path = directory / f"{plan_id}.{index}"
    try:
        directory.mkdir(mode=0o700, exist_ok=True)
        _prune(directory)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        try:
            owner = path.read_text(encoding="ascii")
        except (OSError, ValueError):
            return
        # Empty: a concurrent attempt of the same task is writing it (a stale reuse comes much later).
        if owner and owner != execution:
            raise StalePlanError(STALE_PLAN_MESSAGE) from None
        return
    except OSError:
        return
    try:
        os.write(fd, execution.encode("ascii", "replace"))
    except OSError:
        pass
    finally:
        os.close(fd)
