"""``ReplicaManager`` for one node: appends produced records to the local logs and serves fetches,
with Kafka's DelayedFetch long-poll (the seed's ``ReplicaManager.appendMessages`` call chain).

Everything here runs on the broker's event-loop thread: it is the only writer of every log, so
appends need no lock beyond the storage engine's own, and fetch waiters are woken directly from the
append path. On a single node the high watermark is the log end offset after each append, so acks=1
and acks=all both answer once the local append is done.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from kio.schema.errors import ErrorCode

from kafkalog.broker.error_codes import error_code_for
from kafkalog.broker.file_region import FileRegion
from kafkalog.errors import (
    CorruptRecordError,
    DecompressionError,
    FencedLeaderEpochError,
    InvalidTopicError,
    KafkaLogError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    RecordValidationError,
    UnknownLeaderEpochError,
    UnknownTopicOrPartitionError,
)
from kafkalog.records.memory import MemoryRecords
from kafkalog.storage.checkpoint import REPLICATION_OFFSET_CHECKPOINT_FILE, OffsetCheckpointFile
from kafkalog.storage.log import FetchIsolation, Log
from kafkalog.storage.log_file_utils import INTERNAL_TOPICS, check_client_append
from kafkalog.storage.log_manager import LogManager

__all__ = [
    "FetchParams",
    "FetchPartitionData",
    "FetchPartitionInfo",
    "PartitionResponse",
    "ReplicaManager",
    "TopicPartition",
]

log = logging.getLogger(__name__)

# The append failures Kafka's appendToLocalLog answers without the partition's log start offset.
_WITHOUT_LOG_START = (UnknownTopicOrPartitionError, RecordTooLargeError, RecordBatchTooLargeError,
                      CorruptRecordError, KafkaStorageError)

# Record bytes below this size are read into the response (pread) instead of sent with sendfile,
# which first waits for the socket buffer to empty and then for the kernel to take every byte:
# measured on loopback, pread + write wins below ~0.5 MiB and sendfile from ~1 MiB up.
SENDFILE_MIN_BYTES = 512 * 1024
# ... but no more than this many read bytes per response: beyond it sendfile keeps memory bounded.
PREAD_BUDGET_PER_FETCH = 4 * 1024 * 1024
# Each file region holds a duplicated descriptor until it is sent: past this many in one response
# the rest are read instead, so a fetch of many partitions cannot exhaust the descriptor limit.
MAX_REGIONS_PER_FETCH = 64
_I32 = struct.Struct(">i")


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(slots=True)
class PartitionResponse:
    """One partition's Produce result (Kafka's ``ProduceResponse.PartitionResponse``)."""

    error: ErrorCode
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    record_errors: tuple[tuple[int, str | None], ...] = ()
    error_message: str | None = None


@dataclass(frozen=True, slots=True)
class FetchPartitionInfo:
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1  # -1: not checked (before Fetch v9, or the client does not know)
    last_fetched_epoch: int = -1  # Fetch v12+: the epoch of the last batch the fetcher has; -1 none


def _diverging_epoch(tp: TopicPartition, partition_log: Log, info: FetchPartitionInfo,
                     log_start: int) -> tuple[int, int] | None:
    """Kafka's ``Partition.readRecords`` check of a fetch's last fetched epoch: where the fetcher's
    log has diverged from this one, the (epoch, end offset) to truncate to instead of records."""
    found = partition_log.end_offset_for_epoch(info.last_fetched_epoch)
    if found is None:
        raise OffsetOutOfRangeError(
            f"Could not determine the end offset of the last fetched epoch {info.last_fetched_epoch} of {tp}")
    if info.fetch_offset < log_start:
        raise OffsetOutOfRangeError(
            f"Received request for offset {info.fetch_offset} for {tp}, but we only have log segments "
            f"starting from offset: {log_start}.")
    epoch, end = found
    if epoch < info.last_fetched_epoch or end < info.fetch_offset:
        return epoch, end
    return None


def _check_current_leader_epoch(tp: TopicPartition, partition_log: Log, current_leader_epoch: int) -> None:
    """Kafka's ``Partition.checkCurrentLeaderEpoch``: a client's idea of the leader epoch (Fetch v9+,
    ListOffsets v4+, OffsetForLeaderEpoch v2+; -1 for none) against the partition's
    (``Log.leader_epoch``, what Metadata reports): older is fenced, newer unknown -- the client's
    metadata is stale, or ahead of ours. Only -1 means "none" here, as for ListOffsets and
    OffsetForLeaderEpoch in Kafka (-2 is simply older); Fetch maps every negative to -1 first
    (``FetchRequest.optionalEpoch``)."""
    if current_leader_epoch == -1:
        return
    leader_epoch = partition_log.leader_epoch
    if current_leader_epoch < leader_epoch:
        raise FencedLeaderEpochError(
            f"The leader epoch in the request {current_leader_epoch} is older than the current leader "
            f"epoch {leader_epoch} of {tp}")
    if current_leader_epoch > leader_epoch:
        raise UnknownLeaderEpochError(
            f"The leader epoch in the request {current_leader_epoch} is newer than the current leader "
            f"epoch {leader_epoch} of {tp}")


@dataclass(frozen=True, slots=True)
class FetchParams:
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation: FetchIsolation


@dataclass(slots=True)
class FetchPartitionData:
    error: ErrorCode
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: bytes | FileRegion = b""
    aborted_transactions: list[tuple[int, int]] | None = None
    diverging_epoch: tuple[int, int] | None = None  # (epoch, end offset) the fetcher must truncate to

    @property
    def size(self) -> int:
        return len(self.records) if isinstance(self.records, bytes) else self.records.size

    def release(self) -> None:
        if isinstance(self.records, FileRegion):
            self.records.close()


ResponseCallback = Callable[[dict[TopicPartition, PartitionResponse]], None]


class ReplicaManager:
    def __init__(self, log_manager: LogManager) -> None:
        self._log_manager = log_manager
        self._waiters: dict[TopicPartition, set[asyncio.Future[None]]] = {}
        self._shutting_down = False
        self._high_watermark_checkpoint = OffsetCheckpointFile(
            log_manager.data_dir / REPLICATION_OFFSET_CHECKPOINT_FILE)
        # Kafka's ReplicaManager creates it (empty) when constructed.
        self._high_watermark_checkpoint.create_if_missing()

    @property
    def log_manager(self) -> LogManager:
        return self._log_manager

    def get_log(self, tp: TopicPartition, current_leader_epoch: int = -1) -> Log:
        """The partition's log; UnknownTopicOrPartitionError if there is none, and Fenced- or
        UnknownLeaderEpochError when ``current_leader_epoch`` (-1: unchecked) is not the partition's
        (Kafka's ``Partition.getLocalLog``)."""
        partition_log = self._log_manager.get_log(tp.topic, tp.partition)
        _check_current_leader_epoch(tp, partition_log, current_leader_epoch)
        return partition_log

    def leader_epoch(self, tp: TopicPartition) -> int:
        """The partition's leader epoch, what Metadata reports: its log's (``Log.leader_epoch``, the
        epoch its appends are stamped with), 0 for a partition whose log is not open."""
        try:
            return self.get_log(tp).leader_epoch
        except KafkaLogError:
            return 0

    # --- produce ---------------------------------------------------------------------------------

    def append_records(
        self,
        timeout_ms: int,
        required_acks: int,
        entries_per_partition: Mapping[TopicPartition, memoryview | None],
        response_callback: ResponseCallback,
    ) -> None:
        """Append each partition's records as leader and call ``response_callback`` with the results
        (Kafka's ``appendRecords``). With one replica every ack level is met by the local append, so
        ``timeout_ms`` never expires; acks other than -1/0/1 fail every partition with
        INVALID_REQUIRED_ACKS."""
        if required_acks not in (-1, 0, 1):
            response_callback(
                {tp: PartitionResponse(ErrorCode.invalid_required_acks) for tp in entries_per_partition}
            )
            return
        results: dict[TopicPartition, PartitionResponse] = {}
        for tp, records in entries_per_partition.items():
            results[tp] = self._append_to_local_log(tp, records)
        response_callback(results)

    def _append_to_local_log(self, tp: TopicPartition, records: memoryview | None) -> PartitionResponse:
        """Kafka's ``appendToLocalLog`` answers: a record validation failure names its records and
        says why (the only message a failed append carries); other failures report the partition's
        log start offset, except those Kafka answers without one (an unknown partition, a batch too
        large or corrupt, a storage error)."""
        try:
            # the coordinators append to their topics by their own path; Kafka refuses a client's
            # append there with its "unknown" append info: no log start offset
            check_client_append(tp.topic)
        except InvalidTopicError as e:
            return PartitionResponse(error_code_for(e))
        try:
            partition_log = self.get_log(tp)
            if records is None:
                # Kafka fails on null records without an answer; kafkalog answers INVALID_RECORD
                return PartitionResponse(ErrorCode.invalid_record)
            info = partition_log.append_as_leader(MemoryRecords(records))
        except DecompressionError:
            # as Kafka's appendToLocalLog answers what its codecs throw: not retriable
            return PartitionResponse(ErrorCode.unknown_server_error,
                                     log_start_offset=self._log_start_offset(tp))
        except _WITHOUT_LOG_START as e:
            return PartitionResponse(error_code_for(e))
        except RecordValidationError as e:
            return PartitionResponse(error_code_for(e), log_start_offset=self._log_start_offset(tp),
                                     record_errors=tuple(e.record_errors), error_message=e.client_message)
        except KafkaLogError as e:
            return PartitionResponse(error_code_for(e), log_start_offset=self._log_start_offset(tp))
        except Exception:
            log.exception("Error appending to %s", tp)
            return PartitionResponse(ErrorCode.unknown_server_error,
                                     log_start_offset=self._log_start_offset(tp))
        if info.last_offset >= info.first_offset >= 0:
            self._wake(tp)
        return PartitionResponse(
            ErrorCode.none, info.first_offset, info.log_append_time, info.log_start_offset
        )

    def _log_start_offset(self, tp: TopicPartition) -> int:
        """Kafka's ``processFailedRecord``: the partition's log start offset, -1 if it has no log."""
        try:
            return self.get_log(tp).log_start_offset
        except KafkaLogError:
            return -1

    # --- fetch -----------------------------------------------------------------------------------

    def _wake(self, tp: TopicPartition) -> None:
        waiters = self._waiters.pop(tp, None)
        if waiters:
            for fut in waiters:
                if not fut.done():
                    fut.set_result(None)

    def wake(self, topic: str, partition: int) -> None:
        """Complete the fetches parked on a partition another component appended to (the group
        coordinator writing ``__consumer_offsets``)."""
        self._wake(TopicPartition(topic, partition))

    def wake_all(self) -> None:
        """Complete every parked fetch now (shutdown, topic deletion)."""
        for tp in list(self._waiters):
            self._wake(tp)

    # --- admin ---------------------------------------------------------------------------------

    def delete_topic(self, topic: str) -> None:
        """Delete every partition of ``topic`` (Kafka's ``stopReplicas`` with delete): parked fetches
        on it are woken, read again and answer UNKNOWN_TOPIC_OR_PARTITION."""
        self._log_manager.delete_topic(topic)
        for tp in [tp for tp in self._waiters if tp.topic == topic]:
            self._wake(tp)

    def delete_records(
        self, offsets: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, tuple[ErrorCode, int]]:
        """Kafka's ``deleteRecords``: raise each partition's log start offset to the requested offset
        (-1: the high watermark) and delete the segments wholly below it; (error, low watermark)."""
        results: dict[TopicPartition, tuple[ErrorCode, int]] = {}
        for tp, offset in offsets.items():
            if tp.topic in INTERNAL_TOPICS:  # their records are the coordinators' state
                results[tp] = (ErrorCode.invalid_topic_exception, -1)
                continue
            try:
                partition_log = self.get_log(tp)
                # -1 is the high watermark; the log refuses a compacted topic, then a negative offset
                partition_log.delete_records_before(partition_log.high_watermark if offset == -1 else offset)
                results[tp] = (ErrorCode.none, partition_log.log_start_offset)
            except KafkaLogError as e:
                results[tp] = (error_code_for(e), -1)
            except Exception:
                log.exception("Error deleting records of %s before %d", tp, offset)
                results[tp] = (ErrorCode.unknown_server_error, -1)
        return results

    def checkpoint_high_watermarks(self) -> None:
        """Write every partition's high watermark to ``replication-offset-checkpoint`` (Kafka's
        ``checkpointHighWatermarks``, every ``replica.high.watermark.checkpoint.interval.ms`` and at
        shutdown). Like Kafka, nothing is written while the directory holds no partition."""
        hws = {(p.topic, p.partition): p.high_watermark for p in self._log_manager.logs()}
        if hws:
            self._high_watermark_checkpoint.write(hws)

    def shutdown(self) -> None:
        self._shutting_down = True
        self.wake_all()

    async def fetch_messages(
        self, params: FetchParams, fetch_infos: Sequence[tuple[TopicPartition, FetchPartitionInfo]]
    ) -> list[tuple[TopicPartition, FetchPartitionData]]:
        """Read every partition; if fewer than ``min_bytes`` came back and nothing failed, wait for
        appends to these partitions, up to ``max_wait_ms`` (Kafka's DelayedFetch), and read again."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0, params.max_wait_ms) / 1000
        delayed = False
        while True:
            results, total, errors = self.read_from_local_log(params, fetch_infos, delayed=delayed)
            delayed = True
            remaining = deadline - loop.time()
            if (
                total >= params.min_bytes
                or errors  # and a diverging epoch, which the fetcher must hear of at once
                or remaining <= 0
                or not fetch_infos
                or self._shutting_down
            ):
                return results
            for _, data in results:
                data.release()
            waiter: asyncio.Future[None] = loop.create_future()
            keys = {tp for tp, _ in fetch_infos}
            for tp in keys:
                self._waiters.setdefault(tp, set()).add(waiter)
            try:
                await asyncio.wait((waiter,), timeout=remaining)  # woken by an append, or the deadline
            finally:
                for tp in keys:
                    found = self._waiters.get(tp)
                    if found is not None:
                        found.discard(waiter)
                        if not found:
                            del self._waiters[tp]

    def read_from_local_log(
        self, params: FetchParams, fetch_infos: Sequence[tuple[TopicPartition, FetchPartitionInfo]],
        *, delayed: bool = False,
    ) -> tuple[list[tuple[TopicPartition, FetchPartitionData]], int, bool]:
        """(results, record bytes, whether any partition failed) — Kafka's ``readFromLog``: the first
        batch is returned even when larger than the limits, later partitions share what is left of
        ``max_bytes``. ``delayed``: the bytes count as Kafka's ``DelayedFetch`` counts them, each
        partition's at most its ``partition_max_bytes``."""
        limit = params.max_bytes
        min_one_message = True
        total = 0
        errors = False
        regions = 0
        read_bytes = 0
        results: list[tuple[TopicPartition, FetchPartitionData]] = []
        for tp, info in fetch_infos:
            data = self._read_partition(
                tp,
                info,
                min(info.partition_max_bytes, limit),
                min_one_message,
                params.isolation,
                regions < MAX_REGIONS_PER_FETCH,
                read_bytes < PREAD_BUDGET_PER_FETCH,
            )
            size = data.size
            if size > 0:
                min_one_message = False
                limit = max(0, limit - size)
                total += min(size, info.partition_max_bytes) if delayed else size
            if data.error != ErrorCode.none or data.diverging_epoch is not None:
                errors = True
            if isinstance(data.records, FileRegion):
                regions += 1
            else:
                read_bytes += size
            results.append((tp, data))
        return results, total, errors

    def _read_partition(
        self,
        tp: TopicPartition,
        info: FetchPartitionInfo,
        max_bytes: int,
        min_one_message: bool,
        isolation: FetchIsolation,
        allow_region: bool = True,
        prefer_read: bool = True,
    ) -> FetchPartitionData:
        try:
            partition_log = self.get_log(tp, max(info.current_leader_epoch, -1))  # Fetch: negative = none
            # Offsets before the read: a concurrent append must not make them run ahead of the data.
            high_watermark = partition_log.high_watermark
            last_stable = partition_log.last_stable_offset
            log_start = partition_log.log_start_offset
            if info.last_fetched_epoch >= 0:
                diverging = _diverging_epoch(tp, partition_log, info, log_start)
                if diverging is not None:
                    return FetchPartitionData(ErrorCode.none, high_watermark, last_stable, log_start,
                                              diverging_epoch=diverging)
            fetch = partition_log.read(
                info.fetch_offset, max(0, max_bytes), isolation=isolation, min_one_message=min_one_message
            )
        except KafkaLogError as e:
            return FetchPartitionData(error_code_for(e))
        except Exception:
            log.exception("Error reading %s at offset %d", tp, info.fetch_offset)
            return FetchPartitionData(ErrorCode.unknown_server_error)
        records = fetch.records
        # A first batch cut short by the limits (not the first partition's, which min_one_message
        # returns whole) is no batch at all: Kafka's checkFetchDataInfo sends nothing for it.
        size = 0 if fetch.first_entry_incomplete else records.size_in_bytes
        payload: bytes | FileRegion
        if size == 0:
            payload = b""
        elif (
            (prefer_read and size < SENDFILE_MIN_BYTES) or not allow_region or not hasattr(records, "fileno")
        ):
            payload = records.read_bytes() if hasattr(records, "read_bytes") else records.to_bytes()
        else:
            payload = FileRegion(records.fileno(), records.start, size)
        aborted = None
        if fetch.aborted_transactions is not None:
            aborted = [(t.producer_id, t.first_offset) for t in fetch.aborted_transactions]
        return FetchPartitionData(ErrorCode.none, high_watermark, last_stable, log_start, payload, aborted)
