"""Inspecting Kafka's files from the outside: ``kafkalog dump-log`` and ``kafkalog verify``.

``dump-log`` is the counterpart of Kafka's ``kafka-dump-log.sh`` (``DumpLogSegments``): every file
is turned into a ``FileDump`` — a head, a stream of items (batches, index entries, ...) and a tail
with the findings — which ``render_text`` prints the way Kafka does and ``write_json`` writes as one
JSON document. The checks are Kafka's: offset-index entries against the batch at their position,
time-index entries against the batch's max record timestamp, non-consecutive offsets, invalid bytes
at the end of a ``.log``.

``verify_data_dir`` checks a whole data directory read-only (nothing is created, locked or
repaired) and returns every ``Problem`` found. Its index rules are slightly wider than the dump's:
Kafka indexes at *append* granularity, so an offset-index entry (O, P) is consistent when P is the
start of a batch and O the last offset of that batch or of a later one (a follower or legacy
multi-message append spans several batches), and a time-index entry (T, O) when O lies in a batch
and T is the largest batch timestamp up to and including it (older brokers indexed the offset of
the record, not of its batch). Everything else about the files is checked strictly.

Index files are parsed raw here rather than through ``storage.index``: a read-only ``OffsetIndex``
counts only its plausible prefix (right for readers), which would hide exactly the damage a dump or
a verification has to show.
"""

from __future__ import annotations

import bisect
import json
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from kafkalog.errors import KafkaLogError
from kafkalog.records.batch import RecordBatch
from kafkalog.records.control import EndTransactionMarker, parse_control_record_type
from kafkalog.records.types import (
    MAGIC_V2,
    MAX_INT32,
    NO_TIMESTAMP,
    ControlRecordType,
)
from kafkalog.storage.checkpoint import (
    LEADER_EPOCH_CHECKPOINT_FILE,
    LOG_START_OFFSET_CHECKPOINT_FILE,
    RECOVERY_POINT_OFFSET_CHECKPOINT_FILE,
    LeaderEpochCheckpointFile,
    OffsetCheckpointFile,
)
from kafkalog.storage.file_records import FileRecords
from kafkalog.storage.index import OFFSET_INDEX_ENTRY_SIZE, TIME_INDEX_ENTRY_SIZE
from kafkalog.storage.log_file_utils import (
    INDEX_FILE_SUFFIX,
    LOG_FILE_SUFFIX,
    PRODUCER_SNAPSHOT_FILE_SUFFIX,
    TIME_INDEX_FILE_SUFFIX,
    TXN_INDEX_FILE_SUFFIX,
    PartitionDirKind,
    offset_from_file_name,
    parse_partition_dir_name,
)
from kafkalog.storage.metadata_files import PARTITION_METADATA_FILE, PartitionMetadataFile
from kafkalog.storage.producer_snapshot import ProducerSnapshot
from kafkalog.storage.producer_state import _decrement_sequence  # Kafka's decrementSequence
from kafkalog.storage.txn_index import ABORTED_TXN_SIZE, AbortedTxn

__all__ = [
    "DumpOptions",
    "FileDump",
    "Problem",
    "VerifyReport",
    "dump_file",
    "render_text",
    "verify_data_dir",
    "write_json",
]

_OFFSET_ENTRY = struct.Struct(">ii")  # relative offset, position
_TIME_ENTRY = struct.Struct(">qi")  # timestamp, relative offset
# Kafka's DumpLogSegments prefixes every deep-iteration line with this.
RECORD_INDENT = "|"
DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024

ProgressCallback = Callable[[int, int], None]


def _java_bool(value: bool) -> str:
    return "true" if value else "false"


def _java_optional_long(value: int | None) -> str:
    return "OptionalLong.empty" if value is None else f"OptionalLong[{value}]"


def _decode_text(data: bytes | None) -> str | None:
    # Kafka's default StringDecoder: UTF-8, malformed input replaced.
    return None if data is None else data.decode("utf-8", errors="replace")


