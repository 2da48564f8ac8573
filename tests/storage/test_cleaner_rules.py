"""Kafka's cleaning rules for tombstones (KIP-534 delete horizon), transactions (aborted data removed,
markers kept while needed) and producer state, checked with a controlled clock. Scenarios follow
Apache Kafka's LogCleanerTest (testAbortMarkerRemoval, testCommitMarkerRemoval,
testEmptyBatchRemovalWithSequences, tombstone retention) in our own words."""

from __future__ import annotations

from pathlib import Path

from kafkalog.clock import MockTime
from kafkalog.records import CompressionType, MemoryRecords, SimpleRecord
from kafkalog.records.control import EndTransactionMarker
from kafkalog.records.types import ControlRecordType
from kafkalog.records.validator import AppendOrigin
from kafkalog.storage.cleaner.cleaner import Cleaner
from kafkalog.storage.cleaner.log_to_clean import LogToClean
from kafkalog.storage.cleaner.offset_map import OffsetMap
from kafkalog.storage.log import FetchIsolation, Log
from tests.storage._cleaning import all_records, append, clean, compacted_log

RETENTION = 1000
LOG_END = FetchIsolation.LOG_END


def batch_offsets(log: Log) -> list[int]:
    """Offsets of every record, control records included (Kafka's offsetsInLog)."""
    return [o for b in log.batches(0, isolation=LOG_END) for o in b.decode_columns().offsets]


def keys_in_log(log: Log) -> list[bytes | None]:
    return [r.key for b in log.batches(0, isolation=LOG_END) if not b.is_control for r in b.records()]


class TxnProducer:
    def __init__(self, log: Log, pid: int, epoch: int = 0) -> None:
        self.log, self.pid, self.epoch, self.seq = log, pid, epoch, 0

    def send(self, *keys: int, transactional: bool = True) -> None:
        now = self.log.time.milliseconds()
        records = [SimpleRecord(str(k).encode(), str(k).encode(), now) for k in keys]
        self.log.append_as_leader(MemoryRecords.with_records(
            2, CompressionType.NONE, records, producer_id=self.pid, producer_epoch=self.epoch,
            base_sequence=self.seq, is_transactional=transactional))
        self.seq += len(keys)

    def end(self, kind: ControlRecordType) -> None:
        self.log.append_as_leader(MemoryRecords.with_end_transaction_marker(
            0, self.log.time.milliseconds(), 0, self.pid, self.epoch, EndTransactionMarker(kind, 0)),
            origin=AppendOrigin.COORDINATOR)


def clean_all(log: Log, now: int) -> None:
    """One cleaning of the whole log up to the active segment, at time ``now`` (Kafka's tests call
    doClean on LogToClean(0, active base) like this)."""
    cleaner = Cleaner(OffsetMap(24 * 1000), time=log.time)
    cleaner.do_clean(LogToClean(log.topic, log.partition, log, 0, log.active_segment.base_offset), now)


