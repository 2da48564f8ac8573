"""``GroupMetadataManager``: committed offsets and group state, durable in ``__consumer_offsets``
(Kafka's classic ``GroupMetadataManager``).

Every change is a record appended to the group's partition of ``__consumer_offsets`` through the
leader path (``Log.append_as_leader`` with the coordinator's origin), and the in-memory view changes
only once that append succeeded: what a client was told is committed is on disk. The records use
Kafka's schemas (``group_metadata_records``); a deletion is a tombstone that the log cleaner later
removes (the topic is compacted). ``load`` replays every partition at startup: the latest record
per key wins and a tombstone deletes.

Offset expiry (``offsets.retention.minutes``, checked every ``offsets.retention.check.interval.ms``,
Kafka's ``GroupMetadata.removeExpiredOffsets``, KIP-211 and KIP-496): offsets of a group that has no
members expire once the retention has passed since the group became empty (its stored state
timestamp), or since the commit for groups that never had members (standalone commits); in a
``consumer`` group that is Stable, the offsets of topics no member subscribes to expire once the
retention has passed since their commit; in any other group nothing expires. A commit made with an
explicit expire timestamp (OffsetCommit v1) expires then instead, under the same conditions. The
coordinator's periodic cleanup (``GroupCoordinator.cleanup_group_metadata``) then turns a group left
Empty with no offsets Dead and tombstones its metadata, as Kafka does.

Everything runs on the broker's event loop, the only thread that appends to logs.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from kafkalog.broker.error_codes import error_code_for
from kafkalog.broker.group.offsets_topic import GROUP_METADATA_TOPIC_NAME, offsets_topic_configs
from kafkalog.broker.internal_topic import InternalTopic
from kafkalog.clock import SYSTEM_TIME, Time
from kafkalog.errors import KafkaLogError
from kafkalog.protocol.group_metadata_records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_key,
    decode_value,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
)
from kafkalog.records import MAGIC_V2, CompressionType, ControlRecordType, MemoryRecords, SimpleRecord
from kafkalog.records.control import parse_control_record_type
from kafkalog.records.types import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE
from kafkalog.records.validator import AppendOrigin
from kafkalog.storage.log_manager import LogManager

__all__ = ["GroupMetadataManager", "TopicPartitionKey"]

log = logging.getLogger(__name__)

TopicPartitionKey = tuple[str, int]
_NONE = int(ErrorCode.none)


class GroupMetadataManager:
    def __init__(self, log_manager: LogManager, *, num_partitions: int = 50,
                 segment_bytes: int = 100 * 1024 * 1024, retention_ms: int = 7 * 24 * 3600 * 1000,
                 compression: CompressionType = CompressionType.NONE, time: Time = SYSTEM_TIME,
                 on_append: Any = None) -> None:
        if num_partitions < 1:
            raise ValueError("offsets.topic.num.partitions must be at least 1")
        self._log_manager = log_manager
        self._topic = InternalTopic(log_manager, GROUP_METADATA_TOPIC_NAME, num_partitions,
                                    offsets_topic_configs(segment_bytes), "offsets.topic.num.partitions")
        self.retention_ms = retention_ms
        self._compression = compression
        self._time = time
        self._on_append = on_append  # wakes fetches parked on the partition (ReplicaManager)
        self._offsets: dict[str, dict[TopicPartitionKey, OffsetCommitValue]] = {}
        self._groups: dict[str, GroupMetadataValue] = {}
        # where in the log each offset was committed: of two commits, the later record wins
        self._positions: dict[str, dict[TopicPartitionKey, int]] = {}
        # open transactions' commits: producer id -> group -> partition -> (value, log position)
        self._pending_txn: dict[int, dict[str, dict[TopicPartitionKey, tuple[OffsetCommitValue, int]]]] = {}
        self._loaded = False

    # --- where things go ---------------------------------------------------------------------------

    @property
    def num_partitions(self) -> int:
        return self._topic.num_partitions

    def partition_for(self, group_id: str) -> int:
        return self._topic.partition_for(group_id)

    def ensure_topic(self) -> None:
        """``__consumer_offsets`` as the coordinator needs it (``offsets.topic.num.partitions``,
        compacted; see ``InternalTopic``)."""
        self._topic.ensure()

    def _append(self, group_id: str, records: list[tuple[bytes, bytes | None]], *,
                producer_id: int = NO_PRODUCER_ID,
                producer_epoch: int = NO_PRODUCER_EPOCH) -> tuple[int, int]:
        """Append ``(key, value)`` records to the group's partition in one batch: (Kafka's error code,
        the batch's first offset). With a producer id the batch is transactional (TxnOffsetCommit):
        its records count only once the transaction's COMMIT marker follows."""
        if not records:
            return _NONE, -1
        try:
            self.ensure_topic()
            partition = self.partition_for(group_id)
            partition_log = self._log_manager.get_log(GROUP_METADATA_TOPIC_NAME, partition)
            now = self._time.milliseconds()
            transactional = producer_id != NO_PRODUCER_ID
            batch = MemoryRecords.with_records(
                MAGIC_V2, self._compression, [SimpleRecord(value, key, now) for key, value in records],
                producer_id=producer_id, producer_epoch=producer_epoch,
                base_sequence=0 if transactional else NO_SEQUENCE, is_transactional=transactional,
            )
            info = partition_log.append_as_leader(batch, origin=AppendOrigin.COORDINATOR)
        except KafkaLogError as e:
            log.warning("Writing to %s for group %s failed: %s", GROUP_METADATA_TOPIC_NAME, group_id, e)
            return int(_storage_error(e)), -1
        if self._on_append is not None:
            self._on_append(GROUP_METADATA_TOPIC_NAME, partition)
        return _NONE, info.first_offset

    # --- groups ------------------------------------------------------------------------------------

    async def store_group(self, group_id: str, value: GroupMetadataValue) -> int:
        record = (encode_group_metadata_key(group_id), encode_group_metadata_value(value))
        error, _ = self._append(group_id, [record])
        if error == _NONE:
            self._groups[group_id] = value
        return error

    async def delete_group(self, group_id: str) -> int:
        """Tombstones for the group's metadata and every offset it committed or an open transaction
        holds for it (Kafka's ``deleteAllOffsets``: the tombstone also drops the pending commit, so
        the transaction's COMMIT marker cannot bring the offset back)."""
        partitions = sorted(set(self._offsets.get(group_id, {})) | self._pending_partitions(group_id))
        records: list[tuple[bytes, bytes | None]] = [
            (encode_offset_commit_key(OffsetCommitKey(group_id, t, p)), None) for t, p in partitions
        ]
        records.append((encode_group_metadata_key(group_id), None))
        error, _ = self._append(group_id, records)
        if error == _NONE:
            self._drop_pending(group_id, partitions)
            self._offsets.pop(group_id, None)
            self._positions.pop(group_id, None)
            self._groups.pop(group_id, None)
        return error

    # --- offsets -----------------------------------------------------------------------------------

    async def store_offsets(self, group_id: str, offsets: Mapping[TopicPartitionKey, OffsetCommitValue]
                            ) -> dict[TopicPartitionKey, int]:
        """Write the commits in one batch; all succeed or all fail, as one append does."""
        items = list(offsets.items())
        records: list[tuple[bytes, bytes | None]] = [
            (encode_offset_commit_key(OffsetCommitKey(group_id, t, p)), encode_offset_commit_value(v))
            for (t, p), v in items
        ]
        error, position = self._append(group_id, records)
        if error == _NONE:
            self._offsets.setdefault(group_id, {}).update(items)
            self._positions.setdefault(group_id, {}).update(dict.fromkeys(offsets, position))
        return {tp: error for tp, _ in items}

    async def store_txn_offsets(self, group_id: str, producer_id: int, producer_epoch: int,
                                offsets: Mapping[TopicPartitionKey, OffsetCommitValue]
                                ) -> dict[TopicPartitionKey, int]:
        """TxnOffsetCommit: the commits are written in the producer's transaction and stay pending
        (invisible to OffsetFetch) until its marker commits or aborts them."""
        items = list(offsets.items())
        records: list[tuple[bytes, bytes | None]] = [
            (encode_offset_commit_key(OffsetCommitKey(group_id, t, p)), encode_offset_commit_value(v))
            for (t, p), v in items
        ]
        error, position = self._append(group_id, records, producer_id=producer_id,
                                       producer_epoch=producer_epoch)
        if error == _NONE:
            pending = self._pending_txn.setdefault(producer_id, {}).setdefault(group_id, {})
            pending.update({tp: (value, position) for tp, value in items})
        return {tp: error for tp, _ in items}

    def complete_txn_offsets(self, producer_id: int, partition: int, commit: bool) -> None:
        """The producer's transaction ended in this partition of ``__consumer_offsets`` (its marker
        is written; Kafka's ``handleTxnCompletion``): its pending commits there become the groups'
        offsets, unless a commit written later to the log already replaced them, or are dropped."""
        groups = self._pending_txn.get(producer_id, {})
        for group_id in [g for g in groups if self.partition_for(g) == partition]:
            pending = groups.pop(group_id)
            if commit:
                for tp, (value, position) in pending.items():
                    self._apply_commit(group_id, tp, value, position)
        if not groups:
            self._pending_txn.pop(producer_id, None)

    def _apply_commit(self, group_id: str, tp: TopicPartitionKey, value: OffsetCommitValue | None,
                      position: int) -> None:
        positions = self._positions.setdefault(group_id, {})
        if positions.get(tp, -1) > position:
            return  # a commit later in the log wins, whichever way it was written
        positions[tp] = position
        if value is not None:
            self._offsets.setdefault(group_id, {})[tp] = value
            return
        group_offsets = self._offsets.get(group_id)
        if group_offsets is not None:
            group_offsets.pop(tp, None)
            if not group_offsets:
                del self._offsets[group_id]

    def has_pending_txn_offsets(self, group_id: str, tp: TopicPartitionKey | None = None) -> bool:
        """Whether an open transaction has committed offsets for the group (for ``tp``, if given)."""
        return any(group_id in groups and (tp is None or tp in groups[group_id])
                   for groups in self._pending_txn.values())

    def _pending_partitions(self, group_id: str) -> set[TopicPartitionKey]:
        return {tp for groups in self._pending_txn.values() for tp in groups.get(group_id, ())}

    def _drop_pending(self, group_id: str, partitions: Iterable[TopicPartitionKey]) -> None:
        """An offset tombstone also removes every open transaction's pending commit of the partition
        (Kafka's ``OffsetMetadataManager.replay`` of a tombstone)."""
        gone = set(partitions)
        for producer_id in list(self._pending_txn):
            groups = self._pending_txn[producer_id]
            pending = groups.get(group_id)
            if pending is None:
                continue
            for tp in gone & pending.keys():
                del pending[tp]
            if not pending:
                del groups[group_id]
            if not groups:
                del self._pending_txn[producer_id]

    def get_offsets(self, group_id: str, partitions: Iterable[TopicPartitionKey] | None = None
                    ) -> dict[TopicPartitionKey, OffsetCommitValue]:
        """The committed offsets of ``partitions`` that have one (every one when None)."""
        stored = self._offsets.get(group_id, {})
        if partitions is None:
            return dict(stored)
        return {tp: stored[tp] for tp in partitions if tp in stored}

    async def delete_offsets(self, group_id: str, partitions: Iterable[TopicPartitionKey]
                             ) -> dict[TopicPartitionKey, int]:
        """Tombstones for the partitions that have a committed offset or an open transaction's
        pending one (Kafka writes one for either, and it drops the pending commit too)."""
        wanted = list(partitions)
        stored = self._offsets.get(group_id, {})
        pending = self._pending_partitions(group_id)
        present = [tp for tp in dict.fromkeys(wanted) if tp in stored or tp in pending]
        error, position = self._append(group_id, [
            (encode_offset_commit_key(OffsetCommitKey(group_id, t, p)), None) for t, p in present
        ])
        if error == _NONE:
            self._drop_pending(group_id, present)
            positions = self._positions.setdefault(group_id, {})
            for tp in present:
                stored.pop(tp, None)
                positions[tp] = position
            if not stored:
                self._offsets.pop(group_id, None)
        return {tp: error for tp in wanted}

    async def remove_offsets_of_topic(self, topic: str) -> int:
        """Tombstone every group's offsets of a deleted topic, committed or pending in an open
        transaction (Kafka's ``onPartitionsDeleted``); returns how many went."""
        removed = 0
        groups = self.group_ids_with_offsets() | {g for gs in self._pending_txn.values() for g in gs}
        for group_id in sorted(groups):
            held = set(self._offsets.get(group_id, {})) | self._pending_partitions(group_id)
            gone = sorted(tp for tp in held if tp[0] == topic)
            if gone:
                errors = await self.delete_offsets(group_id, gone)
                removed += sum(1 for e in errors.values() if e == _NONE)
        return removed

    def has_offsets(self, group_id: str) -> bool:
        """Committed offsets, or an open transaction's (Kafka's ``GroupMetadata.hasOffsets``: a group
        is not cleaned up while a transaction may still commit offsets for it)."""
        return bool(self._offsets.get(group_id)) or self.has_pending_txn_offsets(group_id)

    def has_group(self, group_id: str) -> bool:
        """Whether the group's metadata is stored (a record not yet deleted)."""
        return group_id in self._groups

    def group_ids_with_offsets(self) -> set[str]:
        return {g for g, offsets in self._offsets.items() if offsets}

    # --- startup and expiry ------------------------------------------------------------------------

    def load(self) -> dict[str, GroupMetadataValue]:
        """Replay ``__consumer_offsets`` (once) and return the stored groups."""
        if self._loaded:
            return dict(self._groups)
        self._loaded = True
        if not self._log_manager.has_topic(GROUP_METADATA_TOPIC_NAME):
            return {}
        partitions = self._log_manager.partitions(GROUP_METADATA_TOPIC_NAME)
        self._topic.adopt(len(partitions))
        skipped = 0
        for partition in partitions:
            skipped += self._load_partition(partition)
        log.info("Loaded %d groups and the offsets of %d groups from %s%s", len(self._groups),
                 len(self._offsets), GROUP_METADATA_TOPIC_NAME,
                 f" ({skipped} records skipped)" if skipped else "")
        return dict(self._groups)

    def _load_partition(self, partition: int) -> int:
        """Replay one partition batch by batch; returns how many records were unreadable. A
        transactional batch's commits wait for their producer's marker (Kafka's
        ``doLoadGroupsAndOffsets``): COMMIT applies them, ABORT drops them, none yet leaves them pending."""
        partition_log = self._log_manager.get_log(GROUP_METADATA_TOPIC_NAME, partition)
        skipped = 0
        for batch in partition_log.batches(partition_log.log_start_offset):
            if batch.is_control:
                self.complete_txn_offsets(batch.producer_id, partition, _is_commit_marker(batch))
                continue
            for record in batch.records():
                if record.key is None:
                    skipped += 1
                    continue
                try:
                    any_key = decode_key(record.key)
                    any_value = decode_value(any_key, record.value)
                except KafkaLogError as e:
                    skipped += 1
                    log.warning("%s-%d offset %d: unreadable record skipped: %s",
                                GROUP_METADATA_TOPIC_NAME, partition, record.offset, e)
                    continue
                # as Kafka's replay: a transactional commit waits for its marker; a tombstone (in a
                # transaction or not) deletes at once
                if (batch.is_transactional and isinstance(any_key, OffsetCommitKey)
                        and isinstance(any_value, OffsetCommitValue)):
                    groups = self._pending_txn.setdefault(batch.producer_id, {})
                    tp = (any_key.topic, any_key.partition)
                    groups.setdefault(any_key.group, {})[tp] = (any_value, batch.base_offset)
                else:
                    self._replay(any_key, any_value, batch.base_offset)
        return skipped

    def _replay(self, key: OffsetCommitKey | GroupMetadataKey,
                value: OffsetCommitValue | GroupMetadataValue | None, position: int) -> None:
        if isinstance(key, OffsetCommitKey):
            assert not isinstance(value, GroupMetadataValue)
            self._apply_commit(key.group, (key.topic, key.partition), value, position)
            if value is None:
                self._drop_pending(key.group, [(key.topic, key.partition)])
        elif isinstance(value, GroupMetadataValue):
            self._groups[key.group] = value
        else:
            self._groups.pop(key.group, None)

    def expired_offsets(self, group_id: str, state: str | None, subscribed: frozenset[str] | None = None,
                        now: int | None = None) -> list[TopicPartitionKey]:
        """Which of the group's offsets have expired at ``now``, given the coordinator's state name of
        the group (None: no such group) and, for a Stable consumer group, the topics it subscribes
        to (the rules in the module docstring)."""
        now = self._time.milliseconds() if now is None else now
        stored = self._offsets.get(group_id, {})
        if state is None or state == "Empty":
            group = self._groups.get(group_id)
            empty_since = group.current_state_timestamp if group is not None and not group.members else -1
            candidates = list(stored.items())
        elif state == "Stable" and subscribed is not None:
            empty_since = -1
            candidates = [(tp, value) for tp, value in stored.items() if tp[0] not in subscribed]
        else:
            return []
        expired = []
        for tp, value in candidates:
            if self.has_pending_txn_offsets(group_id, tp):
                continue  # Kafka waits for the open transaction to end before expiring it
            if value.expire_timestamp >= 0:
                if now >= value.expire_timestamp:
                    expired.append(tp)
                continue
            base = empty_since if empty_since >= 0 else value.commit_timestamp
            if now - base >= self.retention_ms:
                expired.append(tp)
        return expired

    async def cleanup_expired_offsets(self, group_state: Any = None, subscribed_topics: Any = None) -> int:
        """Tombstone every expired offset (Kafka's ``cleanupGroupMetadata``); returns how many.
        ``group_state(group_id)`` gives the coordinator's state name (None: no such group),
        ``subscribed_topics(group_id)`` the topics of a consumer group's members (or None)."""
        removed = 0
        for group_id in sorted(self.group_ids_with_offsets()):
            state = group_state(group_id) if group_state is not None else None
            subscribed = (subscribed_topics(group_id) if subscribed_topics is not None and state == "Stable"
                          else None)
            expired = self.expired_offsets(group_id, state, subscribed)
            if expired:
                errors = await self.delete_offsets(group_id, expired)
                removed += sum(1 for e in errors.values() if e == _NONE)
        if removed:
            log.info("Removed %d expired offsets from %s", removed, GROUP_METADATA_TOPIC_NAME)
        return removed

    def shutdown(self) -> None:
        self._on_append = None


def _is_commit_marker(batch: Any) -> bool:
    for record in batch.records():
        return parse_control_record_type(record.key) is ControlRecordType.COMMIT
    return False


def _storage_error(e: KafkaLogError) -> ErrorCode:
    """Kafka maps append failures of the coordinator to retriable coordinator errors (its
    ``GroupMetadataManager.storeOffsets`` callback): the client retries elsewhere or later."""
    code = error_code_for(e)
    if code in (ErrorCode.unknown_topic_or_partition, ErrorCode.not_leader_or_follower):
        return ErrorCode.coordinator_not_available
    if code in (ErrorCode.message_too_large, ErrorCode.record_list_too_large, ErrorCode.invalid_fetch_size):
        return ErrorCode.invalid_commit_offset_size
    if code in (ErrorCode.invalid_producer_epoch, ErrorCode.invalid_txn_state):
        return code  # a fenced transactional producer's TxnOffsetCommit: it must learn it is fenced
    return ErrorCode.unknown_server_error