@dataclass(frozen=True, slots=True)
class Problem:
    """One inconsistency: which file, where in it (byte position and/or offset), and what."""

    file: Path
    message: str
    position: int | None = None
    offset: int | None = None

    def __str__(self) -> str:
        where = []
        if self.position is not None:
            where.append(f"position {self.position}")
        if self.offset is not None:
            where.append(f"offset {self.offset}")
        location = f" ({', '.join(where)})" if where else ""
        return f"{self.file}{location}: {self.message}"

    def to_json(self) -> dict[str, Any]:
        return {"file": str(self.file), "position": self.position, "offset": self.offset,
                "message": self.message}


@dataclass(frozen=True, slots=True)
class DumpOptions:
    """Kafka's DumpLogSegments options (``--print-data-log`` implies deep iteration, as in Kafka)."""

    deep_iteration: bool = False
    print_data_log: bool = False
    index_sanity_check: bool = False
    verify_index_only: bool = False
    skip_record_metadata: bool = False
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    max_bytes: int = MAX_INT32

    @property
    def deep(self) -> bool:
        return self.deep_iteration or self.print_data_log


@dataclass(slots=True)
class FileDump:
    """What a dump of one file says: ``head`` fields, ``items`` (consume once), then ``tail()`` with
    the findings, which is complete only after ``items`` is exhausted.

    ``messages`` are informational lines Kafka prints on stdout (e.g. "is empty", "passed sanity
    check"); ``errors`` lines go to stderr in text mode; ``problems`` make the dump fail.
    """

    path: Path
    kind: str
    head: dict[str, Any]
    list_key: str
    items: Iterator[dict[str, Any]]
    messages: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)

    def tail(self) -> dict[str, Any]:
        return {
            **self.summary,
            "messages": list(self.messages),
            "problems": [p.to_json() for p in self.problems],
        }


# --- raw index parsing ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _RawIndex:
    """An index file's entries as stored. ``used`` entries precede the zero-filled tail a writer
    preallocates (Kafka's dump stops at the first entry with relative offset 0 after the first);
    ``dirty_tail`` is the byte position of the first non-zero byte inside that tail, if any."""

    length: int
    entries: list[tuple[int, int]]  # (offset or timestamp, position or offset) — absolute offsets
    used: int
    dirty_tail: int | None


def _read_raw_index(path: Path, base_offset: int, entry: struct.Struct, offset_column: int) -> _RawIndex:
    """The entries of an offset index (``offset_column`` 0) or a time index (1): that column holds
    the offset relative to ``base_offset``, made absolute here."""
    data = path.read_bytes()
    count = len(data) // entry.size
    entries = []
    used = count
    for i, (first, second) in enumerate(entry.iter_unpack(memoryview(data)[:count * entry.size])):
        rel = second if offset_column else first
        if i > 0 and rel == 0 and used == count:
            used = i
        entries.append((first, base_offset + rel) if offset_column else (base_offset + rel, second))
    return _RawIndex(len(data), entries, used, _first_nonzero(data, used * entry.size))


def _read_offset_index(path: Path, base_offset: int) -> _RawIndex:
    return _read_raw_index(path, base_offset, _OFFSET_ENTRY, 0)


def _read_time_index(path: Path, base_offset: int) -> _RawIndex:
    return _read_raw_index(path, base_offset, _TIME_ENTRY, 1)


def _first_nonzero(data: bytes, start: int) -> int | None:
    tail = data[start:]
    stripped = tail.lstrip(b"\0")
    return None if not stripped else start + len(tail) - len(stripped)


def _offset_index_sanity(path: Path, base_offset: int, raw: _RawIndex) -> str | None:
    """Kafka's ``OffsetIndex.sanityCheck`` over a file opened as Kafka opens it (entries = length / 8)."""
    if raw.entries and raw.entries[-1][0] < base_offset:
        return (f"Corrupt index found, index file ({path}) has non-zero size but the last offset is "
                f"{raw.entries[-1][0]} which is less than the base offset {base_offset}.")
    if raw.length % OFFSET_INDEX_ENTRY_SIZE != 0:
        return (f"Index file {path.name} is corrupt, found {raw.length} bytes which is neither positive "
                f"nor a multiple of {OFFSET_INDEX_ENTRY_SIZE}.")
    return None


