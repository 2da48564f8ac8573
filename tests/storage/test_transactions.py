"""Transactions and idempotent producers on a log: open transactions hold back the last stable
offset, ABORT markers index the aborted range in ``.txnindex``, read_committed readers skip aborted
records; retried batches are recognised, sequence and epoch errors rejected (Kafka's
ProducerStateManagerTest / UnifiedLogTest transaction cases, in our words)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from kafkalog.clock import MockTime
from kafkalog.errors import (
    IllegalArgumentError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from kafkalog.records import CompressionType, MemoryRecords, SimpleRecord
from kafkalog.records.control import EndTransactionMarker
from kafkalog.records.types import ControlRecordType
from kafkalog.records.validator import AppendOrigin
from kafkalog.storage.log import FetchIsolation, Log
from kafkalog.storage.log_manager import LogManager
from kafkalog.storage.producer_snapshot import ProducerSnapshot
from kafkalog.storage.producer_state import ProducerStateManagerConfig
from kafkalog.storage.txn_index import AbortedTxn
from tests.storage.conftest import T0, config

COMMITTED = FetchIsolation.TXN_COMMITTED
ABORT, COMMIT = ControlRecordType.ABORT, ControlRecordType.COMMIT


class Producer:
    """Builds a producer's batches with correct sequence numbers, like the Java client."""

    def __init__(self, pid: int, epoch: int = 0, transactional: bool = True) -> None:
        self.pid, self.epoch, self.transactional, self.seq = pid, epoch, transactional, 0

    def send(self, *values: bytes, seq: int | None = None) -> MemoryRecords:
        base = self.seq if seq is None else seq
        if seq is None:
            self.seq += len(values)
        return MemoryRecords.with_records(
            2, CompressionType.NONE, [SimpleRecord(v, b"k", T0) for v in values], producer_id=self.pid,
            producer_epoch=self.epoch, base_sequence=base, is_transactional=self.transactional)

    def marker(self, kind: ControlRecordType, coordinator_epoch: int = 0) -> MemoryRecords:
        return MemoryRecords.with_end_transaction_marker(0, T0, 0, self.pid, self.epoch,
                                                         EndTransactionMarker(kind, coordinator_epoch))


def plain(*values: bytes) -> MemoryRecords:
    return MemoryRecords.with_records(2, CompressionType.NONE, [SimpleRecord(v, None, T0) for v in values])


def end_txn(log: Log, producer: Producer, kind: ControlRecordType, coordinator_epoch: int = 0) -> int:
    return log.append_as_leader(producer.marker(kind, coordinator_epoch),
                                origin=AppendOrigin.COORDINATOR).first_offset


def committed(log: Log, start: int = 0) -> list[bytes | None]:
    return [r.value for r in log.records(start, isolation=COMMITTED)]


def txn_entries(log: Log) -> list[tuple[int, int, int, int]]:
    return [(t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset)
            for s in log.segments for t in s.txn_index.all_aborted_txns()]


# --- last stable offset and the transaction index ----------------------------------------------


def test_interleaved_transactions(tmp_path: Path) -> None:
    a, b = Producer(1), Producer(2)
    with Log.open(tmp_path / "t-0", config()) as log:
        log.append_as_leader(plain(b"p0"))               # 0
        log.append_as_leader(a.send(b"a1", b"a2"))       # 1-2
        assert (log.last_stable_offset, log.high_watermark) == (1, 3)
        log.append_as_leader(b.send(b"b1"))              # 3
        log.append_as_leader(plain(b"p1"))               # 4
        log.append_as_leader(a.send(b"a3"))              # 5
        assert log.last_stable_offset == 1
        assert committed(log) == [b"p0"]
        assert end_txn(log, a, ABORT) == 6               # 6: LSO then is b's first offset
        assert txn_entries(log) == [(1, 1, 6, 3)]
        assert log.last_stable_offset == 3
        assert committed(log) == [b"p0"]  # a's data is aborted, b's still open
        assert end_txn(log, b, COMMIT) == 7              # 7
        assert log.last_stable_offset == log.log_end_offset == 8
        assert txn_entries(log) == [(1, 1, 6, 3)]  # commits are not indexed
        assert committed(log) == [b"p0", b"b1", b"p1"]
        assert [r.value for r in log.records(0)] == [b"p0", b"a1", b"a2", b"b1", b"p1", b"a3"]
        assert log.collect_aborted_transactions(0, 8) == [AbortedTxn(1, 1, 6, 3)]
        assert log.collect_aborted_transactions(7, 8) == []
        # A new transaction of the same producer after its abort.
        log.append_as_leader(a.send(b"a4"))              # 8
        end_txn(log, a, ABORT)                           # 9: nothing else open, LSO = 10
        assert txn_entries(log)[-1] == (1, 8, 9, 10)
        assert committed(log) == [b"p0", b"b1", b"p1"]
        assert committed(log, 4) == [b"p1"] and committed(log, 5) == []


