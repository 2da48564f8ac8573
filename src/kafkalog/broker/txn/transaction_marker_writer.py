"""Writing a transaction's COMMIT or ABORT markers into its partitions (what Kafka's
``TransactionMarkerChannelManager`` sends and each leader's ``WriteTxnMarkers`` handler appends).

kafkalog leads every partition itself, so a marker is appended directly: one transactional control
batch per partition, with the coordinator's origin (no sequence check), the producer's id and epoch
and the coordinator epoch. The marker ends the producer's transaction in that partition: the last
stable offset moves past it, an ABORT is indexed in the ``.txnindex``, and for a partition of
``__consumer_offsets`` the group coordinator applies (or drops) the offsets the transaction
committed there. A partition deleted since it joined the transaction is skipped, as Kafka drops
markers for unknown partitions.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from kafkalog.broker.group.offsets_topic import GROUP_METADATA_TOPIC_NAME
from kafkalog.errors import UnknownTopicOrPartitionError
from kafkalog.records import ControlRecordType, MemoryRecords
from kafkalog.records.control import EndTransactionMarker
from kafkalog.records.validator import AppendOrigin
from kafkalog.storage.log_manager import LogManager

__all__ = ["COORDINATOR_EPOCH", "TransactionMarkerWriter"]

log = logging.getLogger(__name__)

# The leader epoch of the transaction's __transaction_state partition; a single node never changes it.
COORDINATOR_EPOCH = 0

OnOffsetsCompleted = Callable[[int, int, bool], None]  # (producer id, partition, is commit)


class TransactionMarkerWriter:
    def __init__(
        self,
        log_manager: LogManager,
        *,
        on_append: Callable[[str, int], None] | None = None,
        on_offsets_completed: OnOffsetsCompleted | None = None,
    ) -> None:
        self._log_manager = log_manager
        self._on_append = on_append
        self._on_offsets_completed = on_offsets_completed

    def write_markers(
        self, producer_id: int, producer_epoch: int, commit: bool, partitions: Iterable[tuple[str, int]]
    ) -> None:
        """Append the marker to every partition. Raises KafkaLogError if one cannot be written (the
        caller retries: a marker written twice is harmless, the second ends no transaction)."""
        for topic, partition in sorted(partitions):
            try:
                self.write_marker(producer_id, producer_epoch, commit, COORDINATOR_EPOCH, topic, partition)
            except UnknownTopicOrPartitionError:
                log.info(
                    "Transaction marker for producer %d not written to %s-%d: the partition is gone",
                    producer_id,
                    topic,
                    partition,
                )

    def write_marker(
        self,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
        topic: str,
        partition: int,
    ) -> None:
        """One partition's marker (what a leader's WriteTxnMarkers handler appends). Raises
        KafkaLogError: the partition is unknown, the epoch is stale, the coordinator epoch older."""
        marker = EndTransactionMarker(
            ControlRecordType.COMMIT if commit else ControlRecordType.ABORT, coordinator_epoch
        )
        partition_log = self._log_manager.get_log(topic, partition)
        now = self._log_manager.time.milliseconds()
        batch = MemoryRecords.with_end_transaction_marker(0, now, 0, producer_id, producer_epoch, marker)
        partition_log.append_as_leader(batch, origin=AppendOrigin.COORDINATOR)
        if self._on_append is not None:
            self._on_append(topic, partition)
        if topic == GROUP_METADATA_TOPIC_NAME and self._on_offsets_completed is not None:
            # the transaction ended in this partition: the group coordinator applies or drops the
            # offsets it committed there
            self._on_offsets_completed(producer_id, partition, commit)