def _time_index_sanity(path: Path, base_offset: int, raw: _RawIndex) -> str | None:
    """Kafka's ``TimeIndex.sanityCheck`` (last entry = the last ``length / 12`` slot, as Kafka reads it)."""
    if raw.entries:
        first_ts = raw.entries[0][0]
        last_ts, last_offset = raw.entries[-1]
        if last_ts < first_ts:
            return (f"Corrupt time index found, time index file ({path}) has non-zero size but the last "
                    f"timestamp is {last_ts} which is less than the first timestamp {first_ts}")
        if last_offset < base_offset:
            return (f"Corrupt time index found, time index file ({path}) has non-zero size but the last "
                    f"offset is {last_offset} which is less than the base offset {base_offset}")
    if raw.length % TIME_INDEX_ENTRY_SIZE != 0:
        return (f"Time index file {path.name} is corrupt, found {raw.length} bytes which is neither "
                f"positive nor a multiple of {TIME_INDEX_ENTRY_SIZE}.")
    return None


def _segment_file(path: Path, suffix: str) -> Path:
    return path.parent / (path.name.split(".", 1)[0] + suffix)


def _base_offset_of(path: Path) -> int:
    try:
        return offset_from_file_name(path.name)
    except KafkaLogError:
        raise KafkaLogError(f"{path}: the file name does not start with a segment offset") from None


# --- .log -----------------------------------------------------------------------------------------


def _batch_item(batch: RecordBatch, position: int) -> dict[str, Any]:
    item: dict[str, Any] = {}
    if batch.magic >= MAGIC_V2:
        item.update(
            baseOffset=batch.base_offset,
            lastOffset=batch.last_offset,
            count=batch.count_or_none,
            baseSequence=batch.base_sequence,
            lastSequence=batch.last_sequence,
            producerId=batch.producer_id,
            producerEpoch=batch.producer_epoch,
            partitionLeaderEpoch=batch.partition_leader_epoch,
            isTransactional=batch.is_transactional,
            isControl=batch.is_control,
            deleteHorizonMs=batch.delete_horizon_ms if batch.has_delete_horizon else None,
        )
    else:
        item.update(offset=batch.last_offset, lastOffset=batch.last_offset)
    try:
        codec = str(batch.compression_type)
    except KafkaLogError:
        codec = f"unknown({batch.attributes & 0x07})"
    item.update(
        position=position,
        timestampType=str(batch.timestamp_type),
        maxTimestamp=batch.max_timestamp,
        size=batch.size_in_bytes,
        magic=batch.magic,
        compresscodec=codec,
        crc=batch.checksum,
        isvalid=batch.is_valid(),
    )
    return item


def _record_items(batch: RecordBatch, options: DumpOptions) -> list[dict[str, Any]]:
    """Deep iteration of one batch (raises KafkaLogError when the batch cannot be decoded)."""
    records = list(batch.records())
    legacy = batch.legacy_messages() if batch.magic < MAGIC_V2 else None
    items = []
    for i, record in enumerate(records):
        item: dict[str, Any] = {
            "offset": record.offset,
            "timestampType": str(batch.timestamp_type),
            "timestamp": record.timestamp,
            "keySize": -1 if record.key is None else len(record.key),
            "valueSize": -1 if record.value is None else len(record.value),
        }
        if batch.magic >= MAGIC_V2:
            item["sequence"] = record.sequence
            item["headerKeys"] = [h.key for h in record.headers]
        elif legacy is not None and i < len(legacy):
            item["isValid"] = legacy[i].is_valid()
            item["crc"] = legacy[i].crc
        if batch.is_control:
            control_type = parse_control_record_type(record.key)
            if control_type in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
                marker = EndTransactionMarker.deserialize(record)
                item["endTxnMarker"] = marker.control_type.name
                item["coordinatorEpoch"] = marker.coordinator_epoch
            else:
                type_id = struct.unpack_from(">h", record.key or b"\0\0\0\0", 2)[0]
                item["controlType"] = f"{control_type.name}({type_id})"
        elif options.print_data_log:
            item["key"] = _decode_text(record.key)
            item["payload"] = _decode_text(record.value)
        items.append(item)
    return items