def test_tombstones_stay_until_their_delete_horizon_then_go(tmp_path: Path) -> None:
    time = MockTime()
    t0 = time.milliseconds()
    log = compacted_log(tmp_path, time=time, delete_retention_ms=RETENTION)
    append(log, [(b"a", b"1"), (b"b", b"1")])
    append(log, [(b"a", None)])
    log.roll()
    clean(log)
    assert [(r.offset, r.key, r.value) for r in all_records(log)] == [(1, b"b", b"1"), (2, b"a", None)]
    tombstone_batch = next(iter(log.batches(2, isolation=LOG_END)))
    # KIP-534: the batch now carries the delete horizon as its base timestamp, flagged in its
    # attributes; the record keeps its own timestamp.
    assert tombstone_batch.has_delete_horizon
    assert tombstone_batch.base_timestamp == tombstone_batch.delete_horizon_ms == t0 + RETENTION
    assert next(tombstone_batch.records()).timestamp == t0
    # The batch of b (no tombstone) was rebuilt without a horizon (a was removed from it).
    assert not next(iter(log.batches(1, isolation=LOG_END))).has_delete_horizon

    time.sleep(RETENTION // 2)
    append(log, [(b"c", b"1")])
    log.roll()
    clean(log)
    assert (2, b"a", None) in [(r.offset, r.key, r.value) for r in all_records(log)]
    assert next(iter(log.batches(2, isolation=LOG_END))).delete_horizon_ms == t0 + RETENTION  # not moved

    time.sleep(RETENTION)
    append(log, [(b"d", b"1")])
    log.roll()
    _, stats = clean(log)
    assert [(r.offset, r.key) for r in all_records(log)] == [(1, b"b"), (3, b"c"), (4, b"d")]
    assert stats.tombstones_removed == 1
    log.close()


def test_abort_marker_removal(tmp_path: Path) -> None:
    time = MockTime()
    log = compacted_log(tmp_path, time=time, delete_retention_ms=RETENTION)
    producer = TxnProducer(log, 1)
    producer.send(1)                          # 0
    producer.send(2, 3)                       # 1-2
    producer.end(ControlRecordType.ABORT)     # 3
    producer.send(3)                          # 4
    producer.end(ControlRecordType.COMMIT)    # 5
    log.roll()
    now = time.milliseconds()
    # Aborted records go; the abort marker stays while batches of its transaction were seen.
    clean_all(log, now)
    assert keys_in_log(log) == [b"3"]
    assert batch_offsets(log) == [3, 4, 5]
    aborted = [(t.producer_id, t.first_offset) for s in log.segments for t in s.txn_index.all_aborted_txns()]
    assert aborted == [(1, 0)]
    # Next pass: no aborted batch is left, so the marker gets a delete horizon ...
    clean_all(log, now)
    assert batch_offsets(log) == [3, 4, 5]
    marker = next(iter(log.batches(3, isolation=LOG_END)))
    assert marker.is_control and marker.delete_horizon_ms == now + RETENTION
    # ... and goes in the first pass after it.
    clean_all(log, now + RETENTION + 1)
    assert batch_offsets(log) == [4, 5]
    assert [r.value for r in log.records(0, isolation=FetchIsolation.TXN_COMMITTED)] == [b"3"]
    log.close()


def test_commit_marker_removal(tmp_path: Path) -> None:
    time = MockTime()
    log = compacted_log(tmp_path, time=time, delete_retention_ms=RETENTION)
    producer = TxnProducer(log, 1)
    producer.send(2)                          # 0
    producer.end(ControlRecordType.COMMIT)    # 1
    append(log, [(b"2", b"x")])               # 2: supersedes the transaction's only record
    append(log, [(b"3", b"x")])               # 3
    log.roll()
    now = time.milliseconds()
    # The committed record goes, but its batch is producer 1's last data batch: it stays, emptied,
    # and while a batch of the transaction is seen, so does the marker.
    for _ in range(2):
        clean_all(log, now)
        assert batch_offsets(log) == [1, 2, 3]
        assert next((b.base_offset, b.record_count) for b in log.batches(0, isolation=LOG_END)) == (0, 0)
    # Once the producer writes again the empty batch may go ...
    producer.send(7)                          # 4
    producer.end(ControlRecordType.COMMIT)    # 5
    log.roll()
    clean_all(log, now)
    assert [b.base_offset for b in log.batches(0, isolation=LOG_END)] == [1, 2, 3, 4, 5]
    assert not next(iter(log.batches(1, isolation=LOG_END))).has_delete_horizon
    # ... then the marker of the now empty transaction gets a delete horizon ...
    clean_all(log, now)
    marker = next(iter(log.batches(1, isolation=LOG_END)))
    assert marker.is_control and marker.delete_horizon_ms == now + RETENTION
    # ... and goes once it has passed.
    clean_all(log, now + RETENTION)
    assert [b.base_offset for b in log.batches(0, isolation=LOG_END)] == [2, 3, 4, 5]
    assert [r.key for r in log.records(0, isolation=FetchIsolation.TXN_COMMITTED)] == [b"2", b"3", b"7"]
    log.close()


def test_the_last_batch_of_a_producer_is_kept_empty(tmp_path: Path) -> None:
    time = MockTime()
    log = compacted_log(tmp_path, time=time)
    producer = TxnProducer(log, 5)
    producer.send(1, 2, transactional=False)  # 0-1
    producer.send(1, 2, transactional=False)  # 2-3: the producer's last batch
    append(log, [(b"1", b"new"), (b"2", b"new")])  # 4-5 supersede both
    log.roll()
    _, stats = clean(log)
    batches = list(log.batches(0, isolation=LOG_END))
    empty = batches[0]
    # Kafka's writeEmptyHeader: no records, the offset range, sequence and producer kept.
    assert (empty.base_offset, empty.last_offset, empty.record_count, empty.base_sequence,
            empty.producer_id, empty.size_in_bytes) == (2, 3, 0, 2, 5, 61)
    assert empty.base_timestamp == -1 and empty.is_valid()
    assert stats.empty_batches_kept == 1
    assert [r.offset for r in all_records(log)] == [4, 5]
    log.close()
    reopened = Log.open(tmp_path / "topic-0", log.config, had_clean_shutdown=False, time=time)
    entry = reopened.producer_state.last_entry(5)
    assert entry is not None and entry.last_seq == 3
    # The producer continues its sequence after the reload (a lost state would be a sequence error).
    again = TxnProducer(reopened, 5)
    again.seq = 4
    again.send(3, transactional=False)
    reopened.close()


def test_aborted_transactions_are_removed_and_committed_ones_kept(tmp_path: Path) -> None:
    time = MockTime()
    log = compacted_log(tmp_path, time=time)
    committed, aborted = TxnProducer(log, 1), TxnProducer(log, 2)
    committed.send(1, 2)
    aborted.send(3, 4)
    committed.end(ControlRecordType.COMMIT)
    aborted.end(ControlRecordType.ABORT)
    append(log, [(b"5", b"5")])
    log.roll()
    _, stats = clean(log)
    assert sorted(r.key for r in all_records(log)) == [b"1", b"2", b"5"]
    committed_keys = sorted(r.key for r in log.records(0, isolation=FetchIsolation.TXN_COMMITTED))
    assert committed_keys == [b"1", b"2", b"5"]
    assert stats.aborted_removed == 2
    log.close()


def test_keyless_records_are_refused_on_compacted_topics(tmp_path: Path) -> None:
    import pytest

    from kafkalog.errors import InvalidRecordError
    log = compacted_log(tmp_path)
    with pytest.raises(InvalidRecordError, match=r"(?i)key"):
        append(log, [(None, b"v")])
    log.close()


def test_the_last_batch_of_a_round_is_kept_empty(tmp_path: Path) -> None:
    """KAFKA-17076 (Kafka's testCleanSegmentsRetainingLastEmptyBatch): when every record of the
    round's last batch goes, its header stays, so the last cleaned offset is not lost; an emptied
    batch anywhere else goes."""
    time = MockTime()
    log = compacted_log(tmp_path, time=time, delete_retention_ms=RETENTION)
    append(log, [(b"a", b"1")])        # 0
    append(log, [(b"b", None)])        # 1: a tombstone, not last in the round
    append(log, [(b"a", None)])        # 2: the round's last batch, a tombstone
    log.roll()
    clean_all(log, time.milliseconds())  # gives both tombstones their delete horizon
    assert [(r.offset, r.value) for r in all_records(log)] == [(1, None), (2, None)]
    clean_all(log, time.milliseconds() + RETENTION)
    batches = list(log.batches(0, isolation=LOG_END))
    assert [(b.base_offset, b.last_offset, b.record_count) for b in batches] == [(2, 2, 0)]
    assert batches[0].is_valid() and batches[0].size_in_bytes == 61
    assert all_records(log) == []
    log.close()
