"""Just enough producer state to keep transactions right (Kafka's ProducerStateManager, reduced).

kafkalog is a single-replica log, so what matters is: which transactions are open (they hold back
the last stable offset) and, when an ABORT marker arrives, the aborted-transaction entry that goes
into the segment's ``.txnindex``. Sequence/epoch fencing of idempotent producers is a broker concern
and lives with the broker, not here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kafkalog.records.batch import RecordBatch
from kafkalog.records.control import parse_control_record_type
from kafkalog.records.types import ControlRecordType
from kafkalog.storage.txn_index import AbortedTxn


@dataclass(slots=True)
class ProducerStateManager:
    """Open transactions by producer id -> first offset, fed batch by batch in offset order."""

    ongoing: dict[int, int] = field(default_factory=dict)

    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest open transaction, or None when none is open."""
        return min(self.ongoing.values()) if self.ongoing else None

    def update(self, batch: RecordBatch) -> AbortedTxn | None:
        """Account for one appended v2 batch; return the AbortedTxn to index if it ends an abort."""
        if batch.magic < 2 or not batch.is_transactional:
            return None
        pid = batch.producer_id
        if not batch.is_control:
            self.ongoing.setdefault(pid, batch.base_offset)
            return None
        first_offset = self.ongoing.pop(pid, None)
        control_type = _control_type(batch)
        if control_type is not ControlRecordType.ABORT or first_offset is None:
            return None
        marker_offset = batch.last_offset
        # LSO as Kafka records it: the first offset of the next still-open transaction, else past the marker.
        others = [offset for other, offset in self.ongoing.items() if other != pid]
        lso = min(others) if others else marker_offset + 1
        return AbortedTxn(pid, first_offset, marker_offset, lso)

    def truncate_and_reload(self) -> None:
        self.ongoing.clear()


def _control_type(batch: RecordBatch) -> ControlRecordType:
    for record in batch.records():
        if record.key is not None:
            return parse_control_record_type(record.key)
    return ControlRecordType.UNKNOWN