def _dump_log(path: Path, options: DumpOptions, dump: FileDump) -> Iterator[dict[str, Any]]:
    with FileRecords.open(path, read_only=True) as whole:
        records = whole.slice(0, options.max_bytes)
        valid_bytes = 0
        last_offset = -1
        non_consecutive: list[tuple[int, int]] = []
        iterator = records.batches(load_full=options.deep)
        while True:
            try:
                batch = next(iterator)
            except StopIteration:
                break
            except KafkaLogError as e:
                dump.problems.append(Problem(path, str(e), position=valid_bytes))
                dump.errors.append(f"Stopped reading {path} at position {valid_bytes}: {e}")
                break
            item = _batch_item(batch, valid_bytes)
            if not item["isvalid"]:
                dump.problems.append(Problem(path, "batch CRC does not match its content",
                                             position=valid_bytes, offset=batch.offset))
            if options.deep:
                try:
                    record_items = _record_items(batch, options)
                except KafkaLogError as e:
                    record_items = []
                    item["error"] = str(e)
                    dump.problems.append(Problem(path, f"cannot read the records: {e}",
                                                 position=valid_bytes, offset=batch.offset))
                for record in record_items:
                    if last_offset != -1 and record["offset"] != last_offset + 1:
                        non_consecutive.append((last_offset, record["offset"]))
                    last_offset = record["offset"]
                item["records"] = record_items
            valid_bytes += batch.size_in_bytes
            yield item
        trailing = records.size_in_bytes - valid_bytes
        dump.summary["validBytes"] = valid_bytes
        dump.summary["trailingBytes"] = trailing
        dump.summary["nonConsecutiveOffsets"] = [list(p) for p in non_consecutive]
        if trailing > 0 and options.max_bytes == MAX_INT32:
            dump.messages.append(f"Found {trailing} invalid bytes at the end of {path.name}")
            if not any(p.position == valid_bytes for p in dump.problems):
                dump.problems.append(Problem(path, f"{trailing} invalid bytes at the end (torn write)",
                                             position=valid_bytes))
        if non_consecutive:
            dump.errors.append(f"Non-consecutive offsets in {path.resolve()}")
            dump.errors.extend(f"  {a} is followed by {b}" for a, b in non_consecutive)


# --- .index ---------------------------------------------------------------------------------------


def _first_batch_at(records: FileRecords, position: int, max_size: int) -> RecordBatch | None:
    if position < 0 or position > records.size_in_bytes:
        return None
    try:
        return next(records.slice(position, max_size).batches(), None)
    except KafkaLogError:
        return None


def _report_sanity(dump: FileDump, path: Path, failure: str | None) -> None:
    """What ``--index-sanity-check`` prints for an index: that it passed, or Kafka's failure."""
    if failure is None:
        dump.messages.append(f"{path} passed sanity check.")
    else:
        dump.problems.append(Problem(path, failure))
        dump.errors.append(failure)


def _report_pairs(dump: FileDump, key: str, fields: tuple[str, str], pairs: list[tuple[int, int]],
                  header: str, line: str) -> None:
    """One kind of index finding: the pairs under ``key`` in the JSON tail and, when there are any,
    Kafka's ``header`` and one ``line`` per pair on stderr."""
    dump.summary[key] = [dict(zip(fields, pair, strict=True)) for pair in pairs]
    if pairs:
        dump.errors.append(header)
        dump.errors.extend(line.format(*pair) for pair in pairs)


