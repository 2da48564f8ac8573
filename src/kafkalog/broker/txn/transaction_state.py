"""A transactional id's states and their legal transitions (Kafka's ``TransactionState``).

    Empty ──AddPartitions──▶ Ongoing ──EndTxn(commit)──▶ PrepareCommit ──markers──▶ CompleteCommit
                                     ──EndTxn(abort) ──▶ PrepareAbort  ──markers──▶ CompleteAbort
    Complete* ──AddPartitions──▶ Ongoing;   Empty / Complete* ──InitProducerId──▶ Empty (epoch + 1)

PrepareEpochFence is never written: it is the coordinator's note that an Ongoing transaction is
being aborted with a bumped epoch (a new producer took the transactional id, or the transaction
timed out), on its way to PrepareAbort.
"""

from __future__ import annotations

from enum import Enum

__all__ = ["TransactionState", "VALID_PREVIOUS_STATES"]


class TransactionState(Enum):
    """(id written in ``TransactionLogValue.transactionStatus``, Kafka's name)."""

    EMPTY = (0, "Empty")
    ONGOING = (1, "Ongoing")
    PREPARE_COMMIT = (2, "PrepareCommit")
    PREPARE_ABORT = (3, "PrepareAbort")
    COMPLETE_COMMIT = (4, "CompleteCommit")
    COMPLETE_ABORT = (5, "CompleteAbort")
    DEAD = (6, "Dead")
    PREPARE_EPOCH_FENCE = (7, "PrepareEpochFence")

    @property
    def id(self) -> int:
        return self.value[0]

    @property
    def state_name(self) -> str:
        return self.value[1]

    @classmethod
    def from_id(cls, state_id: int) -> TransactionState:
        for state in cls:
            if state.id == state_id:
                return state
        raise ValueError(f"Unknown transaction state id {state_id}")

    @classmethod
    def parse(cls, name: str) -> TransactionState | None:
        for state in cls:
            if state.state_name == name:
                return state
        return None


_S = TransactionState
VALID_PREVIOUS_STATES: dict[TransactionState, frozenset[TransactionState]] = {
    _S.EMPTY: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    _S.PREPARE_ABORT: frozenset({_S.ONGOING, _S.PREPARE_EPOCH_FENCE}),
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    _S.DEAD: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}
