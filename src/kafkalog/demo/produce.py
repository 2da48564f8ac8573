"""Step 1b: the page views into Kafka-format topics through the storage engine, as a producer and a
leader would append them (no Spark)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from kafkalog.demo.events import PageView
from kafkalog.demo.settings import (
    BY_PAGE_TOPIC,
    CODEC,
    PARTITIONS,
    PRODUCER_BATCH_BYTES,
    RAW_TOPIC_CONFIGS,
    RESULT_TOPIC_CONFIGS,
    SESSIONS_TOPIC,
    TOP_PAGES_TOPIC,
    TOPIC,
)
from kafkalog.records import MAGIC_V2, MemoryRecords, SimpleRecord
from kafkalog.storage.log_manager import LogManager, PartitionDescription
from kafkalog.storage.partitioner import partition_for_key


def create_topics(kafka_dir: Path) -> None:
    """The raw topic and the three result topics (results are small: default segments)."""
    with LogManager(kafka_dir) as lm:
        lm.create_topic(TOPIC, PARTITIONS, RAW_TOPIC_CONFIGS)
        for topic in (TOP_PAGES_TOPIC, SESSIONS_TOPIC, BY_PAGE_TOPIC):
            lm.create_topic(topic, PARTITIONS, RESULT_TOPIC_CONFIGS)


def produce(kafka_dir: Path, views: Sequence[PageView]) -> int:
    """Append ``views`` to ``pageviews`` like a Kafka producer and leader; returns the batch count.

    The producer side: murmur2 of the key picks the partition, and records of one partition are
    collected until a batch reaches 16 KiB. The leader side: ``append_as_leader`` validates each
    batch and assigns its offsets, as a broker does for a produce request.
    """
    batches = 0
    with LogManager(kafka_dir) as lm:
        logs = [lm.get_log(TOPIC, p) for p in lm.partitions(TOPIC)]
        pending: list[list[SimpleRecord]] = [[] for _ in logs]
        pending_bytes = [0] * len(logs)

        def send(p: int) -> None:
            nonlocal batches
            if pending[p]:
                logs[p].append_as_leader(MemoryRecords.with_records(MAGIC_V2, CODEC, pending[p]))
                batches += 1
                pending[p], pending_bytes[p] = [], 0

        for view in views:
            key = view.key()
            p = partition_for_key(key, len(logs))
            record = SimpleRecord(value=view.value(), key=key, timestamp=view.timestamp)
            pending[p].append(record)
            pending_bytes[p] += len(key) + len(record.value or b"")
            if pending_bytes[p] >= PRODUCER_BATCH_BYTES:
                send(p)
        for p in range(len(logs)):
            send(p)
    # Leaving the LogManager flushed, checkpointed and released the data directory's lock, which
    # Spark's writers need (they refuse to append behind a live writer's back).
    return batches


def describe(kafka_dir: Path, topic: str) -> list[PartitionDescription]:
    with LogManager(kafka_dir, read_only=True) as lm:
        return list(lm.describe_topic(topic).partitions)


def end_offsets(kafka_dir: Path, topic: str) -> dict[int, int]:
    return {p.partition: p.log_end_offset for p in describe(kafka_dir, topic)}