def _dump_index(path: Path, options: DumpOptions, dump: FileDump) -> Iterator[dict[str, Any]]:
    base_offset = _base_offset_of(path)
    log_path = _segment_file(path, LOG_FILE_SUFFIX)
    raw = _read_offset_index(path, base_offset)
    dump.summary["slots"] = len(raw.entries)
    if not raw.entries:
        dump.messages.append(f"{path} is empty.")
        return
    if options.index_sanity_check:
        _report_sanity(dump, path, _offset_index_sanity(path, base_offset, raw))
        return
    mismatches: list[tuple[int, int]] = []
    with FileRecords.open(log_path, read_only=True) as records:
        for i, (offset, position) in enumerate(raw.entries[:raw.used]):  # not the zero-filled tail
            batch = _first_batch_at(records, position, options.max_message_size)
            log_offset = -1 if batch is None else batch.last_offset
            if log_offset != offset:
                mismatches.append((offset, log_offset))
                dump.problems.append(Problem(
                    path, f"index offset {offset} points at position {position}, where the log has "
                    + ("no batch" if batch is None else f"a batch ending at offset {log_offset}"),
                    position=i * OFFSET_INDEX_ENTRY_SIZE, offset=offset))
            if not options.verify_index_only:
                yield {"offset": offset, "position": position}
    _report_pairs(dump, "mismatches", ("indexOffset", "logOffset"), mismatches,
                  f"Mismatches in :{path.resolve()}", "  Index offset: {}, log offset: {}")


# --- .timeindex -----------------------------------------------------------------------------------


def _lookup(entries: list[tuple[int, int]], used: int, target: int) -> int:
    """Offset-index lookup: position of the last entry with offset <= target, else 0."""
    position = 0
    for offset, pos in entries[:used]:
        if offset > target:
            break
        position = pos
    return position


def _dump_time_index(path: Path, options: DumpOptions, dump: FileDump) -> Iterator[dict[str, Any]]:
    base_offset = _base_offset_of(path)
    log_path = _segment_file(path, LOG_FILE_SUFFIX)
    index_path = _segment_file(path, INDEX_FILE_SUFFIX)
    raw = _read_time_index(path, base_offset)
    dump.summary["slots"] = len(raw.entries)
    if options.index_sanity_check:
        _report_sanity(dump, path, _time_index_sanity(path, base_offset, raw))
        return
    offset_index = (_read_offset_index(index_path, base_offset) if index_path.exists()
                    else _RawIndex(0, [], 0, None))
    mismatched: list[tuple[int, int]] = []
    out_of_order: list[tuple[int, int]] = []
    not_found: list[tuple[int, int]] = []
    prev_timestamp = NO_TIMESTAMP
    with FileRecords.open(log_path, read_only=True) as records:
        for i, (timestamp, offset) in enumerate(raw.entries[:raw.used]):
            where = i * TIME_INDEX_ENTRY_SIZE
            position = _lookup(offset_index.entries, offset_index.used, offset)
            found = None
            try:
                if 0 <= position <= records.size_in_bytes:
                    for batch in records.slice(position, MAX_INT32).batches():
                        if batch.last_offset >= offset:
                            found = batch
                            break
            except KafkaLogError:
                found = None
            if found is None or found.last_offset != offset:
                log_offset = -1 if found is None else found.last_offset
                not_found.append((offset, log_offset))
                dump.problems.append(Problem(path, f"indexed offset {offset} is not the last offset of a "
                                             f"batch (found {log_offset})", position=where, offset=offset))
            else:
                try:
                    max_timestamp = max((r.timestamp for r in found.records()), default=NO_TIMESTAMP)
                except KafkaLogError as e:
                    max_timestamp = NO_TIMESTAMP
                    dump.problems.append(Problem(
                        path, f"cannot read the batch ending at offset {offset}: {e}",
                        position=where, offset=offset))
                if max_timestamp != timestamp:
                    mismatched.append((timestamp, max_timestamp))
                    dump.problems.append(Problem(
                        path, f"index timestamp {timestamp} differs from the batch's max timestamp "
                        f"{max_timestamp}", position=where, offset=offset))
                if prev_timestamp >= timestamp:
                    out_of_order.append((timestamp, prev_timestamp))
                    dump.problems.append(Problem(path, f"index timestamp {timestamp} does not follow the "
                                                 f"previous one {prev_timestamp}", position=where,
                                                 offset=offset))
            if not options.verify_index_only:
                yield {"timestamp": timestamp, "offset": offset}
            prev_timestamp = timestamp
    resolved = path.resolve()
    _report_pairs(dump, "timestampMismatches", ("indexTimestamp", "logTimestamp"), mismatched,
                  f"Found timestamp mismatch in :{resolved}", "  Index timestamp: {}, log timestamp: {}")
    _report_pairs(dump, "outOfOrderTimestamps", ("indexTimestamp", "previousIndexTimestamp"), out_of_order,
                  f"Found out of order timestamp in :{resolved}",
                  "  Index timestamp: {}, Previously indexed timestamp: {}")
    _report_pairs(dump, "offsetsNotFound", ("indexOffset", "logOffset"), not_found,
                  "The following indexed offsets are not found in the log.",
                  "Indexed offset: {}, found log offset: {}")


