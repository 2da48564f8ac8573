"""One transactional id's state (Kafka's ``TransactionMetadata``) and the transitions the coordinator
prepares on it. A transition is a ``TxnTransitMetadata``: the whole next state, written to
``__transaction_state`` first and applied (``complete_transition``) only once that append succeeded,
so what a client was told is on disk.

The coordinator runs on the broker's event loop and its appends do not yield, so a transition never
overlaps another one and Kafka's "pending state" juggling is not needed here.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from kafkalog.broker.txn.transaction_state import VALID_PREVIOUS_STATES, TransactionState
from kafkalog.errors import KafkaLogError
from kafkalog.protocol.transaction_log_records import TransactionLogValue
from kafkalog.records.types import NO_PRODUCER_EPOCH, NO_PRODUCER_ID

__all__ = ["IllegalTransitionError", "TransactionMetadata", "TxnTransitMetadata", "is_epoch_exhausted"]

_SHORT_MAX = 32767


def is_epoch_exhausted(epoch: int) -> bool:
    """Clients never get epoch 32767, so the coordinator can always fence the last one."""
    return epoch >= _SHORT_MAX - 1


class IllegalTransitionError(KafkaLogError):
    """A transition the state machine does not allow: a coordinator bug, never a client's error."""


@dataclass(frozen=True, slots=True)
class TxnTransitMetadata:
    producer_id: int
    previous_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState
    partitions: frozenset[tuple[str, int]]
    txn_start_timestamp: int
    txn_last_update_timestamp: int

    def log_value(self) -> TransactionLogValue:
        return TransactionLogValue(
            self.producer_id,
            self.producer_epoch,
            self.txn_timeout_ms,
            self.state.id,
            tuple(sorted(self.partitions)),
            self.txn_last_update_timestamp,
            self.txn_start_timestamp,
            self.previous_producer_id,
        )


_TRANSIT_FIELDS = fields(TxnTransitMetadata)  # the whole state but the transactional id


@dataclass(slots=True)
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    previous_producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    txn_timeout_ms: int = 60_000
    state: TransactionState = TransactionState.EMPTY
    partitions: frozenset[tuple[str, int]] = frozenset()
    txn_start_timestamp: int = -1
    txn_last_update_timestamp: int = -1

    @classmethod
    def from_log_value(cls, transactional_id: str, value: TransactionLogValue) -> TransactionMetadata:
        return cls(
            transactional_id,
            value.producer_id,
            value.previous_producer_id,
            value.producer_epoch,
            NO_PRODUCER_EPOCH,
            value.transaction_timeout_ms,
            TransactionState.from_id(value.status),
            frozenset(value.partitions),
            value.start_timestamp,
            value.last_update_timestamp,
        )

    @property
    def is_producer_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    def _current(self) -> TxnTransitMetadata:
        return TxnTransitMetadata(**{f.name: getattr(self, f.name) for f in _TRANSIT_FIELDS})

    def _transit(self, state: TransactionState, **changes: object) -> TxnTransitMetadata:
        if self.state not in VALID_PREVIOUS_STATES[state]:
            raise IllegalTransitionError(
                f"Transactional id {self.transactional_id}: no transition from "
                f"{self.state.state_name} to {state.state_name}"
            )
        return replace(self._current(), state=state, previous_producer_id=self.producer_id, **changes)  # type: ignore[arg-type]

    # --- the transitions (Kafka's prepare* methods) ------------------------------------------------

    def prepare_increment_producer_epoch(
        self, timeout_ms: int, expected_epoch: int | None, now: int
    ) -> TxnTransitMetadata | None:
        """InitProducerId on Empty / Complete*: the next epoch, or None when ``expected_epoch`` (a
        producer recovering with its old id and epoch, KIP-360) is neither the current nor the last
        epoch: that producer is fenced."""
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            epoch, last = self.producer_epoch, self.last_producer_epoch  # a retry of a call that succeeded
        else:
            return None
        return self._transit(
            TransactionState.EMPTY,
            producer_epoch=epoch,
            last_producer_epoch=last,
            txn_timeout_ms=timeout_ms,
            partitions=frozenset(),
            txn_start_timestamp=-1,
            txn_last_update_timestamp=now,
        )

    def prepare_producer_id_rotation(
        self, new_producer_id: int, timeout_ms: int, now: int, record_last_epoch: bool
    ) -> TxnTransitMetadata:
        """InitProducerId when the epoch is exhausted: a new producer id at epoch 0."""
        return self._transit(
            TransactionState.EMPTY,
            producer_id=new_producer_id,
            producer_epoch=0,
            last_producer_epoch=self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
            txn_timeout_ms=timeout_ms,
            partitions=frozenset(),
            txn_start_timestamp=-1,
            txn_last_update_timestamp=now,
        )

    def prepare_add_partitions(self, added: set[tuple[str, int]], now: int) -> TxnTransitMetadata:
        starting = self.state in (
            TransactionState.EMPTY,
            TransactionState.COMPLETE_COMMIT,
            TransactionState.COMPLETE_ABORT,
        )
        return self._transit(
            TransactionState.ONGOING,
            partitions=frozenset(self.partitions | added),
            txn_start_timestamp=now if starting else self.txn_start_timestamp,
            txn_last_update_timestamp=now,
        )

    def prepare_abort_or_commit(
        self, state: TransactionState, now: int, *, fenced_epoch: int | None = None
    ) -> TxnTransitMetadata:
        """PrepareCommit / PrepareAbort. ``fenced_epoch``: the abort of an epoch fence, written with
        the bumped epoch (so the fenced producer's later requests fail) and no last epoch."""
        if fenced_epoch is None:
            return self._transit(state, txn_last_update_timestamp=now)
        return self._transit(
            state,
            producer_epoch=fenced_epoch,
            last_producer_epoch=NO_PRODUCER_EPOCH,
            txn_last_update_timestamp=now,
        )

    def prepare_complete(self, now: int) -> TxnTransitMetadata:
        state = (
            TransactionState.COMPLETE_COMMIT
            if self.state is TransactionState.PREPARE_COMMIT
            else TransactionState.COMPLETE_ABORT
        )
        return self._transit(state, partitions=frozenset(), txn_last_update_timestamp=now)

    def complete_transition(self, transit: TxnTransitMetadata) -> None:
        """Apply a transition once its record is written (Kafka's ``completeTransitionTo``). The
        previous producer id and the last epoch -- what a producer recovering with its old id and
        epoch is checked against (KIP-360) -- change only with InitProducerId (Empty) and, for the
        last epoch, an epoch fence: a transaction's commit or abort keeps them, as Kafka does."""
        moves_epoch = transit.state is TransactionState.EMPTY or transit.producer_epoch != self.producer_epoch
        for f in _TRANSIT_FIELDS:
            if f.name == "previous_producer_id" and transit.state is not TransactionState.EMPTY:
                continue
            if f.name == "last_producer_epoch" and not moves_epoch:
                continue
            setattr(self, f.name, getattr(transit, f.name))