def test_read_committed_fetch_lists_the_aborted_transactions(tmp_path: Path) -> None:
    a = Producer(7)
    with Log.open(tmp_path / "t-0", config()) as log:
        log.append_as_leader(plain(b"x"))
        log.append_as_leader(a.send(b"a1"))
        end_txn(log, a, ABORT)
        log.append_as_leader(plain(b"y"))
        fetch = log.read(0, 100_000, isolation=COMMITTED)
        assert fetch.aborted_transactions == [AbortedTxn(7, 1, 2, 3)]
        assert [r.offset for r in fetch.records.records()] == [0, 1, 2, 3]  # raw batches, as Kafka sends
        assert log.read(0, 100_000).aborted_transactions is None
        # The LSO bounds a read_committed fetch at a batch boundary.
        log.append_as_leader(a.send(b"open"))            # 4
        log.append_as_leader(plain(b"z"))                # 5
        fetch = log.read(3, 100_000, isolation=COMMITTED)
        assert [r.offset for r in fetch.records.records()] == [3]
        assert log.read(4, 100_000, isolation=COMMITTED).records.size_in_bytes == 0


def test_transaction_spanning_segments(tmp_path: Path) -> None:
    a = Producer(3)
    size = plain(b"0123456789").size_in_bytes
    with Log.open(tmp_path / "t-0", config(segment_bytes=3 * size)) as log:
        log.append_as_leader(a.send(b"a1"))
        for i in range(6):
            log.append_as_leader(plain(b"%010d" % i))
        assert len(log.segments) >= 2
        marker_offset = end_txn(log, a, ABORT)
        # The entry is in the marker's segment; the data it hides is in the first one.
        active = log.active_segment
        assert active.txn_index.all_aborted_txns() == [AbortedTxn(3, 0, marker_offset, marker_offset + 1)]
        assert log.segments.first_segment.txn_index.all_aborted_txns() == []  # type: ignore[union-attr]
        assert committed(log) == [b"%010d" % i for i in range(6)]
        assert b"a1" not in committed(log) and b"a1" in [r.value for r in log.records(0)]


def test_markers_without_data_change_nothing(tmp_path: Path) -> None:
    a = Producer(4)
    with Log.open(tmp_path / "t-0", config()) as log:
        end_txn(log, a, ABORT)
        end_txn(log, a, COMMIT)
        assert txn_entries(log) == [] and log.last_stable_offset == 2
        assert list(log.records(0)) == []  # control records are hidden


def test_truncation_reopens_a_transaction(tmp_path: Path) -> None:
    a = Producer(5)
    with Log.open(tmp_path / "t-0", config()) as log:
        log.append_as_leader(plain(b"p"))
        log.append_as_leader(a.send(b"a1"))
        end_txn(log, a, ABORT)
        assert log.last_stable_offset == 3 and txn_entries(log) == [(5, 1, 2, 3)]
        log.truncate_to(2)  # the marker goes
        assert (log.log_end_offset, log.last_stable_offset) == (2, 1)
        assert txn_entries(log) == []
        log.append_as_leader(plain(b"q"))  # non-transactional data of others is fine
        end_txn(log, a, COMMIT)
        assert committed(log) == [b"p", b"a1", b"q"]


# --- restarts ---------------------------------------------------------------------------------------


