"""Batch reads: offset-range planning (driver) and the Arrow read of one range (executor).

Planning follows Spark's Kafka source: resolve ``startingOffsets``/``endingOffsets`` (or their
timestamp variants) per topic-partition, check them against the log start offset
(``failOnDataLoss``), narrow them with pushed filters, then split big ranges for
``minPartitions``/``maxRecordsPerPartition`` (``KafkaOffsetRangeCalculator``'s arithmetic, with
split points moved back to batch boundaries).

``earliest`` and ``latest`` stay symbolic in the input partitions and are resolved by the executor
when the task starts: Spark's ``KafkaRelation`` resolves them at every action, while PySpark 4.3.0
plans a DataFrame once (the first plan is kept on the DataFrame's relation and handed to the
executors again by every later action). So a second action on the same DataFrame sees records
appended since the first, and reads from the new log start after retention removed the old one.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from itertools import pairwise
from pathlib import Path

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition

from kafkalog.errors import InvalidConfigError, OffsetOutOfRangeError
from kafkalog.spark.arrow import ColumnBuilder
from kafkalog.spark.catalog import TopicCatalog, data_location, open_partition
from kafkalog.spark.options import (
    EARLIEST,
    FAIL_ON_DATA_LOSS,
    LATEST,
    OffsetRangeLimit,
    SourceOptions,
    TopicPartition,
    user_errors,
    user_errors_iter,
)
from kafkalog.spark.pushdown import Constraints, split_filters
from kafkalog.spark.worker_memory import keep_freed_memory
from kafkalog.storage.filesystem import FileSystem
from kafkalog.storage.log import FetchIsolation

__all__ = [
    "KafkaLogBatchReader",
    "KafkaLogFilteringReader",
    "KafkaLogInputPartition",
    "OffsetRange",
    "divide_ranges",
    "plan_batch_ranges",
    "read_range",
    "resolve_limit",
]

log = logging.getLogger(__name__)

# Rows per emitted Arrow batch: big enough to amortise per-batch costs, small enough to bound memory.
ARROW_BATCH_ROWS = 65536
ARROW_BATCH_BYTES = 32 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class OffsetRange:
    """Records [from_offset, until_offset) of one topic-partition (Spark's ``KafkaOffsetRange``).

    The offsets are those resolved at planning; ``from_earliest``/``to_latest`` say that the bound
    is really ``earliest``/``latest``, to be resolved again where the range is read, and
    ``since_earliest`` that the range is a piece of one that began at ``earliest`` (offsets that
    retention removed since planning were then never asked for: skipped, not data loss).
    """

    topic: str
    partition: int
    from_offset: int
    until_offset: int
    from_earliest: bool = False
    to_latest: bool = False
    since_earliest: bool = False

    @property
    def size(self) -> int:
        return self.until_offset - self.from_offset

    @property
    def topic_partition(self) -> TopicPartition:
        return (self.topic, self.partition)


@dataclass(frozen=True, slots=True)
class KafkaLogInputPartition(InputPartition):
    """One Spark task: one offset range of one partition, plus what the executor needs to read it."""

    path: str
    topic: str
    partition: int
    from_offset: int
    until_offset: int
    include_headers: bool = False
    read_committed: bool = False
    fail_on_data_loss: bool = True
    # Symbolic bounds, resolved against the log when the task starts (see OffsetRange).
    from_earliest: bool = False
    to_latest: bool = False
    since_earliest: bool = False
    # How to reach a remote ``path`` (SourceOptions.filesystem_options).
    filesystem_options: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, r: OffsetRange, opts: SourceOptions) -> KafkaLogInputPartition:
        return cls(opts.path, r.topic, r.partition, r.from_offset, r.until_offset, opts.include_headers,
                   opts.read_committed, opts.fail_on_data_loss, r.from_earliest, r.to_latest,
                   r.since_earliest, opts.filesystem_options)


def data_loss_message(tp: TopicPartition, wanted: int, available: int) -> str:
    return (
        f"Cannot read offset {wanted} of {tp[0]}-{tp[1]}: the log now starts at offset {available}. "
        "Some data may have been lost because it is not available any more: either it was aged out by "
        "retention or the topic was deleted before all its data was processed. If you don't want the "
        f"query to fail in such cases, set the source option '{FAIL_ON_DATA_LOSS}' to 'false'."
    )


# --- offset resolution ---------------------------------------------------------------------------


def resolve_limit(
    catalog: TopicCatalog,
    limit: OffsetRangeLimit,
    tps: Sequence[TopicPartition],
    *,
    starting: bool,
    read_committed: bool,
) -> dict[TopicPartition, int]:
    """Offsets a range limit designates for ``tps`` (Spark's ``fetchPartitionOffsets``)."""
    if limit.kind == "earliest":
        return {tp: catalog.earliest(tp) for tp in tps}
    if limit.kind == "latest":
        return {tp: catalog.latest(tp, read_committed) for tp in tps}
    if limit.kind == "specific":
        given = limit.as_map()
        if set(given) != set(tps):
            raise InvalidConfigError(
                f"kafkalog option '{limit.option}': if it contains specific offsets it must name all "
                "topic-partitions (use -1 for latest, -2 for earliest). "
                f"Specified: {_tp_list(given)}; subscribed: {_tp_list(tps)}"
            )
        out = {}
        for tp, off in given.items():
            if off == EARLIEST:
                out[tp] = catalog.earliest(tp)
            elif off == LATEST:
                out[tp] = catalog.latest(tp, read_committed)
            else:
                out[tp] = off
        return out
    # by timestamp
    if limit.kind == "timestamp":
        timestamps = limit.as_map()
        if set(timestamps) != set(tps):
            raise InvalidConfigError(
                f"kafkalog option '{limit.option}': it must name all topic-partitions. "
                f"Specified: {_tp_list(timestamps)}; subscribed: {_tp_list(tps)}"
            )
    else:
        assert limit.timestamp is not None
        timestamps = dict.fromkeys(tps, limit.timestamp)
    out = {}
    for tp in tps:
        ts = timestamps[tp]
        # Kafka's answer, as Spark's admin-based reader gets it: none when no record has a
        # timestamp >= ts, or when the first one is not visible yet (at or past the high watermark,
        # or the last stable offset under read_committed).
        found = catalog.offset_for_timestamp(tp, ts, read_committed)
        if found is None:
            if starting and limit.on_no_match == "error":
                raise InvalidConfigError(
                    f"kafkalog option '{limit.option}': no offset matched from request of {tp[0]}-{tp[1]} "
                    f"with timestamp {ts}: no visible record has a timestamp >= {ts} (set "
                    "startingOffsetsByTimestampStrategy=latest to start at the latest offset instead)"
                )
            found = catalog.latest(tp, read_committed)
        out[tp] = found
    return out


def _tp_list(tps: object) -> str:
    return "[" + ", ".join(f"{t}-{p}" for t, p in sorted(tps)) + "]"  # type: ignore[call-overload]


def check_data_loss(
    tp: TopicPartition, from_offset: int, earliest: int, fail_on_data_loss: bool
) -> int:
    """The offset to start at given the log start offset: fail, or skip what is gone."""
    if from_offset < earliest:
        if fail_on_data_loss:
            raise OffsetOutOfRangeError(data_loss_message(tp, from_offset, earliest))
        log.warning("%s; skipping to %d", data_loss_message(tp, from_offset, earliest), earliest)
        return earliest
    return from_offset


# --- range planning ------------------------------------------------------------------------------


def narrow(
    catalog: TopicCatalog, r: OffsetRange, constraints: Constraints
) -> list[OffsetRange]:
    """Apply pushed filters to one range: offsets exactly, a timestamp lower bound via the time index."""
    if constraints.is_trivial:
        return [r]
    if not constraints.wants_topic(r.topic) or not constraints.partition.contains(r.partition):
        return []
    start, end = r.from_offset, r.until_offset
    if constraints.min_timestamp_ms is not None and start < end:
        found = catalog.offset_for_timestamp(r.topic_partition, constraints.min_timestamp_ms)
        start = end if found is None else max(start, found)
    return [OffsetRange(r.topic, r.partition, lo, hi)
            for lo, hi in constraints.offset.ranges_within(start, end)]


def _is_special(limit: OffsetRangeLimit, tp: TopicPartition, kind: str, special: int) -> bool:
    """Whether ``limit`` puts ``tp`` at ``earliest``/``latest`` (by name or as -2/-1)."""
    return limit.kind == kind or (limit.kind == "specific" and limit.as_map().get(tp) == special)


def plan_batch_ranges(
    catalog: TopicCatalog, opts: SourceOptions, constraints: Constraints | None = None
) -> list[OffsetRange]:
    """Every offset range a batch query reads, before splitting. Without pushed filters, a range
    whose end is ``latest`` is kept even when empty now: records may arrive before it is read."""
    constraints = constraints or Constraints()
    tps = [tp for tp in catalog.topic_partitions(opts.subscription)
           if constraints.wants_topic(tp[0]) and constraints.partition.contains(tp[1])]
    starts = resolve_limit(catalog, opts.starting, tps, starting=True, read_committed=opts.read_committed)
    ends = resolve_limit(catalog, opts.ending, tps, starting=False, read_committed=opts.read_committed)
    ranges = []
    for tp in tps:
        start, end = starts[tp], ends[tp]
        latest = catalog.latest(tp, opts.read_committed)
        if end > latest:
            if opts.fail_on_data_loss:
                raise OffsetOutOfRangeError(
                    f"kafkalog option '{opts.ending.option}': ending offset {end} of {tp[0]}-{tp[1]} is "
                    f"beyond the latest offset {latest} (set '{FAIL_ON_DATA_LOSS}' to 'false' to read up "
                    "to it)"
                )
            end = latest
        if start > end:
            raise InvalidConfigError(
                f"[RESOLVED_START_OFFSET_GREATER_THAN_END_OFFSET] The resolved start offset {start} is "
                f"greater than the resolved end offset {end} for topic {tp[0]} partition {tp[1]}: the "
                f"start ({opts.starting.option or opts.starting.kind}) lies past the end "
                f"({opts.ending.option or opts.ending.kind}) once both are offsets (a timestamp against "
                "an offset, or a start past latest), or the topic partition is damaged"
            )
        if constraints.is_trivial:
            earliest = _is_special(opts.starting, tp, "earliest", EARLIEST)
            r = OffsetRange(tp[0], tp[1], start, end, from_earliest=earliest,
                            to_latest=_is_special(opts.ending, tp, "latest", LATEST),
                            since_earliest=earliest)
            begin = check_data_loss(tp, start, catalog.earliest(tp), opts.fail_on_data_loss)
            if r.to_latest or begin < end:
                ranges.append(replace(r, from_offset=min(begin, end)))
            continue
        # Narrowed by pushed filters (only where Spark plans each scan afresh): exact offsets.
        for piece in narrow(catalog, OffsetRange(tp[0], tp[1], start, end), constraints):
            if piece.size > 0:
                begin = check_data_loss(tp, piece.from_offset, catalog.earliest(tp), opts.fail_on_data_loss)
                if begin < piece.until_offset:
                    ranges.append(OffsetRange(tp[0], tp[1], begin, piece.until_offset))
    return ranges


def _divide(r: OffsetRange, parts: int, catalog: TopicCatalog | None) -> list[OffsetRange]:
    """``getDividedPartition``: ``parts`` near-equal pieces, each split point moved back to a batch
    boundary when one lies strictly between its neighbours."""
    if parts <= 1:
        return [r]
    points = []
    remaining, start = r.size, r.from_offset
    for part in range(parts - 1):
        this = remaining // (parts - part)
        remaining -= this
        start = min(start + this, r.until_offset)
        points.append(start)
    if catalog is not None:
        snapped = []
        prev = r.from_offset
        for i, x in enumerate(points):
            nxt = points[i + 1] if i + 1 < len(points) else r.until_offset
            b = catalog.batch_boundary(r.topic_partition, x - 1)
            snapped.append(b if prev < b < nxt else x)
            prev = snapped[-1]
        points = snapped
    bounds = [r.from_offset, *points, r.until_offset]
    pieces = [OffsetRange(r.topic, r.partition, a, b, since_earliest=r.since_earliest)
              for a, b in pairwise(bounds) if b > a]
    # The outer ends keep their symbolic meaning; the split points between pieces are offsets.
    pieces[0] = replace(pieces[0], from_earliest=r.from_earliest)
    pieces[-1] = replace(pieces[-1], to_latest=r.to_latest)
    return pieces


def divide_ranges(
    ranges: Sequence[OffsetRange],
    min_partitions: int | None,
    max_records_per_partition: int | None,
    catalog: TopicCatalog | None = None,
) -> list[OffsetRange]:
    """Spark's ``KafkaOffsetRangeCalculator.getRanges``: split ranges so there are at least
    ``min_partitions`` and none holds more than ``max_records_per_partition`` offsets. Ranges empty
    now but ending at ``latest`` are kept, unsplit, after the others."""
    waiting = [r for r in ranges if r.size <= 0 and r.to_latest]
    ranges = [r for r in ranges if r.size > 0]
    if (min_partitions is None or len(ranges) >= min_partitions) and max_records_per_partition is None:
        return ranges + waiting
    if max_records_per_partition is not None:
        ranges = [piece for r in ranges
                  for piece in _divide(r, -(-r.size // max_records_per_partition), catalog)]
    if min_partitions is None or min_partitions <= len(ranges):
        return ranges + waiting
    total = sum(r.size for r in ranges)

    def part_count(size: int, total_size: int, min_parts: int) -> int:
        # Math.round in Scala rounds half up.
        return max(int(size / total_size * min_parts + 0.5), 1) if total_size else 1

    unsplit = [r for r in ranges if part_count(r.size, total, min_partitions) == 1]
    split_total = total - sum(r.size for r in unsplit)
    split_min = max(min_partitions - len(unsplit), 1)
    return [piece for r in ranges
            for piece in _divide(r, part_count(r.size, split_total, split_min), catalog)] + waiting


# --- executor side -------------------------------------------------------------------------------


def resolve_bounds(part: KafkaLogInputPartition, log_start: int, latest: int) -> tuple[int, int]:
    """The offsets an input partition covers now: ``earliest``/``latest`` resolved against the log,
    explicit offsets checked against it the way Spark's Kafka source does (``failOnDataLoss``)."""
    tp = (part.topic, part.partition)
    start = log_start if part.from_earliest else part.from_offset
    end = latest if part.to_latest else part.until_offset
    if start < log_start:
        # Retention moved the log start since planning. A piece of an 'earliest' range never asked
        # for what is gone; an explicit offset did.
        start = log_start if part.since_earliest else check_data_loss(
            tp, start, log_start, part.fail_on_data_loss)
    if end > latest:
        if part.fail_on_data_loss:
            raise OffsetOutOfRangeError(
                f"Cannot read {tp[0]}-{tp[1]} up to offset {end}: the log now ends at offset {latest} "
                "(it was truncated since the query was planned). If you don't want the query to fail "
                f"in such cases, set the source option '{FAIL_ON_DATA_LOSS}' to 'false'.")
        log.warning("%s-%d now ends at offset %d, before the planned end %d; reading up to it",
                    tp[0], tp[1], latest, end)
        end = latest
    return start, end


def read_range(part: KafkaLogInputPartition,
               location: tuple[FileSystem, Path] | None = None) -> Iterator[pa.RecordBatch]:
    """The records of one input partition as Arrow record batches, decoded batch by batch.

    ``location``: the ``data_location`` of ``part.path`` to read through (default: a new one for
    this task); its filesystem's ``stats`` count the bytes fetched, logged at INFO when the task ends.
    """
    keep_freed_memory()  # see worker_memory: batches built in reused, not fresh, pages
    fs, root = location or data_location(part.path, part.filesystem_options)
    before = fs.stats.bytes_read, fs.stats.requests
    plog = open_partition(part.path, part.topic, part.partition, fs=fs, root=root)
    try:
        latest = plog.last_stable_offset if part.read_committed else plog.high_watermark
        start, end = resolve_bounds(part, plog.log_start_offset, latest)
        if start >= end:
            return
        builder = ColumnBuilder(part.topic, part.partition, part.include_headers)
        isolation = FetchIsolation.TXN_COMMITTED if part.read_committed else FetchIsolation.HIGH_WATERMARK
        for batch in plog.visible_batches(start, end, isolation=isolation):
            # Bounded by what was decoded, not by the batch sizes on disk: a compressed batch can
            # decode to many times its size.
            if builder.add(batch, start, end) and (
                    len(builder) >= ARROW_BATCH_ROWS or builder.nbytes >= ARROW_BATCH_BYTES):
                out = builder.build()
                if out is not None:
                    yield out
        out = builder.build()
        if out is not None:
            yield out
    finally:
        plog.close()
        log.info("kafkalog: read %s-%d [%d, %d) of %s: %d bytes fetched in %d requests", part.topic,
                 part.partition, part.from_offset, part.until_offset, part.path,
                 fs.stats.bytes_read - before[0], fs.stats.requests - before[1])


class KafkaLogBatchReader(DataSourceReader):
    """``spark.read.format("kafkalog")`` without filter pushdown: plans the offset ranges of the
    options, reads them as Arrow. Works whatever ``spark.sql.python.filterPushdown.enabled`` says,
    and is correct on every query shape even where Spark reuses a DataFrame's first plan: nothing in
    the plan depends on the query, and ``earliest``/``latest`` are resolved when tasks start."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self.constraints = Constraints()

    def plan(self) -> list[OffsetRange]:
        """The offset ranges of this read (what ``partitions()`` turns into input partitions)."""
        with TopicCatalog(self.opts.path, self.opts.filesystem_options) as catalog:
            warn_missing_topics(catalog, self.opts)
            ranges = plan_batch_ranges(catalog, self.opts, self.constraints)
            return divide_ranges(ranges, self.opts.min_partitions, self.opts.max_records_per_partition,
                                 catalog)

    @user_errors
    def partitions(self) -> list[InputPartition]:
        return [KafkaLogInputPartition.of(r, self.opts) for r in self.plan()]

    @user_errors
    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, KafkaLogInputPartition):
            # Spark substitutes InputPartition(None) when there is nothing to read.
            return iter(())
        if partition.from_offset >= partition.until_offset and not partition.to_latest:
            return iter(())
        return user_errors_iter(read_range(partition))


def warn_missing_topics(catalog: TopicCatalog, opts: SourceOptions) -> None:
    """``subscribe`` of a topic that does not exist reads nothing, as Spark's Kafka source does;
    say so once per planning, since it is usually a misspelt name."""
    if opts.subscription.kind != "subscribe":
        return
    existing = set(catalog.topics())
    missing = [t for t in opts.subscription.topics if t not in existing]
    if missing:
        log.warning("kafkalog: subscribe names %s that %s not exist in %s; %s no rows",
                    ", ".join(repr(t) for t in missing), "does" if len(missing) == 1 else "do",
                    opts.path, "it gives" if len(missing) == 1 else "they give")


class KafkaLogFilteringReader(KafkaLogBatchReader):
    """``KafkaLogBatchReader`` plus ``pushFilters`` (see ``pushdown``): the reader where Spark keeps
    each scan's pushdown plan to itself (``pushdown.plan_kept_per_scan``), or with
    ``filterPushdown=true``.

    Spark refuses to plan a reader that implements ``pushFilters`` while
    ``spark.sql.python.filterPushdown.enabled`` is false (``DATA_SOURCE_PUSHDOWN_DISABLED``).
    On PySpark 4.3.0 the plan of the last pushdown is shared by every scan of the DataFrame, so
    with ``filterPushdown=true`` some query shapes return wrong rows (listed in docs/SPARK.md).
    """

    @user_errors
    def pushFilters(self, filters: list) -> list:
        # Not a generator: the constraints must be recorded even if Spark never iterates the result.
        self.constraints, remaining = split_filters(filters)
        return remaining