# --- .txnindex and .snapshot ----------------------------------------------------------------------


def _txn_entries(data: bytes) -> Iterator[tuple[int, int, AbortedTxn]]:
    """(position, version as Kafka reads it, entry) of every whole entry of a ``.txnindex``."""
    for position in range(0, len(data) - ABORTED_TXN_SIZE + 1, ABORTED_TXN_SIZE):
        yield position, AbortedTxn.read_version(data, position), AbortedTxn.from_bytes(data, position)


def _dump_txn_index(path: Path, options: DumpOptions, dump: FileDump) -> Iterator[dict[str, Any]]:
    data = path.read_bytes()
    for _, version, txn in _txn_entries(data):
        yield {
            "version": version,
            "producerId": txn.producer_id,
            "firstOffset": txn.first_offset,
            "lastOffset": txn.last_offset,
            "lastStableOffset": txn.last_stable_offset,
        }
    partial = len(data) % ABORTED_TXN_SIZE
    if partial:
        dump.problems.append(Problem(path, f"{partial} bytes after the last whole {ABORTED_TXN_SIZE}-byte "
                                     "entry", position=len(data) - partial))


def _dump_snapshot(path: Path, options: DumpOptions, dump: FileDump) -> Iterator[dict[str, Any]]:
    try:
        snapshot = ProducerSnapshot.read(path)
    except KafkaLogError as e:
        dump.problems.append(Problem(path, str(e)))
        dump.errors.append(str(e))
        return
    for e in snapshot.entries:
        yield {
            "producerId": e.producer_id,
            "producerEpoch": e.producer_epoch,
            "coordinatorEpoch": e.coordinator_epoch,
            "currentTxnFirstOffset": None if e.current_txn_first_offset < 0 else e.current_txn_first_offset,
            "lastTimestamp": e.timestamp,
            "firstSequence": _decrement_sequence(e.last_sequence, e.offset_delta),
            "lastSequence": e.last_sequence,
            "lastOffset": e.last_offset,
            "offsetDelta": e.offset_delta,
            "timestamp": e.timestamp,
        }


# --- entry points ---------------------------------------------------------------------------------

_KINDS: dict[str, tuple[str, str, Callable[[Path, DumpOptions, FileDump], Iterator[dict[str, Any]]]]] = {
    LOG_FILE_SUFFIX: ("log", "batches", _dump_log),
    INDEX_FILE_SUFFIX: ("index", "entries", _dump_index),
    TIME_INDEX_FILE_SUFFIX: ("timeindex", "entries", _dump_time_index),
    TXN_INDEX_FILE_SUFFIX: ("txnindex", "entries", _dump_txn_index),
    PRODUCER_SNAPSHOT_FILE_SUFFIX: ("snapshot", "producers", _dump_snapshot),
}


