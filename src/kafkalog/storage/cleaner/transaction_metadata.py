"""``CleanedTransactionMetadata``: what the cleaner knows about transactions while it walks a log.

Kafka's rules (``LogCleaner.scala``): a transactional data batch of a producer whose transaction was
aborted (per the txn indexes) may be discarded; an ABORT marker is kept — and its aborted-transaction
entry copied to the cleaned segment's ``.txnindex`` — as long as a batch of that transaction was
seen in this pass; a COMMIT marker is kept as long as a batch of its transaction was seen. A marker
that may go is first kept with a delete horizon (tombstone-like) and removed by a later clean.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from kafkalog.records.batch import RecordBatch
from kafkalog.records.control import parse_control_record_type
from kafkalog.records.types import ControlRecordType
from kafkalog.storage.txn_index import AbortedTxn, TransactionIndex

__all__ = ["CleanedTransactionMetadata"]


@dataclass(slots=True)
class _AbortedTransactionMetadata:
    aborted_txn: AbortedTxn
    last_observed_batch_offset: int | None = None


@dataclass(slots=True)
class CleanedTransactionMetadata:
    """Transaction state of one cleaning pass over a range of the log."""

    cleaned_index: TransactionIndex | None = None
    _ongoing_committed: set[int] = field(default_factory=set)
    _ongoing_aborted: dict[int, _AbortedTransactionMetadata] = field(default_factory=dict)
    # (first offset, sequence, txn): a min-heap by first offset; the sequence keeps ties ordered.
    _aborted: list[tuple[int, int, AbortedTxn]] = field(default_factory=list)
    _added: int = 0

    def add_aborted_transactions(self, aborted: list[AbortedTxn]) -> None:
        for txn in aborted:
            heapq.heappush(self._aborted, (txn.first_offset, self._added, txn))
            self._added += 1

    def _consume_aborted_up_to(self, offset: int) -> None:
        while self._aborted and self._aborted[0][0] <= offset:
            txn = heapq.heappop(self._aborted)[2]
            if txn.producer_id not in self._ongoing_aborted:
                self._ongoing_aborted[txn.producer_id] = _AbortedTransactionMetadata(txn)

    def on_control_batch_read(self, batch: RecordBatch) -> bool:
        """Account for a control batch; True when it may be discarded."""
        self._consume_aborted_up_to(batch.last_offset)
        if batch.record_count == 0:
            return True  # an empty control batch was cleaned before: nothing to keep
        first = batch.decode_columns().keys[0]
        control_type = parse_control_record_type(first)
        pid = batch.producer_id
        if control_type is ControlRecordType.ABORT:
            aborted = self._ongoing_aborted.pop(pid, None)
            if aborted is not None and aborted.last_observed_batch_offset is not None:
                # Batches of the transaction remain: keep the marker and its index entry.
                if self.cleaned_index is not None:
                    self.cleaned_index.append(aborted.aborted_txn)
                return False
            return True
        if control_type is ControlRecordType.COMMIT:
            if pid in self._ongoing_committed:
                self._ongoing_committed.discard(pid)
                return False
            return True
        return False

    def on_batch_read(self, batch: RecordBatch) -> bool:
        """Account for a data batch; True when it belongs to an aborted transaction (discardable)."""
        self._consume_aborted_up_to(batch.last_offset)
        if not batch.is_transactional:
            return False
        pid = batch.producer_id
        aborted = self._ongoing_aborted.get(pid)
        if aborted is not None:
            aborted.last_observed_batch_offset = batch.last_offset
            return True
        self._ongoing_committed.add(pid)
        return False
