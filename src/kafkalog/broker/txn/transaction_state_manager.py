"""``TransactionStateManager``: every transactional id's state, durable in ``__transaction_state``
(Kafka's class of that name).

A transition is one record (key: the transactional id, value: the whole next state, Kafka's
``TransactionLogKey``/``TransactionLogValue``) appended to the id's partition through the leader
path with the coordinator's origin; the in-memory state changes only once the append succeeded.
``load`` replays every partition at startup: the latest record per id wins, a tombstone deletes.
A transactional id that has been Empty or Complete* for ``transactional.id.expiration.ms`` is
removed with a tombstone (Kafka's ``removeExpiredTransactionalIds``), and the log cleaner later
drops the tombstone (the topic is compacted).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

from kafkalog.broker.internal_topic import InternalTopic
from kafkalog.broker.txn.transaction_metadata import TransactionMetadata, TxnTransitMetadata
from kafkalog.broker.txn.transaction_state import TransactionState
from kafkalog.broker.txn.transaction_topic import TRANSACTION_STATE_TOPIC_NAME, transaction_topic_configs
from kafkalog.clock import Time
from kafkalog.errors import KafkaLogError
from kafkalog.protocol.transaction_log_records import (
    decode_transaction_log_key,
    decode_transaction_log_value,
    encode_transaction_log_key,
    encode_transaction_log_value,
)
from kafkalog.records import MAGIC_V2, CompressionType, MemoryRecords, SimpleRecord
from kafkalog.records.validator import AppendOrigin
from kafkalog.storage.log_manager import LogManager

__all__ = ["TransactionStateManager"]

log = logging.getLogger(__name__)

_EXPIRABLE = (TransactionState.EMPTY, TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT)


class TransactionStateManager:
    def __init__(
        self,
        log_manager: LogManager,
        *,
        num_partitions: int,
        segment_bytes: int,
        max_timeout_ms: int,
        id_expiration_ms: int,
        time: Time,
        on_append: Callable[[str, int], None] | None = None,
    ) -> None:
        self._log_manager = log_manager
        self._topic = InternalTopic(
            log_manager,
            TRANSACTION_STATE_TOPIC_NAME,
            num_partitions,
            transaction_topic_configs(segment_bytes),
            "transaction.state.log.num.partitions",
        )
        self.max_timeout_ms = max_timeout_ms
        self._id_expiration_ms = id_expiration_ms
        self._time = time
        self._on_append = on_append
        self._states: dict[str, TransactionMetadata] = {}
        # The highest producer id any record of __transaction_state names (kept or since tombstoned):
        # the producer id manager starts above it when its own file is missing.
        self.highest_producer_id = -1

    def partition_for(self, transactional_id: str) -> int:
        return self._topic.partition_for(transactional_id)

    def validate_transaction_timeout(self, timeout_ms: int) -> bool:
        return 0 < timeout_ms <= self.max_timeout_ms

    def ensure_topic(self) -> None:
        """``__transaction_state`` as the coordinator needs it (``transaction.state.log.num.partitions``,
        compacted, uncompressed; see ``InternalTopic``)."""
        self._topic.ensure()

    # --- state ---------------------------------------------------------------------------------------

    def get(self, transactional_id: str) -> TransactionMetadata | None:
        return self._states.get(transactional_id)

    def put_if_absent(self, metadata: TransactionMetadata) -> TransactionMetadata:
        return self._states.setdefault(metadata.transactional_id, metadata)

    def states(self) -> Iterator[TransactionMetadata]:
        return iter(list(self._states.values()))

    def append_transition(self, metadata: TransactionMetadata, transit: TxnTransitMetadata) -> None:
        """Write ``transit`` and apply it. Raises KafkaLogError (nothing applied) when the append fails."""
        self._append(
            metadata.transactional_id,
            encode_transaction_log_value(transit.log_value(), empty=transit.state is TransactionState.EMPTY),
        )
        metadata.complete_transition(transit)

    def _append(self, transactional_id: str, value: bytes | None) -> None:
        self.ensure_topic()
        partition = self.partition_for(transactional_id)
        partition_log = self._log_manager.get_log(TRANSACTION_STATE_TOPIC_NAME, partition)
        record = SimpleRecord(value, encode_transaction_log_key(transactional_id), self._time.milliseconds())
        partition_log.append_as_leader(
            MemoryRecords.with_records(MAGIC_V2, CompressionType.NONE, [record]),
            origin=AppendOrigin.COORDINATOR,
        )
        if self._on_append is not None:
            self._on_append(TRANSACTION_STATE_TOPIC_NAME, partition)

    # --- startup and expiry --------------------------------------------------------------------------

    def load(self) -> None:
        """Replay ``__transaction_state``: the latest state of every transactional id."""
        if not self._log_manager.has_topic(TRANSACTION_STATE_TOPIC_NAME):
            return
        self.ensure_topic()
        skipped = 0
        for partition in range(self._topic.num_partitions):
            partition_log = self._log_manager.get_log(TRANSACTION_STATE_TOPIC_NAME, partition)
            for record in partition_log.records(partition_log.log_start_offset):
                try:
                    if record.key is None:
                        raise KafkaLogError("record without a key")
                    transactional_id = decode_transaction_log_key(record.key)
                    if record.value is None:
                        self._states.pop(transactional_id, None)
                        continue
                    value = decode_transaction_log_value(record.value)
                    self.highest_producer_id = max(self.highest_producer_id, value.producer_id,
                                                   value.previous_producer_id, value.next_producer_id)
                    metadata = TransactionMetadata.from_log_value(transactional_id, value)
                except (KafkaLogError, ValueError) as e:
                    skipped += 1
                    log.warning(
                        "%s-%d offset %d: unreadable record skipped: %s",
                        TRANSACTION_STATE_TOPIC_NAME,
                        partition,
                        record.offset,
                        e,
                    )
                    continue
                self._states[transactional_id] = metadata
        log.info(
            "Loaded %d transactional ids from %s%s",
            len(self._states),
            TRANSACTION_STATE_TOPIC_NAME,
            f" ({skipped} records skipped)" if skipped else "",
        )

    def remove_expired_transactional_ids(self) -> int:
        """Tombstone every id left Empty or Complete* for ``transactional.id.expiration.ms``."""
        now = self._time.milliseconds()
        removed = 0
        for metadata in self.states():
            if (
                metadata.state in _EXPIRABLE
                and now - metadata.txn_last_update_timestamp >= self._id_expiration_ms
            ):
                try:
                    self._append(metadata.transactional_id, None)
                except KafkaLogError as e:
                    log.warning(
                        "Removing expired transactional id %s failed: %s", metadata.transactional_id, e
                    )
                    continue
                del self._states[metadata.transactional_id]
                removed += 1
        if removed:
            log.info("Removed %d expired transactional ids from %s", removed, TRANSACTION_STATE_TOPIC_NAME)
        return removed
