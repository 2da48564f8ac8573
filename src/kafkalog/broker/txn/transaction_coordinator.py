"""``TransactionCoordinator``: transactional producers (KIP-98), as Kafka's coordinator runs them
with transaction version 1 (the epoch changes only at InitProducerId and when a producer is fenced).

    InitProducerId(transactional id)  → producer id and a new epoch; fences the previous producer of
                                        that id, aborting its open transaction first
    AddPartitionsToTxn / AddOffsetsToTxn → the transaction is Ongoing and spans these partitions
    Produce (transactional batches), TxnOffsetCommit (to the group coordinator)
    EndTxn(commit | abort)            → PrepareCommit/PrepareAbort written, markers appended to every
                                        partition, CompleteCommit/CompleteAbort written

Every check and error code is Kafka's (``TransactionCoordinator.scala``); a transaction left Ongoing
past its timeout is aborted with a bumped epoch, which fences its producer. Everything runs on the
broker's event loop and no append yields, so the steps of one request never interleave with
another's and a client never observes the Prepare* states: EndTxn returns once the markers are
written (Kafka answers after PrepareCommit and writes the markers in the background). If a marker
cannot be written, the transaction stays in its Prepare* state and the periodic task retries, as
Kafka's marker channel does; at startup, transactions found in a Prepare* state are completed.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from kafkalog.broker.error_codes import error_code_for
from kafkalog.broker.producer_id_manager import ProducerIdManager
from kafkalog.broker.txn.transaction_marker_writer import TransactionMarkerWriter
from kafkalog.broker.txn.transaction_metadata import (
    TransactionMetadata,
    TxnTransitMetadata,
    is_epoch_exhausted,
)
from kafkalog.broker.txn.transaction_state import TransactionState
from kafkalog.broker.txn.transaction_state_manager import TransactionStateManager
from kafkalog.clock import Time
from kafkalog.errors import KafkaLogError
from kafkalog.records.types import NO_PRODUCER_EPOCH, NO_PRODUCER_ID

__all__ = ["InitProducerIdResult", "TransactionCoordinator"]

log = logging.getLogger(__name__)

_E = ErrorCode
_S = TransactionState
NONE = int(_E.none)
_PREPARING = (_S.PREPARE_COMMIT, _S.PREPARE_ABORT)  # written; the markers not yet


@dataclass(frozen=True, slots=True)
class InitProducerIdResult:
    error: int
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


class TransactionCoordinator:
    def __init__(
        self,
        state_manager: TransactionStateManager,
        marker_writer: TransactionMarkerWriter,
        producer_id_manager: ProducerIdManager,
        time: Time,
    ) -> None:
        self.state_manager = state_manager
        self.marker_writer = marker_writer
        self._producer_ids = producer_id_manager
        self._time = time

    def startup(self) -> None:
        """Load ``__transaction_state`` and finish what a crash interrupted between EndTxn's steps."""
        self.state_manager.load()
        self.complete_pending_transactions()

    # --- InitProducerId ------------------------------------------------------------------------------

    def handle_init_producer_id(
        self, transactional_id: str, timeout_ms: int, expected: tuple[int, int] | None
    ) -> InitProducerIdResult:
        """``expected``: the (producer id, epoch) a v3+ client recovering from an error still holds."""
        if not transactional_id:
            return InitProducerIdResult(int(_E.invalid_request))
        if not self.state_manager.validate_transaction_timeout(timeout_ms):
            return InitProducerIdResult(int(_E.invalid_transaction_timeout))
        manager = self.state_manager
        metadata = manager.get(transactional_id)
        if metadata is None:
            metadata = manager.put_if_absent(
                TransactionMetadata(
                    transactional_id,
                    self._producer_ids.generate_producer_id(),
                    txn_timeout_ms=timeout_ms,
                    txn_last_update_timestamp=self._time.milliseconds(),
                )
            )
        if expected is not None and not _is_valid_producer_id(metadata, *expected):
            return InitProducerIdResult(int(_E.producer_fenced))
        state = metadata.state
        if state in _PREPARING:
            return InitProducerIdResult(int(_E.concurrent_transactions))
        if state is _S.ONGOING:
            # Abort the open transaction with a bumped epoch (never returned), then let the client
            # retry: that retry bumps the epoch again, or rotates the producer id if it is exhausted.
            error = self._fence_and_abort(metadata)
            return InitProducerIdResult(error if error != NONE else int(_E.concurrent_transactions))
        now = self._time.milliseconds()
        transit: TxnTransitMetadata | None
        if metadata.is_producer_epoch_exhausted and (
            expected is None or expected[1] == metadata.producer_epoch
        ):
            transit = metadata.prepare_producer_id_rotation(
                self._producer_ids.generate_producer_id(), timeout_ms, now, expected is not None
            )
        else:
            transit = metadata.prepare_increment_producer_epoch(
                timeout_ms, None if expected is None else expected[1], now
            )
            if transit is None:
                return InitProducerIdResult(int(_E.producer_fenced))
        error = self._append(metadata, transit)
        if error != NONE:
            return InitProducerIdResult(error)
        log.info(
            "Initialized transactional id %s with producer id %d and epoch %d",
            transactional_id,
            metadata.producer_id,
            metadata.producer_epoch,
        )
        return InitProducerIdResult(NONE, metadata.producer_id, metadata.producer_epoch)

    # --- AddPartitionsToTxn / AddOffsetsToTxn --------------------------------------------------------

    def handle_add_partitions_to_transaction(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: set[tuple[str, int]]
    ) -> int:
        if not transactional_id:
            return int(_E.invalid_request)
        error, metadata = self._producer_of(transactional_id, producer_id, producer_epoch)
        if metadata is None:
            return error
        if metadata.state in _PREPARING:
            return int(_E.concurrent_transactions)
        if metadata.state is _S.ONGOING and partitions <= metadata.partitions:
            return NONE
        return self._append(metadata, metadata.prepare_add_partitions(partitions, self._time.milliseconds()))

    def verify_partition(
        self, transactional_id: str | None, producer_id: int, producer_epoch: int, partition: tuple[str, int]
    ) -> int:
        """Whether a transactional Produce to ``partition`` belongs to an Ongoing transaction that added
        it (Kafka's ``handleVerifyPartitionsInTransaction``, KIP-890: a late or stray write would
        otherwise hang the partition's last stable offset until the transaction times out)."""
        error, metadata = self._producer_of(transactional_id or "", producer_id, producer_epoch)
        if metadata is None:
            # what the broker's verification hands the producer (Kafka's AddPartitionsToTxnManager):
            # clients take INVALID_PRODUCER_EPOCH on a write as fenced, PRODUCER_FENCED as abortable
            return int(_E.invalid_producer_epoch) if error == _E.producer_fenced else error
        if metadata.state in _PREPARING:
            return int(_E.concurrent_transactions)
        if metadata.state is not _S.ONGOING or partition not in metadata.partitions:
            return int(_E.invalid_txn_state)
        return NONE

    def _producer_of(
        self, transactional_id: str, producer_id: int, producer_epoch: int
    ) -> tuple[int, TransactionMetadata | None]:
        """The id's metadata when the request's producer id and epoch are its current ones; else
        (INVALID_PRODUCER_ID_MAPPING or PRODUCER_FENCED, None)."""
        metadata = self.state_manager.get(transactional_id) if transactional_id else None
        if metadata is None or metadata.producer_id != producer_id:
            return int(_E.invalid_producer_id_mapping), None
        if metadata.producer_epoch != producer_epoch:
            return int(_E.producer_fenced), None
        return NONE, metadata

    # --- EndTxn --------------------------------------------------------------------------------------

    def handle_end_transaction(
        self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool
    ) -> int:
        if not transactional_id:
            return int(_E.invalid_request)
        error, metadata = self._producer_of(transactional_id, producer_id, producer_epoch)
        if metadata is None:
            return error
        state = metadata.state
        if state is _S.ONGOING:
            prepare = _S.PREPARE_COMMIT if commit else _S.PREPARE_ABORT
            return self._end(metadata, metadata.prepare_abort_or_commit(prepare, self._time.milliseconds()))
        if state is _S.COMPLETE_COMMIT:
            return NONE if commit else int(_E.invalid_txn_state)
        if state is _S.COMPLETE_ABORT:
            return int(_E.invalid_txn_state) if commit else NONE
        if state is _S.PREPARE_COMMIT:
            return int(_E.concurrent_transactions) if commit else int(_E.invalid_txn_state)
        if state is _S.PREPARE_ABORT:
            return int(_E.invalid_txn_state) if commit else int(_E.concurrent_transactions)
        return int(_E.invalid_txn_state)  # Empty: nothing to end

    # --- timeouts, fencing and completion ------------------------------------------------------------

    def abort_timed_out_transactions(self) -> int:
        """Abort, with a bumped epoch, every Ongoing transaction older than its timeout (Kafka's
        ``abortTimedOutTransactions``, run every
        ``transaction.abort.timed.out.transaction.cleanup.interval.ms``)."""
        now = self._time.milliseconds()
        aborted = 0
        for metadata in self.state_manager.states():
            expired = (
                metadata.state is _S.ONGOING and metadata.txn_start_timestamp + metadata.txn_timeout_ms < now
            )
            if expired and self._fence_and_abort(metadata) == NONE:
                aborted += 1
                log.info(
                    "Aborted the transaction of %s (producer id %d): it passed its timeout of %d ms",
                    metadata.transactional_id,
                    metadata.producer_id,
                    metadata.txn_timeout_ms,
                )
        return aborted

    def _fence_and_abort(self, metadata: TransactionMetadata) -> int:
        fenced_epoch = metadata.producer_epoch + 1
        return self._end(
            metadata,
            metadata.prepare_abort_or_commit(
                _S.PREPARE_ABORT, self._time.milliseconds(), fenced_epoch=fenced_epoch
            ),
        )

    def _end(self, metadata: TransactionMetadata, prepare: TxnTransitMetadata) -> int:
        """Write PrepareCommit / PrepareAbort, then the markers and the Complete state."""
        error = self._append(metadata, prepare)
        if error == NONE:
            self._complete(metadata)
        return error

    def complete_pending_transactions(self) -> None:
        """Write the markers of every transaction left in PrepareCommit / PrepareAbort."""
        for metadata in self.state_manager.states():
            if metadata.state in _PREPARING:
                self._complete(metadata)

    def _complete(self, metadata: TransactionMetadata) -> None:
        commit = metadata.state is _S.PREPARE_COMMIT
        try:
            self.marker_writer.write_markers(
                metadata.producer_id, metadata.producer_epoch, commit, metadata.partitions
            )
        except KafkaLogError as e:
            log.warning(
                "Writing the %s markers of %s failed (retried later): %s",
                "COMMIT" if commit else "ABORT",
                metadata.transactional_id,
                e,
            )
            return
        self._append(metadata, metadata.prepare_complete(self._time.milliseconds()))

    def _append(self, metadata: TransactionMetadata, transit: TxnTransitMetadata) -> int:
        try:
            self.state_manager.append_transition(metadata, transit)
        except KafkaLogError as e:
            log.warning("Writing the state of transactional id %s failed: %s", metadata.transactional_id, e)
            code = error_code_for(e)
            # Kafka's appendTransactionToLog turns storage failures into retriable coordinator errors
            if code in (_E.message_too_large, _E.record_list_too_large):
                return int(_E.unknown_server_error)
            if code in (_E.kafka_storage_error, _E.not_leader_or_follower):
                return int(_E.not_coordinator)
            return int(_E.coordinator_not_available)
        return NONE


def _is_valid_producer_id(metadata: TransactionMetadata, producer_id: int, producer_epoch: int) -> bool:
    """KIP-360: a producer recovering with (id, epoch) may go on when the metadata was just created,
    when it names the current id (its epoch is checked next), or when it names the previous id with
    an exhausted epoch (a retry after the id was rotated)."""
    return (
        metadata.producer_epoch == NO_PRODUCER_EPOCH
        or producer_id == metadata.producer_id
        or (producer_id == metadata.previous_producer_id and is_epoch_exhausted(producer_epoch))
    )