def dump_file(path: Path | str, options: DumpOptions | None = None) -> FileDump:
    """Prepare the dump of one file; raises ``KafkaLogError`` for an unknown suffix, ``OSError`` for a
    missing file. Work (and most errors found) happens while ``items`` is consumed."""
    path = Path(path)
    options = options or DumpOptions()
    suffix = path.name[path.name.rfind("."):] if "." in path.name else ""
    if suffix not in _KINDS:
        raise KafkaLogError(f"Ignoring unknown file {path}: not a .log, .index, .timeindex, .txnindex "
                            "or .snapshot file")
    if not path.is_file():
        raise FileNotFoundError(f"No such file: {path}")
    kind, list_key, producer = _KINDS[suffix]
    head: dict[str, Any] = {"file": str(path), "type": kind}
    if kind == "log":
        # Only the dump's header needs the base offset; a renamed .log can still be dumped.
        try:
            head["startOffset"] = offset_from_file_name(path.name)
        except KafkaLogError:
            head["startOffset"] = None
    elif kind in ("index", "timeindex"):
        # Both need the segment's .log; fail up front with the name of the missing file.
        log_path = _segment_file(path, LOG_FILE_SUFFIX)
        if not log_path.is_file() and not options.index_sanity_check:
            raise FileNotFoundError(f"Cannot check {path}: its log file {log_path} does not exist")
    dump = FileDump(path, kind, head, list_key, iter(()))
    dump.items = producer(path, options, dump)
    return dump


def _format_batch(item: dict[str, Any]) -> str:
    if "baseOffset" in item:
        head = (f"baseOffset: {item['baseOffset']} lastOffset: {item['lastOffset']} count: {item['count']} "
                f"baseSequence: {item['baseSequence']} lastSequence: {item['lastSequence']} "
                f"producerId: {item['producerId']} producerEpoch: {item['producerEpoch']} "
                f"partitionLeaderEpoch: {item['partitionLeaderEpoch']} "
                f"isTransactional: {_java_bool(item['isTransactional'])} "
                f"isControl: {_java_bool(item['isControl'])} "
                f"deleteHorizonMs: {_java_optional_long(item['deleteHorizonMs'])}")
    else:
        head = f"offset: {item['offset']}"
    return (f"{head} position: {item['position']} {item['timestampType']}: {item['maxTimestamp']} "
            f"size: {item['size']} magic: {item['magic']} compresscodec: {item['compresscodec']} "
            f"crc: {item['crc']} isvalid: {_java_bool(item['isvalid'])}")


def _format_record(record: dict[str, Any], options: DumpOptions) -> str:
    parts = []
    prefix = f"{RECORD_INDENT} "
    if not options.skip_record_metadata:
        text = (f"{prefix}offset: {record['offset']} {record['timestampType']}: {record['timestamp']} "
                f"keySize: {record['keySize']} valueSize: {record['valueSize']}")
        prefix = " "
        if "sequence" in record:
            text += f" sequence: {record['sequence']} headerKeys: [{','.join(record['headerKeys'])}]"
        if "isValid" in record:
            text += f" isValid: {_java_bool(record['isValid'])} crc: {record['crc']}"
        if "endTxnMarker" in record:
            text += f" endTxnMarker: {record['endTxnMarker']} coordinatorEpoch: {record['coordinatorEpoch']}"
        elif "controlType" in record:
            text += f" controlType: {record['controlType']}"
        parts.append(text)
    if "payload" in record:
        if record["key"] is not None:
            parts.append(f"{prefix}key: {record['key']}")
            prefix = " "
        if record["payload"] is not None:
            parts.append(f" payload: {record['payload']}")
    return "".join(parts)


def _format_item(dump: FileDump, item: dict[str, Any], options: DumpOptions) -> list[str]:
    kind = dump.kind
    if kind == "log":
        lines = [_format_batch(item)]
        lines.extend(_format_record(r, options) for r in item.get("records", ()))
        if "error" in item:
            lines.append(f"{RECORD_INDENT} error: {item['error']}")
        return lines
    if kind == "index":
        return [f"offset: {item['offset']} position: {item['position']}"]
    if kind == "timeindex":
        return [f"timestamp: {item['timestamp']} offset: {item['offset']}"]
    if kind == "txnindex":
        return [f"version: {item['version']} producerId: {item['producerId']} "
                f"firstOffset: {item['firstOffset']} lastOffset: {item['lastOffset']} "
                f"lastStableOffset: {item['lastStableOffset']}"]
    return [f"producerId: {item['producerId']} producerEpoch: {item['producerEpoch']} "
            f"coordinatorEpoch: {item['coordinatorEpoch']} "
            f"currentTxnFirstOffset: {_java_optional_long(item['currentTxnFirstOffset'])} "
            f"lastTimestamp: {item['lastTimestamp']} firstSequence: {item['firstSequence']} "
            f"lastSequence: {item['lastSequence']} lastOffset: {item['lastOffset']} "
            f"offsetDelta: {item['offsetDelta']} timestamp: {item['timestamp']}"]


