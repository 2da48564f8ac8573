"""The writer process of the crash test: appends planned batches to a data directory until killed.

``test_crash.py`` starts this file as a separate Python process and SIGKILLs it at random moments.
The writer reports every step it *completed* by appending one line to an event file (``O_APPEND``,
one ``write`` per line). A ``write`` that returned lives in the page cache, which survives the
death of the process, so the parent reads an exact account of what was acknowledged:

``S <topic> <leo>``            the partition was opened (after recovery) with this log end offset
``R``                          every partition is open; appends start
``A <topic> <i> <first> <last>``  batch ``i`` of this round's plan for ``topic`` was appended
``F <topic> <offset>``         ``Log.flush()`` returned; everything below ``offset`` is on disk
``C``                          ``LogManager.flush()`` + ``checkpoint()`` returned
``D``                          (``--fill`` only) the requested batches are appended and flushed

What is appended is a pure function of ``(seed, round)`` (:func:`plan`), so the parent regenerates
the exact batches, records and timestamps without any other channel.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kafkalog.records.memory import MemoryRecords
from kafkalog.records.types import CompressionType, SimpleRecord

# Two partitions with different on-disk formats, so recovery meets v2 batches and legacy (v1) messages
# and compressed wrappers. Small segments and index intervals: segments roll every few batches and
# indexes get entries, so kills land during rolls and index writes too.
TOPIC_CONFIGS: dict[str, dict[str, str]] = {
    "crash": {
        "segment.bytes": "120000",
        "index.interval.bytes": "700",
        "segment.index.bytes": "4096",
    },
    "legacy": {
        "segment.bytes": "90000",
        "index.interval.bytes": "500",
        "segment.index.bytes": "4096",
        "message.format.version": "0.10.2-IV0",
    },
}
TOPICS = tuple(TOPIC_CONFIGS)
PARTITION = 0
# Record timestamps: deterministic and increasing through the whole test (round, batch, record).
T0 = 1_700_000_000_000
NO_TIMESTAMP = -1
_CODECS_BY_MAGIC = {
    0: (CompressionType.NONE, CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.LZ4),
    1: (CompressionType.NONE, CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.LZ4),
    2: (CompressionType.NONE, CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.LZ4,
        CompressionType.ZSTD),
}


@dataclass(frozen=True, slots=True)
class PlannedBatch:
    """One append of the plan: what is sent, and what to do after it was acknowledged."""

    topic: str
    index: int  # position among this round's batches of ``topic``
    magic: int
    codec: CompressionType
    records: tuple[SimpleRecord, ...]
    flush_after: bool
    checkpoint_after: bool
    pause_ms: float  # pacing: sleep this long after the append (keeps the data size bounded)

    def memory_records(self) -> MemoryRecords:
        return MemoryRecords.with_records(self.magic, self.codec, self.records)

    def expected(self) -> list[tuple[bytes | None, bytes | None, int]]:
        """(key, value, timestamp) of each record as any reader must see it once stored. Magic-0 input
        has no timestamps; conversion to v1/v2 keeps key and value and reports -1."""
        return [(r.key, r.value, NO_TIMESTAMP if self.magic == 0 else r.timestamp) for r in self.records]


def _value(rng: random.Random, tag: bytes) -> bytes | None:
    kind = rng.random()
    if kind < 0.05:
        return None
    if kind < 0.10:
        return b""
    size = rng.randrange(1, 600)
    if kind < 0.55:  # compressible
        return (tag + b"|") * (size // (len(tag) + 1)) + tag[: size % (len(tag) + 1)]
    return rng.randbytes(size)


def plan(seed: int, round_no: int) -> Iterator[PlannedBatch]:
    """The endless, deterministic sequence of batches the writer of ``round_no`` appends."""
    rng = random.Random(f"kafkalog-crash:{seed}:{round_no}")
    counters = dict.fromkeys(TOPICS, 0)
    n = 0
    while True:
        topic = "crash" if rng.random() < 0.65 else "legacy"
        index = counters[topic]
        counters[topic] += 1
        magic = rng.choice((0, 1, 2, 2, 2))
        # zstd only exists for v2: the legacy (v1) topic rejects it, as Kafka does.
        codec = rng.choice(_CODECS_BY_MAGIC[magic if topic == "crash" else min(magic, 1)])
        count = rng.choice((1, 1, 2, 3, rng.randrange(1, 40), rng.randrange(1, 100)))
        base_ts = T0 + round_no * 100_000_000 + n * 1_000
        records = []
        for i in range(count):
            key_tag = f"{round_no}/{topic}/{index}/{i}".encode()
            key = None if rng.random() < 0.05 else key_tag
            records.append(SimpleRecord(_value(rng, key_tag), key, base_ts + i))
        n += 1
        yield PlannedBatch(
            topic=topic,
            index=index,
            magic=magic,
            codec=codec,
            records=tuple(records),
            flush_after=rng.random() < 0.12,
            checkpoint_after=rng.random() < 0.04,
            pause_ms=rng.choice((0.0, 0.0, 0.5, 2.0)),
        )


def planned_batches(seed: int, round_no: int, topic: str, count: int) -> list[PlannedBatch]:
    """The first ``count`` batches of ``topic`` in the plan of ``round_no``."""
    out: list[PlannedBatch] = []
    if count <= 0:
        return out
    for batch in plan(seed, round_no):
        if batch.topic == topic:
            out.append(batch)
            if len(out) == count:
                return out
    raise AssertionError("unreachable: the plan is endless")


class _Events:
    """The side channel: one ``os.write`` of one line per completed step, to an O_APPEND file."""

    def __init__(self, path: Path) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def emit(self, *fields: object) -> None:
        os.write(self._fd, (" ".join(map(str, fields)) + "\n").encode())


def run(data_dir: Path, events_path: Path, seed: int, round_no: int, fill: int | None,
        max_seconds: float) -> int:
    # Imported here so that ``plan`` can be imported by the test without the storage layer.
    from kafkalog.storage.log_manager import LogManager

    deadline = time.monotonic() + max_seconds
    events = _Events(events_path)
    manager = LogManager(data_dir)
    logs = {}
    for topic in TOPICS:
        if not manager.has_topic(topic):
            manager.create_topic(topic, 1, TOPIC_CONFIGS[topic])
        logs[topic] = manager.get_log(topic, PARTITION)
        events.emit("S", topic, logs[topic].log_end_offset)
    events.emit("R")
    for appended, batch in enumerate(plan(seed, round_no)):
        if fill is not None and appended == fill:
            break
        log = logs[batch.topic]
        info = log.append_as_leader(batch.memory_records())
        events.emit("A", batch.topic, batch.index, info.first_offset, info.last_offset)
        if batch.flush_after:
            log.flush()
            events.emit("F", batch.topic, log.log_end_offset)
        if batch.checkpoint_after:
            manager.flush()
            manager.checkpoint()
            for topic in TOPICS:
                events.emit("F", topic, logs[topic].log_end_offset)
            events.emit("C")
        if batch.pause_ms and fill is None:
            time.sleep(batch.pause_ms / 1000)
        if time.monotonic() > deadline:
            print(f"crash_writer: not killed within {max_seconds}s", file=sys.stderr)
            return 3
    # --fill: leave the partitions as a crash would (no close, no clean-shutdown marker), but with
    # everything flushed, and wait to be killed.
    manager.flush()
    for topic in TOPICS:
        events.emit("F", topic, logs[topic].log_end_offset)
    events.emit("D")
    while time.monotonic() < deadline:
        time.sleep(0.05)
    print(f"crash_writer: not killed within {max_seconds}s", file=sys.stderr)
    return 3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--events", type=Path, required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--round", type=int, required=True)
    parser.add_argument("--fill", type=int, default=None, help="append this many batches, flush, wait")
    parser.add_argument("--max-seconds", type=float, default=60.0)
    args = parser.parse_args(argv)
    return run(args.data_dir, args.events, args.seed, args.round, args.fill, args.max_seconds)


if __name__ == "__main__":
    sys.exit(main())