def test_state_survives_restarts_through_snapshots_and_recovery(tmp_path: Path) -> None:
    a, b = Producer(11, epoch=2), Producer(12)
    directory = tmp_path / "t-0"
    time = MockTime(T0)
    with Log.open(directory, config(), time=time) as log:
        log.append_as_leader(a.send(b"a1"))
        end_txn(log, a, ABORT, coordinator_epoch=6)
        log.append_as_leader(b.send(b"b1"))  # left open
        log.append_as_leader(plain(b"p"))
        written_txn_index = (directory / "00000000000000000000.txnindex").read_bytes()
    snapshot = ProducerSnapshot.read(directory / "00000000000000000004.snapshot")
    assert [(e.producer_id, e.producer_epoch, e.last_sequence, e.last_offset, e.coordinator_epoch,
             e.current_txn_first_offset) for e in snapshot.entries] == [
        (11, 2, 0, 0, 6, -1), (12, 0, 0, 2, -1, 2)]
    with Log.open(directory, config(), time=time) as log:
        assert log.last_stable_offset == 2
        with pytest.raises(OutOfOrderSequenceError):  # the sequence state came back too
            log.append_as_leader(a.send(b"a2", seq=5))
    (directory / "00000000000000000000.txnindex").unlink()
    (directory / "00000000000000000000.index").unlink()
    for path in directory.glob("*.snapshot"):
        path.unlink()
    with Log.open(directory, config(), time=time, had_clean_shutdown=False) as log:
        assert log.last_stable_offset == 2
        assert committed(log) == []
        end_txn(log, b, COMMIT)
        assert committed(log) == [b"b1", b"p"]
    assert (directory / "00000000000000000000.txnindex").read_bytes() == written_txn_index
    assert struct.unpack(">hqqqq", written_txn_index) == (0, 11, 0, 1, 2)


def test_read_only_reader_sees_the_writers_transactions(tmp_path: Path) -> None:
    a = Producer(21)
    directory = tmp_path / "t-0"
    writer = Log.open(directory, config())
    try:
        writer.append_as_leader(plain(b"p0"))
        writer.append_as_leader(a.send(b"a1"))
        with Log.open(directory, config(), read_only=True) as reader:
            assert reader.last_stable_offset == 1
            assert committed(reader) == [b"p0"]
            end_txn(writer, a, ABORT)
            writer.append_as_leader(plain(b"p1"))
            writer.append_as_leader(a.send(b"a2"))
            assert (reader.log_end_offset, reader.last_stable_offset) == (5, 4)
            assert committed(reader) == [b"p0", b"p1"]
    finally:
        writer.close()


# --- idempotent producers ----------------------------------------------------------------------------


def test_retried_batch_is_not_written_twice(tmp_path: Path) -> None:
    p = Producer(30, transactional=False)
    with Log.open(tmp_path / "t-0", config()) as log:
        first = p.send(b"x", b"y")
        info = log.append_as_leader(first)
        log.append_as_leader(p.send(b"z"))
        retry = log.append_as_leader(first)
        assert (retry.first_offset, retry.last_offset) == (info.first_offset, info.last_offset) == (0, 1)
        assert log.log_end_offset == 3


def test_sequence_and_epoch_checks(tmp_path: Path) -> None:
    p = Producer(31, epoch=3, transactional=False)
    with Log.open(tmp_path / "t-0", config()) as log:
        log.append_as_leader(p.send(b"a"))
        with pytest.raises(OutOfOrderSequenceError):
            log.append_as_leader(p.send(b"gap", seq=5))
        old = Producer(31, epoch=2, transactional=False)
        with pytest.raises(InvalidProducerEpochError):
            log.append_as_leader(old.send(b"zombie"))
        bumped = Producer(31, epoch=4, transactional=False)
        with pytest.raises(OutOfOrderSequenceError):  # a new epoch starts at sequence 0
            log.append_as_leader(bumped.send(b"b", seq=1))
        log.append_as_leader(bumped.send(b"b"))
        assert log.log_end_offset == 2
        # Replication trusts the leader: the same out-of-order batch is accepted from a follower fetch.
        replica = MemoryRecords.with_records(2, CompressionType.NONE, [SimpleRecord(b"r", None, T0)], 2,
                                             producer_id=31, producer_epoch=4, base_sequence=9)
        log.append_as_follower(replica)
        assert log.log_end_offset == 3


