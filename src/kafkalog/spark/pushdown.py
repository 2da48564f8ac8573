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

**When pushdown is used.** PySpark 4.3.0 stores the plan of the last filter pushdown (reader and
partitions) on the provider object of the DataFrame's ``load()`` and every later scan of that
DataFrame reads whatever plan is stored there: ``df.where("partition = 0").union(df.where(
"partition = 1"))`` reads partition 1 twice, and ``df.where("partition = 1").count(); df.count()``
counts partition 1 only. No Python runs when Spark reuses a plan, so no source can correct it; the
only correct choice there is not to narrow plans at all. ``plan_kept_per_scan()`` says whether the
running Spark keeps the plan per scan (Spark's master branch does); the ``filterPushdown`` option
defaults to that answer (see ``kafkalog.spark.source``).
"""

from __future__ import annotations

import datetime as _dt
import functools
import os
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

__all__ = [
    "Constraints",
    "IntConstraint",
    "class_keeps_plan_per_scan",
    "plan_kept_per_scan",
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
                known = [u for u in uss if u is not None]
                lo = None if not uss or len(known) != len(uss) else _ceil_ms(min(known))
            else:
                lo = None
            if lo is not None and lo < 0:
                # Before 1970: the time index cannot be asked (ListOffsets reads a negative timestamp
                # as a special one: -1 latest, -2 earliest ...), and the bound narrows nothing anyway.
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


# --- does this Spark keep the read plan per scan? ---------------------------------------------

_SCAN_BUILDER = "org/apache/spark/sql/execution/datasources/v2/python/PythonScanBuilder.class"
_SCAN = "org/apache/spark/sql/execution/datasources/v2/python/PythonScan.class"


def _spark_sql_jars() -> list[Path]:
    """The spark-sql jars of the Spark whose JVM started this Python (planning workers run on the
    driver, launched by its JVM, which exports SPARK_HOME), else of the installed PySpark."""
    homes = []
    if os.environ.get("SPARK_HOME"):
        homes.append(Path(os.environ["SPARK_HOME"]))
    try:
        from pyspark.find_spark_home import _find_spark_home

        homes.append(Path(_find_spark_home()))
    except Exception:  # no PySpark home: nothing to inspect
        pass
    for home in homes:
        jars = sorted((home / "jars").glob("spark-sql_*.jar"))
        if jars:
            return jars
    return []


def class_keeps_plan_per_scan(scan_builder: bytes, scan: bytes) -> bool:
    """The test on Spark's two classes: the scan builder must not write its plan onto the shared
    provider (``PythonDataSourceV2.setReadInfo``, PySpark 4.3.0), and the scan must carry a plan of
    its own (``PythonDataSourceReadInfo`` in ``PythonScan``, Spark master)."""
    return b"setReadInfo" not in scan_builder and b"PythonDataSourceReadInfo" in scan


@functools.cache
def plan_kept_per_scan() -> bool:
    """Whether the running Spark keeps each scan's pushdown plan to itself, decided once per process
    by inspecting what Spark's ``PythonScanBuilder``/``PythonScan`` classes do with the plan. Any
    doubt (no jar found, classes missing or unreadable) answers False: no pushdown, always correct."""
    for jar in _spark_sql_jars():
        try:
            with zipfile.ZipFile(jar) as z:
                return class_keeps_plan_per_scan(z.read(_SCAN_BUILDER), z.read(_SCAN))
        except (OSError, KeyError, zipfile.BadZipFile):
            continue
    return False
