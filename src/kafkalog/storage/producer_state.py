"""Producer state of a partition (Kafka's ProducerStateManager, ProducerAppendInfo, ProducerStateEntry).

For every producer id seen in the log the partition remembers its epoch, the sequence ranges of its
last five batches (to spot retried duplicates), its coordinator epoch and, while a transaction is
open, the transaction's first offset. Open transactions hold back the last stable offset; an ABORT
marker yields the ``AbortedTxn`` that goes into the segment's ``.txnindex``.

A producer idle for ``producer.id.expiration.ms`` (its last batch's max timestamp that long ago)
without an open transaction is forgotten, at snapshot load and whenever ``remove_expired_producers``
runs (the broker's periodic check); the expiry comes from a ``ProducerStateManagerConfig`` that every
partition of a ``LogManager`` shares.

The state is rebuilt from the log at load and saved in ``<offset>.snapshot`` files (spec §7.4, the
format Kafka reads) when a segment is rolled and when the log is closed, so that a restart — ours or
Kafka's — need not rescan the log. A Kafka broker that finds no snapshot after a clean shutdown
assumes there is no producer state at all, which is why the snapshot written at close matters.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from kafkalog.clock import Time
from kafkalog.errors import (
    CorruptSnapshotError,
    IllegalArgumentError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    KafkaStorageError,
    NoSuchFileError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from kafkalog.records.batch import RecordBatch
from kafkalog.records.control import EndTransactionMarker
from kafkalog.records.types import (
    MAGIC_V2,
    MAX_INT32,
    NO_PRODUCER_EPOCH,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    ControlRecordType,
)
from kafkalog.records.validator import AppendOrigin
from kafkalog.storage.filesystem import FileSystem, LocalFileSystem
from kafkalog.storage.log_file_utils import (
    PRODUCER_SNAPSHOT_FILE_SUFFIX,
    offset_from_file_name,
    producer_snapshot_file,
)
from kafkalog.storage.log_segment import LogOffsetMetadata, LogSegments
from kafkalog.storage.producer_snapshot import ProducerSnapshot, ProducerSnapshotEntry
from kafkalog.storage.txn_index import AbortedTxn

__all__ = [
    "NUM_BATCHES_TO_RETAIN",
    "PRODUCER_ID_EXPIRATION_MS",
    "BatchMetadata",
    "CompletedTxn",
    "ProducerAppendInfo",
    "ProducerStateEntry",
    "ProducerStateManager",
    "ProducerStateManagerConfig",
    "TxnMetadata",
    "decrement_sequence",
    "rebuild_producer_state",
]

log = logging.getLogger(__name__)

# Kafka keeps the metadata of a producer's last five batches for duplicate detection.
NUM_BATCHES_TO_RETAIN = 5
# Broker default of producer.id.expiration.ms: producers idle this long are forgotten.
PRODUCER_ID_EXPIRATION_MS = 86_400_000


class ProducerStateManagerConfig:
    """Kafka's ``ProducerStateManagerConfig``: one object shared by every partition of a
    ``LogManager``, so that a dynamic ``producer.id.expiration.ms`` reaches them all at once."""

    def __init__(self, producer_id_expiration_ms: int = PRODUCER_ID_EXPIRATION_MS) -> None:
        self.producer_id_expiration_ms = producer_id_expiration_ms

    @property
    def producer_id_expiration_ms(self) -> int:
        return self._producer_id_expiration_ms

    @producer_id_expiration_ms.setter
    def producer_id_expiration_ms(self, value: int) -> None:
        # Kafka's DynamicProducerStateManagerConfig refuses a negative value.
        if value < 0:
            raise IllegalArgumentError(f"producer.id.expiration.ms cannot be less than 0: {value}")
        self._producer_id_expiration_ms = value

    def __repr__(self) -> str:
        return f"ProducerStateManagerConfig(producer_id_expiration_ms={self._producer_id_expiration_ms})"


def decrement_sequence(sequence: int, decrement: int) -> int:
    """Kafka's ``DefaultRecordBatch.decrementSequence``: sequences wrap below 0 to Int.MAX."""
    if sequence < decrement:
        return MAX_INT32 - (decrement - sequence) + 1
    return sequence - decrement


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """Sequence and offset range of one appended batch (the last ``NUM_BATCHES_TO_RETAIN`` are kept)."""

    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


