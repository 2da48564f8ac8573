"""The transaction coordinator in process, over a real data directory and a controlled clock: epoch
exhaustion and producer id rotation, the timeout by the clock, transactional id expiry, and the state
machine's refusal of an illegal transition."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kio.schema.errors import ErrorCode as E

from kafkalog.broker.producer_id_manager import ProducerIdManager
from kafkalog.broker.txn.transaction_coordinator import TransactionCoordinator
from kafkalog.broker.txn.transaction_marker_writer import TransactionMarkerWriter
from kafkalog.broker.txn.transaction_metadata import IllegalTransitionError
from kafkalog.broker.txn.transaction_state import TransactionState
from kafkalog.broker.txn.transaction_state_manager import TransactionStateManager
from kafkalog.clock import MockTime
from kafkalog.storage.log import FetchIsolation
from kafkalog.storage.log_manager import LogManager

TIMEOUT_MS = 60_000
DAY_MS = 24 * 3600 * 1000


@pytest.fixture
def clock() -> MockTime:
    return MockTime()


@pytest.fixture
def log_manager(tmp_path, clock) -> Iterator[LogManager]:
    with LogManager(tmp_path / "data", time=clock) as manager:
        manager.create_topic("t", 1)
        yield manager


@pytest.fixture
def coordinator(tmp_path, clock, log_manager) -> TransactionCoordinator:
    manager = TransactionStateManager(
        log_manager,
        num_partitions=1,
        segment_bytes=1 << 20,
        max_timeout_ms=900_000,
        id_expiration_ms=7 * DAY_MS,
        time=clock,
    )
    return TransactionCoordinator(
        manager, TransactionMarkerWriter(log_manager), ProducerIdManager(tmp_path / "data"), clock
    )


def begin(coordinator: TransactionCoordinator, txn_id: str) -> tuple[int, int]:
    result = coordinator.handle_init_producer_id(txn_id, TIMEOUT_MS, None)
    assert result.error == E.none
    pid, epoch = result.producer_id, result.producer_epoch
    assert coordinator.handle_add_partitions_to_transaction(txn_id, pid, epoch, {("t", 0)}) == E.none
    return pid, epoch


def test_an_exhausted_epoch_rotates_the_producer_id(coordinator):
    pid, _ = begin(coordinator, "tx")
    metadata = coordinator.state_manager.get("tx")
    assert metadata is not None
    metadata.producer_epoch = 32766  # the last epoch a client may get
    # a new producer fences the open transaction with 32767, the one epoch no client ever holds ...
    assert coordinator.handle_init_producer_id("tx", TIMEOUT_MS, None).error == E.concurrent_transactions
    assert (metadata.state, metadata.producer_epoch) == (TransactionState.COMPLETE_ABORT, 32767)
    # ... and its retry gets a new producer id at epoch 0
    again = coordinator.handle_init_producer_id("tx", TIMEOUT_MS, None)
    assert again.error == E.none and again.producer_id != pid and again.producer_epoch == 0


def test_the_timeout_follows_the_clock(coordinator, clock):
    pid, epoch = begin(coordinator, "tx")
    clock.sleep(TIMEOUT_MS)
    assert coordinator.abort_timed_out_transactions() == 0  # not past it yet
    clock.sleep(1)
    assert coordinator.abort_timed_out_transactions() == 1
    metadata = coordinator.state_manager.get("tx")
    assert metadata is not None
    assert (metadata.state, metadata.producer_epoch) == (TransactionState.COMPLETE_ABORT, epoch + 1)
    assert coordinator.handle_end_transaction("tx", pid, epoch, True) == E.producer_fenced


def test_idle_transactional_ids_expire(coordinator, clock):
    begin(coordinator, "busy")
    coordinator.handle_init_producer_id("idle", TIMEOUT_MS, None)
    clock.sleep(7 * DAY_MS - 1)
    assert coordinator.state_manager.remove_expired_transactional_ids() == 0
    clock.sleep(1)
    # an Ongoing transaction never expires this way (its timeout aborts it first)
    assert coordinator.state_manager.remove_expired_transactional_ids() == 1
    assert coordinator.state_manager.get("idle") is None
    assert coordinator.state_manager.get("busy") is not None
    coordinator.state_manager.load()  # the tombstone holds on a reload
    assert coordinator.state_manager.get("idle") is None


def test_an_illegal_transition_is_refused_before_anything_is_written(coordinator):
    begin(coordinator, "tx")
    metadata = coordinator.state_manager.get("tx")
    assert metadata is not None
    with pytest.raises(IllegalTransitionError):
        metadata.prepare_complete(0)  # Ongoing -> CompleteAbort skips PrepareAbort


def test_markers_reach_the_partitions_with_the_producer_epoch(coordinator, log_manager):
    pid, epoch = begin(coordinator, "tx")
    assert coordinator.handle_end_transaction("tx", pid, epoch, False) == E.none
    log = log_manager.get_log("t", 0)
    (marker,) = list(log.batches(0))
    assert (marker.is_control, marker.producer_id, marker.producer_epoch) == (True, pid, epoch)
    assert log.last_stable_offset == log.log_end_offset == 1
    assert list(log.records(0, isolation=FetchIsolation.TXN_COMMITTED)) == []


def test_a_producer_recovers_with_its_old_epoch_after_a_commit(coordinator):
    """KIP-360: InitProducerId naming the producer's previous epoch is a retry of a call that
    succeeded (the current epoch, no bump), also after a transaction committed in between -- the
    last epoch changes only with InitProducerId (and epoch fences), as in Kafka's
    completeTransitionTo; a commit used to overwrite it, and the retry was fenced."""
    first = coordinator.handle_init_producer_id("kip360", TIMEOUT_MS, None)
    pid = first.producer_id
    for epoch in (0, 1):  # bumps with the current epoch: 0 -> 1 -> 2, the last epoch 1
        bumped = coordinator.handle_init_producer_id("kip360", TIMEOUT_MS, (pid, epoch))
        assert (bumped.error, bumped.producer_id, bumped.producer_epoch) == (E.none, pid, epoch + 1)
    assert coordinator.handle_add_partitions_to_transaction("kip360", pid, 2, {("t", 0)}) == E.none
    assert coordinator.handle_end_transaction("kip360", pid, 2, True) == E.none
    retry = coordinator.handle_init_producer_id("kip360", TIMEOUT_MS, (pid, 1))
    assert (retry.error, retry.producer_id, retry.producer_epoch) == (E.none, pid, 2)
    assert coordinator.handle_init_producer_id("kip360", TIMEOUT_MS, (pid, 0)).error == E.producer_fenced
