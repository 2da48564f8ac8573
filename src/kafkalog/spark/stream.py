"""``spark.readStream.format("kafkalog")``: micro-batches over the growing logs.

Offsets are Spark's Kafka-source JSON, ``{"topic": {"partition": next_offset}}``: Spark stores them
in the checkpoint's ``offsets/N`` files and hands them back on restart, so the checkpoint, not this
object, is the source of truth (``commit``/``stop`` are not relied upon: Spark delivers them late
or never). The reader object lives in one long-lived driver-side Python process per query, which
is where the ``Trigger.AvailableNow`` target and the ``maxTriggerDelay`` clock are kept.

Semantics follow ``KafkaMicroBatchStream``: the initial offsets come from ``startingOffsets``
(default ``latest``) or the timestamp options; every trigger ends at the latest offsets (the log end
offset, or the last stable offset under read_committed), limited by ``maxOffsetsPerTrigger`` split
across partitions in proportion to their backlog; partitions and topics that appear later (e.g.
matching ``subscribePattern``) are read from their earliest offset; data that retention removed
before it was read is reported per ``failOnDataLoss``.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterator, Mapping

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from kafkalog.errors import InvalidConfigError, OffsetOutOfRangeError
from kafkalog.spark.catalog import TopicCatalog
from kafkalog.spark.options import (
    FAIL_ON_DATA_LOSS,
    SourceOptions,
    TopicPartition,
    user_errors,
    user_errors_iter,
)
from kafkalog.spark.reader import (
    KafkaLogInputPartition,
    OffsetRange,
    divide_ranges,
    read_range,
    resolve_limit,
)

__all__ = ["KafkaLogStreamReader", "offsets_from_json", "offsets_to_json", "rate_limit"]

log = logging.getLogger(__name__)

PartitionOffsets = dict[TopicPartition, int]


def offsets_to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), off in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = int(off)
    return out


def offsets_from_json(obj: Mapping[str, Mapping[str, int]] | None) -> PartitionOffsets:
    if not obj:
        return {}
    return {(topic, int(p)): int(off) for topic, parts in obj.items() for p, off in parts.items()}


def rate_limit(
    limit: int, start: Mapping[TopicPartition, int], until: Mapping[TopicPartition, int],
    earliest_of_new: Mapping[TopicPartition, int],
) -> PartitionOffsets:
    """Spark's ``rateLimit``: at most ``limit`` offsets in all, shared in proportion to backlog;
    a partition owed less than one offset still gets one, so none starves."""
    sizes = {}
    for tp, end in until.items():
        begin = start.get(tp, earliest_of_new.get(tp))
        if begin is not None and end - begin > 0:
            sizes[tp] = end - begin
    total = float(sum(sizes.values()))
    if total < 1:
        return dict(until)
    out = {}
    for tp, end in until.items():
        if tp not in sizes:
            out[tp] = end
            continue
        begin = start.get(tp, earliest_of_new.get(tp))
        assert begin is not None
        prorate = limit * (sizes[tp] / total)
        share = math.ceil(prorate) if prorate < 1 else math.floor(prorate)
        out[tp] = min(end, begin + share)
    return out


def _tp_names(tps: object) -> str:
    return "[" + ", ".join(f"{t}-{p}" for t, p in sorted(tps)) + "]"  # type: ignore[call-overload]


def _report_data_loss(fail: bool, message: str) -> None:
    if fail:
        raise OffsetOutOfRangeError(
            f"{message}. Some data may have been lost because it is not available any more. If you don't "
            f"want the query to fail in such cases, set the source option '{FAIL_ON_DATA_LOSS}' to 'false'."
        )
    log.warning("%s. Some data may have been missed.", message)


class KafkaLogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Stream reader with admission control (``maxOffsetsPerTrigger``/``minOffsetsPerTrigger``) and
    ``Trigger.AvailableNow`` support."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self._available_now: PartitionOffsets | None = None
        # As Spark's KafkaMicroBatchStream (lastTriggerMillis = 0): the first batch after a start is
        # never held back by minOffsetsPerTrigger.
        self._last_trigger_ms = 0.0
        # The latest offsets the last latestOffset saw (the pinned ones under AvailableNow), what
        # reportLatestOffset reports, as Spark's latestPartitionOffsets
        self._last_latest: PartitionOffsets | None = None

    # --- offsets -------------------------------------------------------------------------------

    def _latest(self, catalog: TopicCatalog) -> PartitionOffsets:
        tps = catalog.topic_partitions(self.opts.subscription)
        return {tp: catalog.latest(tp, self.opts.read_committed) for tp in tps}

    @user_errors
    def initialOffset(self) -> dict:
        with TopicCatalog(self.opts.path, self.opts.filesystem_options) as catalog:
            tps = catalog.topic_partitions(self.opts.subscription)
            offsets = resolve_limit(catalog, self.opts.starting, tps, starting=True,
                                    read_committed=self.opts.read_committed)
            if self.opts.starting.kind == "specific":
                for tp, off in offsets.items():
                    earliest = catalog.earliest(tp)
                    if off < earliest:
                        _report_data_loss(self.opts.fail_on_data_loss,
                                          f"startingOffsets for {tp[0]}-{tp[1]} was {off} but the log starts "
                                          f"at {earliest}")
                        offsets[tp] = earliest
        return offsets_to_json(offsets)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        if self.opts.min_offsets_per_trigger is not None:
            return ReadMinRows(self.opts.min_offsets_per_trigger)
        return ReadAllAvailable()

    @user_errors
    def prepareForTriggerAvailableNow(self) -> None:
        # Pin the target: an AvailableNow run reads what exists now, in as many batches as the limit asks.
        with TopicCatalog(self.opts.path, self.opts.filesystem_options) as catalog:
            self._available_now = self._latest(catalog)

    def _delay_batch(self, start: PartitionOffsets, latest: PartitionOffsets) -> bool:
        """``minOffsetsPerTrigger``: wait for enough new records, but no longer than ``maxTriggerDelay``."""
        minimum = self.opts.min_offsets_per_trigger
        if minimum is None or self._available_now is not None:
            return False
        now = time.time() * 1000
        if now - self._last_trigger_ms >= self.opts.max_trigger_delay_ms:
            self._last_trigger_ms = now
            return False
        new_records = sum(off - start.get(tp, 0) for tp, off in latest.items())
        if new_records < minimum:
            return True
        self._last_trigger_ms = now
        return False

    @user_errors
    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        start_offsets = offsets_from_json(start)
        with TopicCatalog(self.opts.path, self.opts.filesystem_options) as catalog:
            latest = dict(self._available_now) if self._available_now is not None else self._latest(catalog)
            self._last_latest = latest
            if isinstance(limit, ReadAllAvailable):
                return offsets_to_json(latest)
            if self._delay_batch(start_offsets, latest):
                return offsets_to_json(start_offsets)
            if isinstance(limit, ReadMaxRows):
                new = [tp for tp in latest if tp not in start_offsets]
                earliest_new = {tp: catalog.earliest(tp) for tp in new}
                return offsets_to_json(rate_limit(limit.max_rows, start_offsets, latest, earliest_new))
        return offsets_to_json(latest)

    @user_errors
    def reportLatestOffset(self) -> dict | None:
        """The latest offsets the last ``latestOffset`` saw (None before it ran), for the query's
        progress, as Spark's KafkaMicroBatchStream reports them."""
        return None if self._last_latest is None else offsets_to_json(self._last_latest)

    # --- planning and reading ------------------------------------------------------------------

    def _verify_end_for_available_now(self, catalog: TopicCatalog, end: PartitionOffsets) -> None:
        """Spark's ``verifyEndOffsetForTriggerAvailableNow``: every batch of a Trigger.AvailableNow
        run ends within what was pinned at its start, on partitions that still hold those offsets."""
        pinned = self._available_now
        assert pinned is not None
        if set(pinned) != set(end):
            raise InvalidConfigError(
                "[MISMATCHED_TOPIC_PARTITIONS_BETWEEN_END_OFFSET_AND_PREFETCHED] Trigger.AvailableNow: the "
                "batch's end names other topic-partitions than were pinned at the start of the run "
                f"(pinned: {_tp_names(pinned)}, end: {_tp_names(end)}); restarting the query may help.")
        if any(end[tp] > pinned[tp] for tp in end):
            raise InvalidConfigError(
                "[END_OFFSET_HAS_GREATER_OFFSET_FOR_TOPIC_PARTITION_THAN_PREFETCHED] Trigger.AvailableNow: "
                f"the batch's end {offsets_to_json(end)} passes what was pinned at the start of the run "
                f"{offsets_to_json(pinned)}; restarting the query may help.")
        existing = set(catalog.topic_partitions(self.opts.subscription))
        if not set(end) <= existing:
            raise InvalidConfigError(
                "[LOST_TOPIC_PARTITIONS_IN_END_OFFSET_WITH_TRIGGER_AVAILABLENOW] Trigger.AvailableNow: "
                f"{_tp_names(set(end) - existing)} no longer exist (end: {_tp_names(end)}); restarting the "
                "query may help.")
        latest = {tp: catalog.latest(tp, self.opts.read_committed) for tp in end}
        if any(end[tp] > latest[tp] for tp in end):
            raise InvalidConfigError(
                "[END_OFFSET_HAS_GREATER_OFFSET_FOR_TOPIC_PARTITION_THAN_LATEST_WITH_TRIGGER_AVAILABLENOW] "
                f"Trigger.AvailableNow: the latest offsets {offsets_to_json(latest)} are below the batch's "
                f"end {offsets_to_json(end)}; restarting the query may help.")

    def plan(self, start: dict, end: dict) -> list[OffsetRange]:
        start_offsets = offsets_from_json(start)
        end_offsets = offsets_from_json(end)
        fail = self.opts.fail_on_data_loss
        with TopicCatalog(self.opts.path, self.opts.filesystem_options) as catalog:
            if self._available_now is not None:
                self._verify_end_for_available_now(catalog, end_offsets)
            existing = set(catalog.topic_partitions(self.opts.subscription))
            new_initial = {}
            for tp in sorted(set(end_offsets) - set(start_offsets)):
                if tp not in existing:
                    _report_data_loss(fail, f"Cannot find earliest offsets of {tp[0]}-{tp[1]}")
                    continue
                new_initial[tp] = catalog.earliest(tp)
                if new_initial[tp] != 0:
                    _report_data_loss(fail, f"Added partition {tp[0]}-{tp[1]} starts from {new_initial[tp]} "
                                            "instead of 0")
            gone = sorted(set(start_offsets) - set(end_offsets))
            if gone:
                _report_data_loss(fail, f"{', '.join(f'{t}-{p}' for t, p in gone)} are gone")
            ranges = []
            for tp, until in sorted(end_offsets.items()):
                begin = start_offsets.get(tp, new_initial.get(tp))
                if begin is None:
                    continue
                if until < begin:
                    _report_data_loss(
                        fail, f"Partition {tp[0]}-{tp[1]}'s offset was changed from {begin} to {until}")
                    continue
                ranges.append(OffsetRange(tp[0], tp[1], begin, until))
            return divide_ranges(ranges, self.opts.min_partitions, self.opts.max_records_per_partition,
                                 catalog)

    @user_errors
    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        return [KafkaLogInputPartition.of(r, self.opts) for r in self.plan(start, end)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, KafkaLogInputPartition):
            return iter(())
        return user_errors_iter(read_range(partition))

    def commit(self, end: dict) -> None:
        """Nothing to do: offsets live in Spark's checkpoint, and there is no consumer group."""

    def stop(self) -> None:
        """Nothing to release: every call opens and closes the logs it needs."""