@dataclass(slots=True)
class ProducerStateEntry:
    """What the partition knows about one producer id (mutable: it is state, not a value)."""

    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    coordinator_epoch: int = -1
    last_timestamp: int = NO_TIMESTAMP
    current_txn_first_offset: int | None = None
    batch_metadata: deque[BatchMetadata] = field(default_factory=deque)

    def copy(self) -> ProducerStateEntry:
        return ProducerStateEntry(self.producer_id, self.producer_epoch, self.coordinator_epoch,
                                  self.last_timestamp, self.current_txn_first_offset,
                                  deque(self.batch_metadata))

    @property
    def is_empty(self) -> bool:
        return not self.batch_metadata

    @property
    def first_seq(self) -> int:
        return self.batch_metadata[0].first_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        return self.batch_metadata[-1].last_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        return self.batch_metadata[-1].last_offset if self.batch_metadata else -1

    @property
    def last_offset_delta(self) -> int:
        return self.batch_metadata[-1].offset_delta if self.batch_metadata else 0

    def maybe_update_producer_epoch(self, producer_epoch: int) -> bool:
        # A new epoch starts a new sequence space: the old batches cannot be duplicates any more.
        if self.producer_epoch != producer_epoch:
            self.batch_metadata.clear()
            self.producer_epoch = producer_epoch
            return True
        return False

    def _add_batch_metadata(self, batch: BatchMetadata) -> None:
        if len(self.batch_metadata) == NUM_BATCHES_TO_RETAIN:
            self.batch_metadata.popleft()
        self.batch_metadata.append(batch)

    def add_batch(self, producer_epoch: int, last_seq: int, last_offset: int, offset_delta: int,
                  timestamp: int) -> None:
        self.maybe_update_producer_epoch(producer_epoch)
        self._add_batch_metadata(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        self.last_timestamp = timestamp

    def update_from(self, other: ProducerStateEntry) -> None:
        """Merge a pending update into this entry (Kafka's ``ProducerStateEntry.update``)."""
        self.maybe_update_producer_epoch(other.producer_epoch)
        for batch in other.batch_metadata:
            self._add_batch_metadata(batch)
        self.coordinator_epoch = other.coordinator_epoch
        self.current_txn_first_offset = other.current_txn_first_offset
        self.last_timestamp = other.last_timestamp

    def end_transaction(self, producer_epoch: int, coordinator_epoch: int, timestamp: int) -> None:
        self.maybe_update_producer_epoch(producer_epoch)
        self.coordinator_epoch = coordinator_epoch
        self.current_txn_first_offset = None
        self.last_timestamp = timestamp

    def find_duplicate_batch(self, batch: RecordBatch) -> BatchMetadata | None:
        """A retained batch with exactly this batch's sequence range (same epoch), if any."""
        if batch.producer_epoch != self.producer_epoch:
            return None
        first, last = batch.base_sequence, batch.last_sequence
        return next((m for m in self.batch_metadata if m.first_seq == first and m.last_seq == last), None)


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction ended by a COMMIT or ABORT marker at ``last_offset``."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


@dataclass(frozen=True, slots=True)
class TxnMetadata:
    """An open transaction: its producer and where its first batch is (position when known)."""

    producer_id: int
    first_offset: LogOffsetMetadata


class ProducerAppendInfo:
    """The pending change one append makes to one producer's state (Kafka's ``ProducerAppendInfo``).

    Checks depend on who appends: clients get epoch and sequence checks, the transaction coordinator
    epoch checks, replication (and log recovery) none at all.
    """

    def __init__(self, partition: str, producer_id: int, current_entry: ProducerStateEntry,
                 origin: AppendOrigin) -> None:
        self._partition = partition
        self.producer_id = producer_id
        self._current = current_entry
        self._origin = origin
        self.updated_entry = current_entry.copy()
        self.updated_entry.batch_metadata.clear()
        self.started_transactions: list[TxnMetadata] = []

    def _check_producer_epoch(self, producer_epoch: int, offset: int) -> None:
        if producer_epoch < self.updated_entry.producer_epoch:
            message = (f"Epoch of producer {self.producer_id} at offset {offset} in {self._partition} is "
                       f"{producer_epoch}, which is smaller than the last seen epoch "
                       f"{self.updated_entry.producer_epoch}")
            if self._origin is AppendOrigin.REPLICATION:
                log.warning(message)
            else:
                raise InvalidProducerEpochError(message)

    def _check_sequence(self, producer_epoch: int, first_seq: int, offset: int) -> None:
        updated = self.updated_entry
        if producer_epoch != updated.producer_epoch:
            if first_seq != 0 and updated.producer_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceError(
                    f"Invalid sequence number for new epoch of producer {self.producer_id} at offset "
                    f"{offset} in {self._partition}: {producer_epoch} (request epoch), {first_seq} (seq. "
                    f"number), {updated.producer_epoch} (current producer epoch)")
            return
        if not updated.is_empty:
            current_last_seq = updated.last_seq
        elif producer_epoch == self._current.producer_epoch:
            current_last_seq = self._current.last_seq
        else:
            current_last_seq = NO_SEQUENCE
        # Without a known epoch (all of the producer's data was deleted) any sequence is accepted.
        in_sequence = first_seq == current_last_seq + 1 or (first_seq == 0 and current_last_seq == MAX_INT32)
        if not (self._current.producer_epoch == NO_PRODUCER_EPOCH or in_sequence):
            raise OutOfOrderSequenceError(
                f"Out of order sequence number for producer {self.producer_id} at offset {offset} in "
                f"{self._partition}: {first_seq} (incoming seq. number), {current_last_seq} (current end "
                f"sequence number)")

    def append(self, batch: RecordBatch, first_offset_metadata: LogOffsetMetadata | None = None
               ) -> CompletedTxn | None:
        """Account for one batch of this producer; returns the transaction a marker completes."""
        if batch.is_control:
            records = batch.decode_columns().to_records()
            if not records:
                return None  # an empty control batch: the cleaner removed the transaction
            record = records[0]
            marker = EndTransactionMarker.deserialize(record)
            return self.append_end_txn_marker(marker, batch.producer_epoch, batch.base_offset,
                                              record.timestamp)
        metadata = first_offset_metadata or LogOffsetMetadata(batch.base_offset)
        self.append_data_batch(batch.producer_epoch, batch.base_sequence, batch.last_sequence,
                               batch.max_timestamp, metadata, batch.last_offset, batch.is_transactional)
        return None

    def append_data_batch(self, epoch: int, first_seq: int, last_seq: int, last_timestamp: int,
                          first_offset_metadata: LogOffsetMetadata, last_offset: int,
                          is_transactional: bool) -> None:
        first_offset = first_offset_metadata.message_offset
        self._check_producer_epoch(epoch, first_offset)
        if self._origin is AppendOrigin.CLIENT:
            self._check_sequence(epoch, first_seq, first_offset)
        updated = self.updated_entry
        updated.add_batch(epoch, last_seq, last_offset, last_offset - first_offset, last_timestamp)
        if updated.current_txn_first_offset is not None and not is_transactional:
            raise InvalidTxnStateError(
                f"Expected transactional write from producer {self.producer_id} at offset {first_offset} "
                f"in {self._partition}")
        if updated.current_txn_first_offset is None and is_transactional:
            updated.current_txn_first_offset = first_offset
            self.started_transactions.append(TxnMetadata(self.producer_id, first_offset_metadata))

    def append_end_txn_marker(self, marker: EndTransactionMarker, producer_epoch: int, offset: int,
                              timestamp: int) -> CompletedTxn | None:
        self._check_producer_epoch(producer_epoch, offset)
        updated = self.updated_entry
        if updated.coordinator_epoch > marker.coordinator_epoch:
            message = (f"Invalid coordinator epoch for producerId {self.producer_id} at offset {offset} in "
                       f"{self._partition}: {marker.coordinator_epoch} (zombie), {updated.coordinator_epoch} "
                       f"(current)")
            if self._origin is AppendOrigin.REPLICATION:
                log.info(message)
            else:
                raise TransactionCoordinatorFencedError(message)
        # A marker without data in the transaction changes nothing a reader could see.
        completed = None
        if updated.current_txn_first_offset is not None:
            completed = CompletedTxn(self.producer_id, updated.current_txn_first_offset, offset,
                                     marker.control_type is ControlRecordType.ABORT)
        updated.end_transaction(producer_epoch, marker.coordinator_epoch, timestamp)
        return completed


class ProducerStateManager:
    """Producer entries, open transactions and the snapshots of one partition directory."""

    def __init__(self, log_dir: Path | str, *, time: Time, read_only: bool = False,
                 config: ProducerStateManagerConfig | None = None,
                 fs: FileSystem | None = None) -> None:
        self._dir = Path(log_dir)
        if fs is not None and not read_only and not isinstance(fs, LocalFileSystem):
            raise KafkaStorageError(
                f"Producer state of {fs.describe(self._dir)}: writes need a local directory")
        # Readers list and read snapshots through a filesystem; the writer uses the local one directly.
        self._fs = fs if read_only else None
        self._time = time
        self._read_only = read_only
        self._config = config if config is not None else ProducerStateManagerConfig()
        self.producers: dict[int, ProducerStateEntry] = {}
        # first offset -> open transaction; the smallest key is the first unstable offset.
        self._ongoing: dict[int, TxnMetadata] = {}
        self._map_end_offset = 0
        self._last_snap_offset = 0
        self._snapshots: dict[int, Path] = self._list_snapshots()

    # --- queries ------------------------------------------------------------------------------

    @property
    def partition(self) -> str:
        return self._dir.name

    @property
    def producer_state_manager_config(self) -> ProducerStateManagerConfig:
        return self._config

    @property
    def map_end_offset(self) -> int:
        """The offset up to which the state reflects the log."""
        return self._map_end_offset

    def is_empty(self) -> bool:
        return not self.producers

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    def ongoing_transactions(self) -> list[TxnMetadata]:
        return [self._ongoing[k] for k in sorted(self._ongoing)]

    def first_unstable_offset(self) -> LogOffsetMetadata | None:
        """Where the oldest open transaction starts (single replica: nothing is unreplicated)."""
        if not self._ongoing:
            return None
        return self._ongoing[min(self._ongoing)].first_offset

    def first_undecided_offset(self) -> int | None:
        return min(self._ongoing) if self._ongoing else None

    def has_ongoing_transaction(self, producer_id: int) -> bool:
        entry = self.producers.get(producer_id)
        return entry is not None and entry.current_txn_first_offset is not None

    def is_producer_expired(self, current_time_ms: int, entry: ProducerStateEntry) -> bool:
        """Idle for ``producer.id.expiration.ms`` since its last batch (or marker), and no open
        transaction: a producer with one is never forgotten."""
        return (entry.current_txn_first_offset is None
                and current_time_ms - entry.last_timestamp >= self._config.producer_id_expiration_ms)

    # --- updates ------------------------------------------------------------------------------

    def prepare_update(self, producer_id: int, origin: AppendOrigin) -> ProducerAppendInfo:
        current = self.producers.get(producer_id) or ProducerStateEntry(producer_id)
        return ProducerAppendInfo(self.partition, producer_id, current, origin)

    def update(self, append_info: ProducerAppendInfo) -> None:
        if append_info.producer_id < 0:
            raise IllegalArgumentError(f"Invalid producer id {append_info.producer_id} for {self.partition}")
        current = self.producers.get(append_info.producer_id)
        if current is not None:
            current.update_from(append_info.updated_entry)
        else:
            self.producers[append_info.producer_id] = append_info.updated_entry
        for txn in append_info.started_transactions:
            self._ongoing[txn.first_offset.message_offset] = txn

    def remove_expired_producers(self, current_time_ms: int) -> int:
        """Forget every expired producer (Kafka's ``removeExpiredProducers``); returns how many.
        Its next batch then starts it afresh with any sequence (KIP-360)."""
        expired = [pid for pid, entry in self.producers.items()
                   if self.is_producer_expired(current_time_ms, entry)]
        for pid in expired:
            del self.producers[pid]
        return len(expired)

    def last_stable_offset(self, completed: CompletedTxn) -> int:
        """The LSO once ``completed`` ends: the start of the oldest other open transaction, else just
        past the marker (what Kafka records in the aborted-transaction entry)."""
        for first in sorted(self._ongoing):
            if self._ongoing[first].producer_id != completed.producer_id:
                return first
        return completed.last_offset + 1

    def complete_txn(self, completed: CompletedTxn) -> None:
        if self._ongoing.pop(completed.first_offset, None) is None:
            raise IllegalArgumentError(
                f"Attempted to complete transaction {completed} on partition {self.partition} which was "
                f"not started")

    def update_map_end_offset(self, offset: int) -> None:
        self._map_end_offset = offset

    def apply(self, batch: RecordBatch, origin: AppendOrigin = AppendOrigin.REPLICATION) -> AbortedTxn | None:
        """Replay one batch from the log (load, recovery, read-only followers): no checks, the map end
        offset advanced, and the aborted-transaction entry returned if the batch is an ABORT marker."""
        aborted = None
        if batch.magic >= MAGIC_V2 and batch.has_producer_id:
            info = self.prepare_update(batch.producer_id, origin)
            completed = info.append(batch)
            self.update(info)
            if completed is not None:
                if completed.is_aborted:
                    aborted = AbortedTxn(completed.producer_id, completed.first_offset, completed.last_offset,
                                         self.last_stable_offset(completed))
                self.complete_txn(completed)
        self._map_end_offset = batch.next_offset
        return aborted

    def apply_all(self, batches: Iterable[RecordBatch]) -> None:
        for batch in batches:
            self.apply(batch)

    # --- truncation ---------------------------------------------------------------------------

    def _clear(self) -> None:
        self.producers.clear()
        self._ongoing.clear()

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self._clear()
        for snapshot_offset in list(self._snapshots):
            self._remove_and_delete_snapshot(snapshot_offset)
        self._last_snap_offset = 0
        self._map_end_offset = offset

    def truncate_and_reload(self, log_start_offset: int, log_end_offset: int) -> None:
        """Forget snapshots outside (log start, log end] and, unless the state already ends at
        ``log_end_offset``, reload from the latest remaining snapshot."""
        for offset in list(self._snapshots):
            if offset > log_end_offset or offset <= log_start_offset:
                self._remove_and_delete_snapshot(offset)
        if log_end_offset != self._map_end_offset:
            self._clear()
            self._load_from_snapshot(log_start_offset)
        else:
            self.on_log_start_offset_incremented(log_start_offset)

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        if self._map_end_offset < log_start_offset:
            self._map_end_offset = log_start_offset
        self._last_snap_offset = self.latest_snapshot_offset() or log_start_offset

    # --- snapshots ----------------------------------------------------------------------------

    def _list_snapshots(self) -> dict[int, Path]:
        found: dict[int, Path] = {}
        if self._fs is not None:
            try:
                statuses = self._fs.list_dir(self._dir)
            except NoSuchFileError:
                statuses = []
            for status in statuses:
                if status.name.endswith(PRODUCER_SNAPSHOT_FILE_SUFFIX) and not status.is_dir:
                    try:
                        found[offset_from_file_name(status.name)] = self._dir / status.name
                    except ValueError:
                        continue
            return found
        try:
            paths = list(self._dir.iterdir()) if self._dir.is_dir() else []
        except OSError as e:
            raise KafkaStorageError(f"Cannot list producer snapshots in {self._dir}: {e}") from e
        for path in paths:
            if path.name.endswith(PRODUCER_SNAPSHOT_FILE_SUFFIX) and path.is_file():
                try:
                    found[offset_from_file_name(path.name)] = path
                except ValueError:
                    continue
        return found

    def _read_snapshot(self, path: Path) -> ProducerSnapshot:
        if self._fs is None:
            return ProducerSnapshot.read(path)
        data = self._fs.read_file(path)
        if data is None:
            raise KafkaStorageError(f"Producer snapshot {self._fs.describe(path)} no longer exists")
        return ProducerSnapshot.from_bytes(data, self._fs.describe(path))

    def snapshot_offsets(self) -> list[int]:
        return sorted(self._snapshots)

    def latest_snapshot_offset(self) -> int | None:
        return max(self._snapshots) if self._snapshots else None

    def _load_from_snapshot(self, log_start_offset: int, upper_bound: int | None = None) -> None:
        """Load the latest readable snapshot (at most ``upper_bound``); a corrupt one is dropped and
        the next older one tried. Without any, the state starts empty at the log start offset."""
        now = self._time.milliseconds()
        while True:
            candidates = [o for o in self._snapshots if upper_bound is None or o <= upper_bound]
            if not candidates:
                self._last_snap_offset = self._map_end_offset = log_start_offset
                return
            offset = max(candidates)
            path = self._snapshots[offset]
            try:
                snapshot = self._read_snapshot(path)
            except (CorruptSnapshotError, KafkaStorageError) as e:
                log.warning("Failed to load producer snapshot %s: %s", path, e)
                if self._read_only:
                    del self._snapshots[offset]  # forget it, leave the file alone
                else:
                    self._remove_and_delete_snapshot(offset)
                continue
            for entry in snapshot.entries:
                self._load_entry(entry, now)
            self._last_snap_offset = self._map_end_offset = offset
            return

    def _load_entry(self, entry: ProducerSnapshotEntry, now: int) -> None:
        txn_first = entry.current_txn_first_offset if entry.current_txn_first_offset >= 0 else None
        state = ProducerStateEntry(entry.producer_id, entry.producer_epoch, entry.coordinator_epoch,
                                   entry.timestamp, txn_first)
        if self.is_producer_expired(now, state):
            return
        if entry.last_offset >= 0:
            state.batch_metadata.append(BatchMetadata(entry.last_sequence, entry.last_offset,
                                                      entry.offset_delta, entry.timestamp))
        self.producers[entry.producer_id] = state
        if txn_first is not None:
            self._ongoing[txn_first] = TxnMetadata(entry.producer_id, LogOffsetMetadata(txn_first))

    def load_read_only(self, log_start_offset: int, log_end_offset: int) -> None:
        """For a reader in another process: load the latest snapshot within the log, touching no file."""
        self._clear()
        self._load_from_snapshot(log_start_offset, upper_bound=log_end_offset)
        if self._map_end_offset < log_start_offset:
            self._clear()
            self._map_end_offset = log_start_offset

    def snapshot(self) -> ProducerSnapshot:
        entries = []
        for pid in sorted(self.producers):
            e = self.producers[pid]
            txn_first = -1 if e.current_txn_first_offset is None else e.current_txn_first_offset
            entries.append(ProducerSnapshotEntry(
                pid, e.producer_epoch, e.last_seq, e.last_data_offset, e.last_offset_delta, e.last_timestamp,
                e.coordinator_epoch, txn_first))
        return ProducerSnapshot(tuple(entries))

    def take_snapshot(self, sync: bool = True) -> Path | None:
        """Write ``<map end offset>.snapshot`` unless the state has not moved since the last one."""
        if self._read_only or self._map_end_offset <= self._last_snap_offset:
            return None
        path = producer_snapshot_file(self._dir, self._map_end_offset)
        self.snapshot().write(path, sync=sync)
        self._snapshots[self._map_end_offset] = path
        self._last_snap_offset = self._map_end_offset
        return path

    def _remove_and_delete_snapshot(self, offset: int) -> None:
        path = self._snapshots.pop(offset, None)
        if path is None or self._read_only:
            return
        try:
            path.unlink(missing_ok=True)
        except OSError as e:
            raise KafkaStorageError(f"Cannot delete producer snapshot {path}: {e}") from e

    def delete_snapshot(self, offset: int) -> None:
        """Delete the snapshot taken at ``offset`` (its segment is being deleted), if there is one."""
        self._remove_and_delete_snapshot(offset)

    def delete_snapshots_before(self, offset: int) -> None:
        for snapshot_offset in [o for o in self._snapshots if o < offset]:
            self._remove_and_delete_snapshot(snapshot_offset)

    def remove_stray_snapshots(self, segment_base_offsets: Iterable[int]) -> None:
        """Keep snapshots at segment bases, plus the latest other one if it is past the last base."""
        bases = set(segment_base_offsets)
        self._snapshots = self._list_snapshots()
        stray = [o for o in sorted(self._snapshots) if o not in bases]
        for offset in stray[:-1]:
            self._remove_and_delete_snapshot(offset)
        if stray and bases and stray[-1] < max(bases):
            self._remove_and_delete_snapshot(stray[-1])

    def __repr__(self) -> str:
        return (f"ProducerStateManager({self.partition}, producers={len(self.producers)}, "
                f"ongoing={sorted(self._ongoing)}, map_end_offset={self._map_end_offset})")


def rebuild_producer_state(state: ProducerStateManager, segments: LogSegments, log_start_offset: int,
                           last_offset: int) -> None:
    """Bring ``state`` to ``last_offset``: reload the latest snapshot at or below it, then replay the
    log from the snapshot's offset (Kafka's ``UnifiedLog.rebuildProducerState``).

    Unlike Kafka, a clean shutdown without any snapshot does not skip the replay: kafkalog opens
    directories written by tools that never write snapshots, and their open transactions must count.
    """
    offsets_to_snapshot: list[int] = []
    last_segment = segments.last_segment
    if last_segment is not None:
        lower = segments.lower_segment(last_segment.base_offset)
        if lower is not None:
            offsets_to_snapshot.append(lower.base_offset)
        offsets_to_snapshot.append(last_segment.base_offset)
    state.truncate_and_reload(log_start_offset, last_offset)
    if last_offset > state.map_end_offset:
        floor_of_last = segments.floor_segment(last_offset)
        for segment in segments.values(state.map_end_offset, last_offset):
            start = max(segment.base_offset, state.map_end_offset, log_start_offset)
            state.update_map_end_offset(start)
            if segment.base_offset in offsets_to_snapshot:
                state.take_snapshot()
            max_position = segment.size_in_bytes
            if segment is floor_of_last:
                found = segment.translate_offset(last_offset)
                if found is not None:
                    max_position = found.position
            found_start = segment.translate_offset(start)
            if found_start is None or found_start.position >= max_position:
                continue
            for batch in segment.log.batches(found_start.position, max_position):
                state.apply(batch)
    state.update_map_end_offset(last_offset)
    state.take_snapshot()
