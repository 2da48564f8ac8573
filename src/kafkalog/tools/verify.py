"""``kafkalog verify``: check a whole data directory read-only and list every ``Problem`` found.

Nothing is created, locked or repaired. The index rules are slightly wider than ``dump-log``'s:
Kafka indexes at *append* granularity, so an offset-index entry (O, P) is consistent when P is the
start of a batch and O the last offset of that batch or of a later one (a follower or legacy
multi-message append spans several batches), and a time-index entry (T, O) when O lies in a batch
and T is the largest batch timestamp up to and including it (older brokers indexed the offset of
the record, not of its batch). Everything else about the files is checked strictly. What it finds in
segment files, ``kafkalog recover`` repairs (``tools.repair``).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafkalog.errors import KafkaLogError
from kafkalog.records.batch import RecordBatch
from kafkalog.records.types import MAX_INT32, NO_TIMESTAMP
from kafkalog.storage.checkpoint import (
    LEADER_EPOCH_CHECKPOINT_FILE,
    LOG_START_OFFSET_CHECKPOINT_FILE,
    RECOVERY_POINT_OFFSET_CHECKPOINT_FILE,
    LeaderEpochCheckpointFile,
    OffsetCheckpointFile,
)
from kafkalog.storage.file_records import FileRecords
from kafkalog.storage.index import (
    OFFSET_INDEX_ENTRY_SIZE,
    TIME_INDEX_ENTRY_SIZE,
    IndexFileSlots,
    read_offset_index_file,
    read_time_index_file,
)
from kafkalog.storage.log_file_utils import (
    INDEX_FILE_SUFFIX,
    LOG_FILE_SUFFIX,
    PRODUCER_SNAPSHOT_FILE_SUFFIX,
    TIME_INDEX_FILE_SUFFIX,
    TXN_INDEX_FILE_SUFFIX,
    PartitionDirKind,
    offset_from_file_name,
    parse_partition_dir_name,
    sibling_segment_file,
)
from kafkalog.storage.metadata_files import PARTITION_METADATA_FILE, PartitionMetadataFile
from kafkalog.storage.producer_snapshot import ProducerSnapshot
from kafkalog.storage.txn_index import ABORTED_TXN_SIZE, AbortedTxn, aborted_txn_slots
from kafkalog.tools.problem import Problem

__all__ = ["ProgressCallback", "VerifyReport", "verify_data_dir"]

ProgressCallback = Callable[[int, int], None]


@dataclass(slots=True)
class VerifyReport:
    """What ``verify_data_dir`` looked at and what it found."""

    data_dir: Path
    partitions: int = 0
    segments: int = 0
    batches: int = 0
    records: int = 0
    bytes: int = 0
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {
            "dataDir": str(self.data_dir), "ok": self.ok, "partitions": self.partitions,
            "segments": self.segments, "batches": self.batches, "records": self.records,
            "bytes": self.bytes, "problems": [p.to_json() for p in self.problems],
        }


@dataclass(slots=True)
class _BatchInfo:
    position: int
    base_offset: int
    last_offset: int
    max_timestamp: int
    valid: bool = True  # False: the batch failed its CRC/structure check (already reported)


def _corrupt_batch_info(batch: RecordBatch) -> _BatchInfo:
    """What the header of a batch that failed its checks claims (so index entries that point at it
    are not reported a second time)."""
    try:
        return _BatchInfo(batch.position, batch.offset, batch.last_offset, batch.max_timestamp, False)
    except KafkaLogError:
        return _BatchInfo(batch.position, batch.offset, batch.offset, NO_TIMESTAMP, False)


def _verify_log(path: Path, base_offset: int, prev_last: int, report: VerifyReport,
                progress: Callable[[int], None] | None) -> list[_BatchInfo]:
    """Check every batch of one ``.log``; returns the batches that could be read."""
    problems = report.problems
    batches: list[_BatchInfo] = []
    valid_bytes = 0
    last = prev_last
    with FileRecords.open(path, read_only=True) as records:
        size = records.size_in_bytes
        iterator = records.batches(load_full=True)
        while True:
            try:
                batch = next(iterator)
            except StopIteration:
                break
            except KafkaLogError as e:
                rest = records.read_bytes(valid_bytes, min(size - valid_bytes, 1 << 20))
                if not rest.strip(b"\0"):
                    problems.append(Problem(path, f"{size - valid_bytes} zero bytes at the end (an untrimmed "
                                            "preallocated segment after a crash)", position=valid_bytes))
                else:
                    problems.append(Problem(path, f"unreadable entry: {e}", position=valid_bytes))
                valid_bytes = size
                break
            position = batch.position
            try:
                batch.ensure_valid()
            except KafkaLogError as e:
                problems.append(Problem(path, str(e), position=position, offset=batch.offset))
                batches.append(_corrupt_batch_info(batch))
                valid_bytes = position + batch.size_in_bytes
                continue
            try:
                columns = batch.decode_columns()
                first, last_offset = batch.base_offset, batch.last_offset
            except KafkaLogError as e:
                problems.append(Problem(path, f"batch structure: {e}", position=position,
                                        offset=batch.offset))
                batches.append(_corrupt_batch_info(batch))
                valid_bytes = position + batch.size_in_bytes
                continue
            if first < base_offset:
                problems.append(Problem(path, f"batch starts at offset {first}, below the segment's base "
                                        f"offset {base_offset}", position=position, offset=first))
            if first <= last:
                problems.append(Problem(path, f"offsets do not increase: batch starts at {first} after "
                                        f"offset {last}", position=position, offset=first))
            if last_offset < first or last_offset - base_offset > MAX_INT32:
                problems.append(Problem(path, f"batch last offset {last_offset} is out of range",
                                        position=position, offset=first))
            if columns.offsets and (columns.offsets[0] < first or columns.offsets[-1] > last_offset):
                problems.append(Problem(path, f"record offsets {columns.offsets[0]}..{columns.offsets[-1]} "
                                        f"lie outside the batch's range {first}..{last_offset}",
                                        position=position, offset=first))
            last = max(last, last_offset)
            batches.append(_BatchInfo(position, first, last_offset, batch.max_timestamp))
            report.batches += 1
            report.records += len(columns)
            valid_bytes = position + batch.size_in_bytes
            if progress is not None:
                progress(batch.size_in_bytes)
        if valid_bytes < size:
            problems.append(Problem(path, f"{size - valid_bytes} bytes of an incomplete batch at the end "
                                    "(torn write)", position=valid_bytes))
        report.bytes += size
    return batches


def _check_index_file(raw: IndexFileSlots, report: VerifyReport) -> None:
    for message, position in raw.damage():
        report.problems.append(Problem(raw.path, message, position=position))


def _verify_offset_index(path: Path, base_offset: int, batches: list[_BatchInfo],
                         report: VerifyReport) -> None:
    raw = read_offset_index_file(path, base_offset)
    _check_index_file(raw, report)
    by_position = {b.position: i for i, b in enumerate(batches)}
    by_last_offset = {b.last_offset: i for i, b in enumerate(batches)}
    prev: tuple[int, int] | None = None
    for i, (offset, position) in enumerate(raw.entries_in_use()):
        where = i * OFFSET_INDEX_ENTRY_SIZE
        if prev is not None and (offset <= prev[0] or position <= prev[1]):
            report.problems.append(Problem(path, f"entry ({offset}, {position}) does not follow ({prev[0]}, "
                                           f"{prev[1]})", position=where, offset=offset))
        prev = (offset, position)
        index = by_position.get(position)
        if index is not None and not batches[index].valid:
            continue
        if index is None:
            report.problems.append(Problem(
                path, f"entry for offset {offset} points at log position {position}, which is not the start "
                "of a batch", position=where, offset=offset))
            continue
        # Kafka indexes whole appends: the entry's offset ends the batch at `position` or a later one.
        ends_at = by_last_offset.get(offset)
        if ends_at is None or ends_at < index:
            report.problems.append(Problem(
                path, f"entry for offset {offset} points at the batch at log position {position}, which ends "
                f"at offset {batches[index].last_offset}", position=where, offset=offset))


def _verify_time_index(path: Path, base_offset: int, batches: list[_BatchInfo],
                       report: VerifyReport) -> None:
    raw = read_time_index_file(path, base_offset)
    _check_index_file(raw, report)
    base_offsets = [b.base_offset for b in batches]
    running_max: list[int] = []
    current = NO_TIMESTAMP
    for b in batches:
        if b.valid:
            current = max(current, b.max_timestamp)
        running_max.append(current)
    prev: tuple[int, int] | None = None
    for i, (timestamp, offset) in enumerate(raw.entries_in_use()):
        where = i * TIME_INDEX_ENTRY_SIZE
        if prev is not None and (timestamp <= prev[0] or offset < prev[1]):
            report.problems.append(Problem(path, f"entry ({timestamp}, {offset}) does not follow "
                                           f"({prev[0]}, {prev[1]})", position=where, offset=offset))
        prev = (timestamp, offset)
        k = bisect.bisect_right(base_offsets, offset) - 1
        index = k if k >= 0 and offset <= batches[k].last_offset else None
        if index is not None and not batches[index].valid:
            continue
        if index is None:
            report.problems.append(Problem(path, f"entry for timestamp {timestamp} names offset {offset}, "
                                           "which no batch of the log holds", position=where, offset=offset))
        elif running_max[index] != timestamp:
            report.problems.append(Problem(
                path, f"entry ({timestamp}, {offset}) disagrees with the log, whose largest timestamp up to "
                f"offset {batches[index].last_offset} is {running_max[index]}", position=where,
                offset=offset))


def _verify_partition(directory: Path, report: VerifyReport, prefix_progress: Callable[[int], None] | None
                      ) -> None:
    problems = report.problems
    logs = sorted((p for p in directory.iterdir() if p.name.endswith(LOG_FILE_SUFFIX)),
                  key=lambda p: p.name)
    last = -1
    previous_base: int | None = None
    for log_path in logs:
        try:
            base_offset = offset_from_file_name(log_path.name)
        except KafkaLogError:
            problems.append(Problem(log_path, "file name is not a segment base offset"))
            continue
        report.segments += 1
        if previous_base is not None and base_offset <= last:
            problems.append(Problem(log_path, f"segment base offset {base_offset} is not above the previous "
                                    f"segment's last offset {last}", offset=base_offset))
        batches = _verify_log(log_path, base_offset, last, report, prefix_progress)
        last = max([last, *(b.last_offset for b in batches if b.valid)])
        previous_base = base_offset
        index_path = sibling_segment_file(log_path, INDEX_FILE_SUFFIX)
        if index_path.exists():
            _verify_offset_index(index_path, base_offset, batches, report)
        time_path = sibling_segment_file(log_path, TIME_INDEX_FILE_SUFFIX)
        if time_path.exists():
            _verify_time_index(time_path, base_offset, batches, report)
        txn_path = sibling_segment_file(log_path, TXN_INDEX_FILE_SUFFIX)
        if txn_path.exists():
            data = txn_path.read_bytes()
            if len(data) % ABORTED_TXN_SIZE:
                problems.append(Problem(txn_path, f"length {len(data)} is not a multiple of "
                                        f"{ABORTED_TXN_SIZE}"))
            for position, version, txn in aborted_txn_slots(data):
                if version > AbortedTxn.CURRENT_VERSION:
                    problems.append(Problem(txn_path, "unknown entry version", position=position))
                if txn.last_offset < base_offset:
                    problems.append(Problem(txn_path, f"aborted transaction ends at {txn.last_offset}, below "
                                            f"the segment's base offset {base_offset}", position=position,
                                            offset=txn.last_offset))
    for snapshot in sorted(directory.glob("*" + PRODUCER_SNAPSHOT_FILE_SUFFIX)):
        try:
            ProducerSnapshot.read(snapshot)
        except KafkaLogError as e:
            problems.append(Problem(snapshot, str(e)))
    for name, reader in ((LEADER_EPOCH_CHECKPOINT_FILE, LeaderEpochCheckpointFile),
                         (PARTITION_METADATA_FILE, PartitionMetadataFile)):
        path = directory / name
        if path.exists():
            try:
                reader(path).read()
            except KafkaLogError as e:
                problems.append(Problem(path, str(e)))


def _segment_bytes(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.glob("*" + LOG_FILE_SUFFIX))


def verify_data_dir(data_dir: Path | str, progress: ProgressCallback | None = None) -> VerifyReport:
    """Check every partition of a data directory without changing anything (see the module docstring).

    ``progress(done_bytes, total_bytes)`` is called as ``.log`` bytes are checked.
    """
    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        raise FileNotFoundError(f"Data directory {data_dir} does not exist")
    report = VerifyReport(data_dir)
    partition_dirs = []
    for child in sorted(data_dir.iterdir()):
        if not child.is_dir():
            continue
        try:
            parsed = parse_partition_dir_name(child.name)
        except KafkaLogError as e:
            report.problems.append(Problem(child, str(e)))
            continue
        if parsed.kind is PartitionDirKind.LIVE:
            partition_dirs.append(child)
    for name in (RECOVERY_POINT_OFFSET_CHECKPOINT_FILE, LOG_START_OFFSET_CHECKPOINT_FILE):
        path = data_dir / name
        try:
            OffsetCheckpointFile(path).read()
        except KafkaLogError as e:
            report.problems.append(Problem(path, str(e)))
    total = sum(_segment_bytes(d) for d in partition_dirs)
    done = 0

    def advance(n: int) -> None:
        nonlocal done
        done += n
        if progress is not None:
            progress(done, total)

    for directory in partition_dirs:
        report.partitions += 1
        _verify_partition(directory, report, advance if progress is not None else None)
    return report