def test_transactional_state_errors(tmp_path: Path) -> None:
    t = Producer(40)
    with Log.open(tmp_path / "t-0", config()) as log:
        log.append_as_leader(t.send(b"t1"))
        non_txn = MemoryRecords.with_records(2, CompressionType.NONE, [SimpleRecord(b"n", None, T0)],
                                             producer_id=40, producer_epoch=0, base_sequence=1)
        with pytest.raises(InvalidTxnStateError):
            log.append_as_leader(non_txn)
        end_txn(log, t, COMMIT, coordinator_epoch=5)
        log.append_as_leader(t.send(b"t2"))
        with pytest.raises(TransactionCoordinatorFencedError):
            end_txn(log, t, ABORT, coordinator_epoch=4)
        end_txn(log, t, ABORT, coordinator_epoch=5)
        assert committed(log) == [b"t1"]


# --- producer-id expiry --------------------------------------------------------------------------------


def test_idle_producers_expire_unless_a_transaction_is_open(tmp_path: Path) -> None:
    time = MockTime(T0)  # every batch and marker below is stamped T0
    idempotent, open_txn, done_txn = Producer(50, transactional=False), Producer(51), Producer(52)
    with Log.open(tmp_path / "t-0", config(), time=time,
                  producer_state_manager_config=ProducerStateManagerConfig(1000)) as log:
        log.append_as_leader(idempotent.send(b"i1", b"i2"))
        log.append_as_leader(open_txn.send(b"o1"))
        log.append_as_leader(done_txn.send(b"d1"))
        end_txn(log, done_txn, COMMIT)
        time.sleep(999)
        assert log.remove_expired_producers() == 0
        time.sleep(1)  # now - last timestamp == producer.id.expiration.ms: expired, as Kafka's >=
        assert log.remove_expired_producers() == 2
        assert sorted(log.producer_state.producers) == [51]
        assert log.last_stable_offset == 2  # the open transaction still holds it back
        # Forgotten, the producer starts afresh: any sequence is accepted (KIP-360), no duplicate check.
        log.append_as_leader(idempotent.send(b"i3", seq=7))
        assert log.producer_state.producers[50].last_seq == 7
        with pytest.raises(OutOfOrderSequenceError):  # and it is known again
            log.append_as_leader(idempotent.send(b"i4", seq=9))
        end_txn(log, open_txn, ABORT)
        time.sleep(1000)
        assert log.remove_expired_producers() == 2  # the aborted one too, once idle


def test_expiry_is_a_shared_config_a_change_reaches_every_partition(tmp_path: Path) -> None:
    time = MockTime(T0)
    with LogManager(tmp_path / "data", time=time) as manager:  # Kafka's default: a day
        shared = manager.producer_state_manager_config
        assert shared.producer_id_expiration_ms == 86_400_000
        logs = manager.create_topic("a", 2) + manager.create_topic("b", 1)
        for pid, log in enumerate(logs, start=60):
            log.append_as_leader(Producer(pid, transactional=False).send(b"x"))
        time.sleep(60_000)
        assert manager.remove_expired_producers() == 0
        shared.producer_id_expiration_ms = 30_000  # what a dynamic producer.id.expiration.ms does
        assert all(log.producer_state.producer_state_manager_config is shared for log in manager.logs())
        assert manager.remove_expired_producers() == 3
        assert all(log.producer_state.is_empty() for log in manager.logs())
        with pytest.raises(IllegalArgumentError):
            shared.producer_id_expiration_ms = -1


def test_expiry_at_snapshot_load_follows_the_configured_value(tmp_path: Path) -> None:
    time = MockTime(T0)
    with LogManager(tmp_path / "data", time=time) as manager:
        manager.create_topic("t")[0].append_as_leader(Producer(70, transactional=False).send(b"x"))
    time.sleep(5_000)
    with LogManager(tmp_path / "data", time=time, producer_id_expiration_ms=10_000) as manager:
        assert list(manager.get_log("t", 0).producer_state.producers) == [70]
    with LogManager(tmp_path / "data", time=time, producer_id_expiration_ms=5_000) as manager:
        assert manager.get_log("t", 0).producer_state.is_empty()  # dropped as the snapshot loads
