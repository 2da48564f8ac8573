"""``kafkalog dump-log``: Kafka's ``kafka-dump-log.sh`` (``DumpLogSegments``) over one file at a time.

Every file is turned into a ``FileDump`` — a head, a stream of items (batches, index entries, ...)
and a tail with the findings — which ``dump_log_render`` prints the way Kafka does or writes as one
JSON document. The checks are Kafka's: offset-index entries against the batch at their position,
time-index entries against the batch's max record timestamp, non-consecutive offsets, invalid bytes
at the end of a ``.log``. Beyond Kafka's, an index check also reports what ``verify`` reports about
the same file: a failed sanity check and non-zero bytes after the last entry (a damaged entry that
ends the entries early would otherwise pass unseen).

Index files are read as stored (``storage.index.read_offset_index_file``) rather than opened as an
``OffsetIndex``: a read-only index counts only its plausible prefix (right for readers), which would
hide exactly the damage a dump has to show.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafkalog.errors import KafkaLogError
from kafkalog.records.batch import RecordBatch
from kafkalog.records.control import EndTransactionMarker, parse_control_record_type
from kafkalog.records.types import MAGIC_V2, MAX_INT32, NO_TIMESTAMP, ControlRecordType
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
    offset_from_file_name,
    sibling_segment_file,
)
from kafkalog.storage.producer_snapshot import ProducerSnapshot
from kafkalog.storage.producer_state import decrement_sequence
from kafkalog.storage.txn_index import ABORTED_TXN_SIZE, AbortedTxn, aborted_txn_slots
from kafkalog.tools.problem import Problem

__all__ = ["DEFAULT_MAX_MESSAGE_SIZE", "DumpOptions", "FileDump", "dump_file", "is_dumpable"]

DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024


def _decode_text(data: bytes | None) -> str | None:
    # Kafka's default StringDecoder: UTF-8, malformed input replaced.
    return None if data is None else data.decode("utf-8", errors="replace")


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
    offsets_decoder: bool = False  # decode __consumer_offsets keys and values (implies --print-data-log)
    transaction_log_decoder: bool = False  # decode __transaction_state records (implies --print-data-log)

    @property
    def deep(self) -> bool:
        return (self.deep_iteration or self.print_data_log or self.offsets_decoder
                or self.transaction_log_decoder)


@dataclass(slots=True)
class FileDump:
    """What a dump of one file says: ``head`` fields, ``items`` (consume once), then ``tail()`` with
    the findings, which is complete only after ``items`` is exhausted.

    ``messages`` are informational lines Kafka prints on stdout (e.g. "is empty", "passed sanity
    check"); ``errors`` lines go to stderr in text mode; ``problems`` make the dump fail.
    ``unreadable`` says the file could not be read through where Kafka's tool stops with an
    exception (a corrupt batch header, records that do not decode, an unknown transaction index
    version): the command then exits 1, as Kafka's does, after reporting everything else.
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
    unreadable: bool = False

    def tail(self) -> dict[str, Any]:
        return {
            **self.summary,
            "messages": list(self.messages),
            "problems": [p.to_json() for p in self.problems],
        }


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
        elif options.offsets_decoder:
            from kafkalog.tools.offsets_decoder import decode_offsets_record

            item.update(decode_offsets_record(record.key, record.value))
        elif options.transaction_log_decoder:
            from kafkalog.tools.transaction_log_decoder import decode_transaction_log_record

            item.update(decode_transaction_log_record(record.key, record.value))
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
                dump.unreadable = True
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
                    dump.unreadable = True
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


def _report_damage(dump: FileDump, raw: IndexFileSlots) -> None:
    """The findings about the index file itself that ``verify`` reports too (not Kafka's dump)."""
    for message, position in raw.damage():
        problem = Problem(raw.path, message, position=position)
        dump.problems.append(problem)
        dump.errors.append(str(problem))


def _dump_index(path: Path, options: DumpOptions, dump: FileDump) -> Iterator[dict[str, Any]]:
    base_offset = _base_offset_of(path)
    log_path = sibling_segment_file(path, LOG_FILE_SUFFIX)
    raw = read_offset_index_file(path, base_offset)
    dump.summary["slots"] = raw.slots
    if options.index_sanity_check and raw.slots:
        _report_sanity(dump, path, raw.sanity_failure())
        return
    if not raw.slots:
        dump.messages.append(f"{path} is empty.")
        _report_damage(dump, raw)
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
    _report_damage(dump, raw)


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
    log_path = sibling_segment_file(path, LOG_FILE_SUFFIX)
    index_path = sibling_segment_file(path, INDEX_FILE_SUFFIX)
    raw = read_time_index_file(path, base_offset)
    dump.summary["slots"] = raw.slots
    if options.index_sanity_check:
        _report_sanity(dump, path, raw.sanity_failure())
        return
    offset_index = (read_offset_index_file(index_path, base_offset) if index_path.exists()
                    else IndexFileSlots(index_path, base_offset, False, 0, [], 0, None, 0, None))
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
    _report_damage(dump, raw)


# --- .txnindex and .snapshot ----------------------------------------------------------------------


def _dump_txn_index(path: Path, options: DumpOptions, dump: FileDump) -> Iterator[dict[str, Any]]:
    data = path.read_bytes()
    for position, version, txn in aborted_txn_slots(data):
        if version > AbortedTxn.CURRENT_VERSION:
            # Kafka's TransactionIndex refuses the entry (and its tool stops there).
            message = (f"Unexpected aborted transaction version {version} in transaction index {path}, "
                       f"current version is {AbortedTxn.CURRENT_VERSION}")
            dump.problems.append(Problem(path, message, position=position))
            dump.errors.append(message)
            dump.unreadable = True
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
    for entry in snapshot.entries:
        item: dict[str, Any] = {
            "producerId": entry.producer_id,
            "producerEpoch": entry.producer_epoch,
            "coordinatorEpoch": entry.coordinator_epoch,
            "currentTxnFirstOffset": (None if entry.current_txn_first_offset < 0
                                      else entry.current_txn_first_offset),
            "lastTimestamp": entry.timestamp,
        }
        # An entry with a negative last offset carries no batch (Kafka's readSnapshot keeps none,
        # and its tool prints none).
        if entry.last_offset >= 0:
            item.update({
                "firstSequence": decrement_sequence(entry.last_sequence, entry.offset_delta),
                "lastSequence": entry.last_sequence,
                "lastOffset": entry.last_offset,
                "offsetDelta": entry.offset_delta,
                "timestamp": entry.timestamp,
            })
        yield item


# --- entry points ---------------------------------------------------------------------------------

_KINDS: dict[str, tuple[str, str, Callable[[Path, DumpOptions, FileDump], Iterator[dict[str, Any]]]]] = {
    LOG_FILE_SUFFIX: ("log", "batches", _dump_log),
    INDEX_FILE_SUFFIX: ("index", "entries", _dump_index),
    TIME_INDEX_FILE_SUFFIX: ("timeindex", "entries", _dump_time_index),
    TXN_INDEX_FILE_SUFFIX: ("txnindex", "entries", _dump_txn_index),
    PRODUCER_SNAPSHOT_FILE_SUFFIX: ("snapshot", "producers", _dump_snapshot),
}


def is_dumpable(path: Path | str) -> bool:
    """Whether ``dump_file`` knows the file's kind (by its suffix, as Kafka's tool decides)."""
    name = Path(path).name
    return "." in name and name[name.rfind("."):] in _KINDS


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
        log_path = sibling_segment_file(path, LOG_FILE_SUFFIX)
        if not log_path.is_file() and not options.index_sanity_check:
            raise FileNotFoundError(f"Cannot check {path}: its log file {log_path} does not exist")
    dump = FileDump(path, kind, head, list_key, iter(()))
    dump.items = producer(path, options, dump)
    return dump