def render_text(dump: FileDump, options: DumpOptions, out: IO[str], err: IO[str]) -> None:
    """Print a dump the way Kafka's DumpLogSegments does (findings on ``err``)."""
    out.write(f"Dumping {dump.path}\n")
    if dump.kind == "log":
        start = dump.head["startOffset"]
        out.write(f"Log starting offset: {'unknown' if start is None else start}\n")
    for item in dump.items:
        for line in _format_item(dump, item, options):
            out.write(line + "\n")
    for message in dump.messages:
        out.write(message + "\n")
    for line in dump.errors:
        err.write(line + "\n")


def write_json(dump: FileDump, out: IO[str]) -> None:
    """One JSON document (one line) for the file; items are streamed, never all held in memory."""
    head = json.dumps(dump.head, separators=(",", ":"))
    out.write(head[:-1] + f',"{dump.list_key}":[')
    first = True
    for item in dump.items:
        if not first:
            out.write(",")
        out.write(json.dumps(item, separators=(",", ":")))
        first = False
    tail = json.dumps(dump.tail(), separators=(",", ":"))
    out.write("]" + ("," + tail[1:] if tail != "{}" else "}") + "\n")


# --- verify ---------------------------------------------------------------------------------------


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


def _check_dirty_tail(path: Path, raw: _RawIndex, report: VerifyReport) -> None:
    if raw.dirty_tail is not None:
        report.problems.append(Problem(path, "non-zero bytes in the unused (preallocated) tail",
                                       position=raw.dirty_tail))


def _verify_offset_index(path: Path, base_offset: int, batches: list[_BatchInfo],
                         report: VerifyReport) -> None:
    raw = _read_offset_index(path, base_offset)
    failure = _offset_index_sanity(path, base_offset, raw)
    if failure is not None:
        report.problems.append(Problem(path, failure))
    _check_dirty_tail(path, raw, report)
    by_position = {b.position: i for i, b in enumerate(batches)}
    by_last_offset = {b.last_offset: i for i, b in enumerate(batches)}
    prev: tuple[int, int] | None = None
    for i, (offset, position) in enumerate(raw.entries[:raw.used]):
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
    raw = _read_time_index(path, base_offset)
    failure = _time_index_sanity(path, base_offset, raw)
    if failure is not None and raw.used == len(raw.entries):
        report.problems.append(Problem(path, failure))
    elif raw.length % TIME_INDEX_ENTRY_SIZE:
        report.problems.append(Problem(path, f"length {raw.length} is not a multiple of "
                                       f"{TIME_INDEX_ENTRY_SIZE}"))
    _check_dirty_tail(path, raw, report)
    base_offsets = [b.base_offset for b in batches]
    running_max: list[int] = []
    current = NO_TIMESTAMP
    for b in batches:
        if b.valid:
            current = max(current, b.max_timestamp)
        running_max.append(current)
    prev: tuple[int, int] | None = None
    for i, (timestamp, offset) in enumerate(raw.entries[:raw.used]):
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
        index_path = _segment_file(log_path, INDEX_FILE_SUFFIX)
        if index_path.exists():
            _verify_offset_index(index_path, base_offset, batches, report)
        time_path = _segment_file(log_path, TIME_INDEX_FILE_SUFFIX)
        if time_path.exists():
            _verify_time_index(time_path, base_offset, batches, report)
        txn_path = _segment_file(log_path, TXN_INDEX_FILE_SUFFIX)
        if txn_path.exists():
            data = txn_path.read_bytes()
            if len(data) % ABORTED_TXN_SIZE:
                problems.append(Problem(txn_path, f"length {len(data)} is not a multiple of "
                                        f"{ABORTED_TXN_SIZE}"))
            for position, version, txn in _txn_entries(data):
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
