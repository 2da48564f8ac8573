"""The ``kafkalog`` command line: a thin adapter over ``kafkalog.storage`` and ``kafkalog.tools``.

Every command parses its arguments, calls the storage layer and formats the answer. Any failure the
user can act on is one line on stderr (``kafkalog: error: ...``) and a non-zero exit status; argparse
mistakes exit with 2. Long operations draw a progress line on stderr, only when it is a terminal.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import importlib
import json
import logging
import os
import sys
import time as _time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, NoReturn

from kafkalog.clock import SYSTEM_TIME
from kafkalog.errors import (
    InvalidConfigError,
    KafkaLogError,
    OffsetOutOfRangeError,
    UnknownTopicOrPartitionError,
)
from kafkalog.records.memory import MemoryRecords
from kafkalog.records.types import (
    MAGIC_V0,
    MAGIC_V2,
    NO_TIMESTAMP,
    CompressionType,
    Header,
    Record,
    SimpleRecord,
)

__all__ = ["main"]

PROG = "kafkalog"
DEFAULT_BATCH_SIZE = 100
_CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


class CliError(Exception):
    """A user error detected by the CLI itself (printed as one line, exit status 1)."""


class UsageError(CliError):
    """Arguments that do not go together, found after parsing (exit status 2, as argparse's)."""


# --- small helpers ---------------------------------------------------------------------------------


class Progress:
    """A self-overwriting status line on stderr, drawn only when stderr is a terminal."""

    def __init__(self, label: str, stream: IO[str] | None = None) -> None:
        self._stream = stream if stream is not None else sys.stderr
        self._enabled = self._stream.isatty()
        self._label = label
        self._last = 0.0
        self._drawn = False

    def update(self, done: int, total: int | None = None, unit: str = "") -> None:
        if not self._enabled:
            return
        now = _time.monotonic()
        if now - self._last < 0.1 and (total is None or done < total):
            return
        self._last = now
        text = f"{self._label}: {done}{unit}" if total is None else (
            f"{self._label}: {done}/{total}{unit} ({100 * done // max(total, 1)}%)")
        self._stream.write("\r\x1b[2K" + text)
        self._stream.flush()
        self._drawn = True

    def clear(self) -> None:
        if self._drawn:
            self._stream.write("\r\x1b[2K")
            self._stream.flush()
            self._drawn = False


def _one_line(message: object) -> str:
    return " ".join(str(message).split())


def _data_dir(text: str) -> Path:
    return Path(text)


def _existing_data_dir(path: Path) -> Path:
    if not path.exists():
        raise CliError(f"data directory {path} does not exist")
    if not path.is_dir():
        raise CliError(f"data directory {path} is not a directory")
    return path


def _parse_configs(items: Sequence[str] | None) -> dict[str, str]:
    configs: dict[str, str] = {}
    for item in items or ():
        name, eq, value = item.partition("=")
        if not eq or not name.strip():
            raise CliError(f"--config {item!r} is not of the form key=value")
        configs[name.strip()] = value
    return configs


def _print_json(obj: Any, out: IO[str] | None = None) -> None:
    out = out or sys.stdout
    # Plain UTF-8 where the terminal or pipe takes it; \u escapes (still the same JSON) elsewhere.
    utf8 = (getattr(out, "encoding", None) or "").lower().replace("-", "") == "utf8"
    out.write(json.dumps(obj, separators=(",", ":"), ensure_ascii=not utf8) + "\n")


def _report_cuts(reports: Sequence[Any]) -> None:
    """Data that recovery cut is always reported: one line per partition on stderr, with or
    without -v (the storage layer's own WARNING goes to logging, which -v shows as well)."""
    for report in reports:
        print(f"{PROG}: warning: {_one_line(report.describe())}", file=sys.stderr)


def _open_manager(path: Path, *, read_only: bool, **kwargs: Any) -> Any:
    from kafkalog.storage.log_manager import LogManager

    progress = Progress("loading partitions")
    try:
        lm = LogManager(path, read_only=read_only, progress=progress.update, **kwargs)
    finally:
        progress.clear()
    _report_cuts(lm.recovery_reports())
    return lm


# --- topics ----------------------------------------------------------------------------------------


def cmd_topics_create(args: argparse.Namespace) -> int:
    with _open_manager(args.data_dir, read_only=False) as lm:
        lm.create_topic(args.topic, args.partitions, _parse_configs(args.config))
    print(f"Created topic {args.topic}.")
    return 0


def cmd_topics_list(args: argparse.Namespace) -> int:
    with _open_manager(_existing_data_dir(args.data_dir), read_only=True) as lm:
        topics = lm.topics()
    if args.json:
        _print_json(topics)
    else:
        for topic in topics:
            print(topic)
    return 0


def cmd_topics_describe(args: argparse.Namespace) -> int:
    with _open_manager(_existing_data_dir(args.data_dir), read_only=True) as lm:
        topics = [args.topic] if args.topic else lm.topics()
        descriptions = [lm.describe_topic(t) for t in topics]
    for d in descriptions:
        if args.json:
            _print_json(d.to_json())
            continue
        configs = ",".join(f"{k}={v}" for k, v in sorted(d.config_overrides.items()))
        print(f"Topic: {d.topic}\tTopicId: {d.topic_id or '-'}\tPartitionCount: {len(d.partitions)}\t"
              f"ReplicationFactor: 1\tConfigs: {configs}")
        for p in d.partitions:
            print(f"\tTopic: {d.topic}\tPartition: {p.partition}\tLogStartOffset: {p.log_start_offset}\t"
                  f"LogEndOffset: {p.log_end_offset}\tSize: {p.size_in_bytes}\tSegments: {p.segment_count}")
    return 0


def cmd_topics_delete(args: argparse.Namespace) -> int:
    with _open_manager(_existing_data_dir(args.data_dir), read_only=False) as lm:
        lm.delete_topic(args.topic)
    print(f"Deleted topic {args.topic}.")
    return 0


def cmd_topics_alter(args: argparse.Namespace) -> int:
    configs: dict[str, str | None] = dict(_parse_configs(args.config))
    for name in args.delete_config or ():
        configs[name] = None
    if not configs and args.partitions is None:
        raise CliError("topics alter needs --config, --delete-config or --partitions")
    with _open_manager(_existing_data_dir(args.data_dir), read_only=False) as lm:
        lm.partitions(args.topic)  # unknown topic: fail before changing anything
        if configs:
            lm.alter_topic_config(args.topic, configs)
        if args.partitions is not None:
            lm.add_partitions(args.topic, args.partitions)
    print(f"Altered topic {args.topic}.")
    return 0


# --- produce ---------------------------------------------------------------------------------------


@dataclass(slots=True)
class _PartitionStats:
    first_offset: int | None = None
    last_offset: int | None = None
    records: int = 0
    batches: int = 0


@dataclass(slots=True)
class _ProduceState:
    pending: dict[int, list[SimpleRecord]] = field(default_factory=dict)
    sticky_pending: set[int] = field(default_factory=set)  # partitions holding sticky (keyless) records
    stats: dict[int, _PartitionStats] = field(default_factory=dict)
    records: int = 0
    batches: int = 0


def _field_bytes(obj: dict[str, Any], name: str, line_no: int, binary: bool) -> bytes | None:
    value = obj.get(name)
    if value is None:
        return None
    if isinstance(value, dict | list):
        # A JSON object or array is stored as its compact JSON text (with or without --binary).
        return json.dumps(value, separators=(",", ":")).encode("utf-8")
    if not isinstance(value, str):
        raise CliError(f"line {line_no}: \"{name}\" must be a string, a JSON object or array, or null, "
                       f"got {type(value).__name__}")
    return _text_to_bytes(value, f"line {line_no}: \"{name}\"", binary)


def _text_to_bytes(value: object, what: str, binary: bool) -> bytes:
    if not isinstance(value, str):
        raise CliError(f"{what} must be a string or null, got {type(value).__name__}")
    if binary:
        try:
            return base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise CliError(f"{what} is not valid base64 (--binary)") from None
    return value.encode("utf-8", errors="replace")  # a lone surrogate becomes "?", as in Java


def _parse_produce_line(line: str, line_no: int, args: argparse.Namespace, now: int
                        ) -> tuple[SimpleRecord, int | None]:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as e:
        raise CliError(f"line {line_no}: invalid JSON ({e.msg} at column {e.colno})") from None
    if not isinstance(obj, dict):
        raise CliError(f"line {line_no}: expected a JSON object, got {type(obj).__name__}")
    unknown = set(obj) - {"key", "value", "headers", "timestamp", "partition"}
    if unknown:
        raise CliError(f"line {line_no}: unknown field(s) {', '.join(sorted(unknown))}")
    key = _field_bytes(obj, "key", line_no, args.binary)
    value = _field_bytes(obj, "value", line_no, args.binary)
    headers: list[Header] = []
    raw_headers = obj.get("headers")
    if raw_headers is not None:
        if not isinstance(raw_headers, list):
            raise CliError(f"line {line_no}: \"headers\" must be a list of [key, value] pairs")
        for pair in raw_headers:
            if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str)):
                raise CliError(f"line {line_no}: each header must be [key, value] with a string key")
            header_value = None if pair[1] is None else _text_to_bytes(
                pair[1], f"line {line_no}: header {pair[0]!r}", args.binary)
            headers.append(Header(pair[0], header_value))
        if headers and args.magic < MAGIC_V2:
            raise CliError(f"line {line_no}: record headers need --magic 2 (got --magic {args.magic})")
    timestamp = obj.get("timestamp", now)
    if isinstance(timestamp, bool) or not isinstance(timestamp, int) or not -1 <= timestamp < 2**63:
        raise CliError(f"line {line_no}: \"timestamp\" must be an integer number of ms >= 0 (or -1)")
    if args.magic == MAGIC_V0:
        timestamp = NO_TIMESTAMP  # magic 0 has no timestamps
    partition = obj.get("partition")
    if partition is not None and (isinstance(partition, bool) or not isinstance(partition, int)):
        raise CliError(f"line {line_no}: \"partition\" must be an integer")
    return SimpleRecord(value, key, timestamp, tuple(headers)), partition


def _append_batch(appender: Any, args: argparse.Namespace, codec: CompressionType, partition: int,
                  state: _ProduceState) -> None:
    records = state.pending.pop(partition, [])
    if not records:
        return
    built = MemoryRecords.with_records(args.magic, codec, records)
    info = appender.log(partition).append_as_leader(built)
    stats = state.stats.setdefault(partition, _PartitionStats())
    if stats.first_offset is None:
        # Legacy appends may not know their first offset; each record got one offset.
        known = info.first_offset >= 0
        stats.first_offset = info.first_offset if known else info.last_offset - len(records) + 1
    stats.last_offset = info.last_offset
    stats.records += len(records)
    stats.batches += 1
    state.records += len(records)
    state.batches += 1


def cmd_produce(args: argparse.Namespace) -> int:
    from kafkalog.storage.appender import PartitionAppender, list_partitions
    from kafkalog.storage.partitioner import StickyPartitioner, partition_for_key

    if args.batch_size < 1:
        raise CliError("--batch-size must be at least 1")
    codec = CompressionType.for_name(args.compression)
    if codec is CompressionType.ZSTD and args.magic < MAGIC_V2:
        raise CliError("zstd compression needs --magic 2")
    data_dir = _existing_data_dir(args.data_dir)
    state = _ProduceState()
    progress = Progress(f"producing to {args.topic}")
    partitions = list_partitions(data_dir, args.topic)
    count = len(partitions)
    if not partitions:
        raise UnknownTopicOrPartitionError(f"Topic {args.topic!r} does not exist in {data_dir}")
    if args.partition is not None and args.partition not in partitions:
        raise UnknownTopicOrPartitionError(
            f"Partition {args.partition} of topic {args.topic!r} does not exist (it has {count})")
    failure: Exception | None = None
    # The storage layer's append protocol, as Spark writers use it: refused while a LogManager or
    # broker owns the directory, other appenders to these partitions wait for this run.
    with PartitionAppender(data_dir, args.topic, partitions) as appender:
        sticky = StickyPartitioner(count)
        line_no = 0
        try:
            for line_no, raw_line in enumerate(sys.stdin.buffer, start=1):
                try:
                    line = raw_line.decode("utf-8")
                except UnicodeDecodeError:
                    raise CliError(f"line {line_no}: not valid UTF-8 (use --binary with base64 for bytes)"
                                   ) from None
                if not line.strip():
                    continue
                record, partition = _parse_produce_line(line, line_no, args, SYSTEM_TIME.milliseconds())
                if partition is None:
                    partition = args.partition
                uses_sticky = False
                if partition is None:
                    if record.key is not None:
                        partition = partition_for_key(record.key, count)
                    else:
                        partition = sticky.partition(None)
                        uses_sticky = True
                elif partition not in partitions:
                    raise CliError(f"line {line_no}: partition {partition} does not exist in topic "
                                   f"{args.topic!r} (it has {count})")
                pending = state.pending.setdefault(partition, [])
                pending.append(record)
                if uses_sticky:
                    state.sticky_pending.add(partition)
                if len(pending) >= args.batch_size:
                    _append_batch(appender, args, codec, partition, state)
                    if partition in state.sticky_pending:
                        # Kafka's sticky partitioner moves on when the sticky batch is complete.
                        state.sticky_pending.discard(partition)
                        sticky.on_batch_complete()
                progress.update(line_no, unit=" lines")
            for partition in sorted(state.pending):
                _append_batch(appender, args, codec, partition, state)
        except (CliError, KafkaLogError) as e:
            # What was appended is whole: the logs are closed cleanly before the error is reported.
            failure = e
        finally:
            progress.clear()
            _report_cuts(appender.recovery_reports)
    if failure is not None:
        unsent = sum(len(v) for v in state.pending.values())
        raise CliError(f"{_one_line(failure)}; {state.records} records from earlier lines were appended, "
                       f"{unsent} pending records were not written")
    _print_json({
        "topic": args.topic,
        "records": state.records,
        "batches": state.batches,
        "partitions": [
            {"partition": p, "firstOffset": s.first_offset, "lastOffset": s.last_offset,
             "records": s.records, "batches": s.batches}
            for p, s in sorted(state.stats.items())
        ],
    })
    return 0


# --- consume ---------------------------------------------------------------------------------------


def _render_bytes(data: bytes | None, binary: bool) -> str | None:
    if data is None:
        return None
    if binary:
        return base64.b64encode(data).decode("ascii")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise CliError("a key, value or header is not valid UTF-8; use --binary to print base64") from None


def _visible_records(log: Any, start: int, read_committed: bool) -> Iterator[Record]:
    """Records a consumer sees from ``start``: control records hidden; with read_committed only up to
    the last stable offset and without aborted transactions (the Log applies Kafka's rules)."""
    from kafkalog.storage.log import FetchIsolation

    isolation = FetchIsolation.TXN_COMMITTED if read_committed else FetchIsolation.HIGH_WATERMARK
    return log.records(start, isolation=isolation)


def cmd_consume(args: argparse.Namespace) -> int:
    if args.max_records is not None and args.max_records < 0:
        raise CliError("--max-records must not be negative")
    read_committed = args.isolation_level == "read_committed"
    printed = 0
    out = sys.stdout
    with _open_manager(_existing_data_dir(args.data_dir), read_only=True) as lm:
        partitions = [args.partition] if args.partition is not None else lm.partitions(args.topic)
        logs = [lm.get_log(args.topic, p) for p in partitions]
        for log in logs:
            if args.max_records is not None and printed >= args.max_records:
                break
            if args.offset is not None:
                if not log.log_start_offset <= args.offset <= log.log_end_offset:
                    raise OffsetOutOfRangeError(
                        f"Offset {args.offset} is out of range for partition {args.topic}-{log.partition}: "
                        f"[{log.log_start_offset}, {log.log_end_offset}]")
                start = args.offset
            elif args.timestamp is not None:
                found = log.offset_for_timestamp(args.timestamp)
                start = log.log_end_offset if found is None else found.offset
            else:
                start = log.log_start_offset
            for record in _visible_records(log, start, read_committed):
                _print_json({
                    "topic": args.topic,
                    "partition": log.partition,
                    "offset": record.offset,
                    "timestamp": record.timestamp,
                    "timestampType": str(record.timestamp_type),
                    "key": _render_bytes(record.key, args.binary),
                    "value": _render_bytes(record.value, args.binary),
                    "headers": [[h.key, _render_bytes(h.value, args.binary)] for h in record.headers],
                }, out)
                printed += 1
                if args.max_records is not None and printed >= args.max_records:
                    break
    return 0


# --- dump-log, verify, recover, retention ------------------------------------------------------


_STRING_DECODER = "kafka.serializer.StringDecoder"


def cmd_dump_log(args: argparse.Namespace) -> int:
    from kafkalog.tools.dump_log import DumpOptions, dump_file, is_dumpable
    from kafkalog.tools.dump_log_render import render_text, write_json

    files = [*args.files, *(name for given in args.kafka_files for name in given.split(",") if name)]
    if not files:
        raise UsageError("dump-log: no files given (FILE ... or --files FILE,FILE as kafka-dump-log.sh takes "
                         "them)")
    for decoder in (args.key_decoder_class, args.value_decoder_class):
        if decoder is not None and decoder != _STRING_DECODER:
            raise UsageError(f"dump-log: decoder class {decoder!r} is a Java class; kafkalog shows keys and "
                             f"values as {_STRING_DECODER} does (UTF-8 text)")
    options = DumpOptions(
        deep_iteration=args.deep_iteration,
        print_data_log=(args.print_data_log or args.key_decoder_class is not None
                        or args.value_decoder_class is not None),
        index_sanity_check=args.index_sanity_check,
        verify_index_only=args.verify_index_only,
        skip_record_metadata=args.skip_record_metadata,
        max_message_size=args.max_message_size,
        max_bytes=args.max_bytes,
        offsets_decoder=args.offsets_decoder,
        transaction_log_decoder=args.transaction_log_decoder,
    )
    failed = False
    found_problems = False
    for name in files:
        if not is_dumpable(name):
            # As kafka-dump-log.sh: named, passed over on stderr, not a failure.
            if not args.json:
                print(f"Dumping {name}", flush=True)
            print(f"Ignoring unknown file {name}", file=sys.stderr)
            continue
        try:
            dump = dump_file(name, options)
            if args.json:
                write_json(dump, sys.stdout)
            else:
                render_text(dump, options, sys.stdout, sys.stderr)
            found_problems = found_problems or bool(dump.problems)
            failed = failed or dump.unreadable
        except BrokenPipeError:
            raise
        except (KafkaLogError, OSError) as e:
            sys.stdout.flush()
            print(f"{PROG}: error: {_one_line(e)}", file=sys.stderr)
            failed = True
    # Like Kafka, a dump that reports findings still succeeds; the explicit checks do not.
    checking = args.verify_index_only or args.index_sanity_check
    return 1 if failed or (checking and found_problems) else 0


def cmd_verify(args: argparse.Namespace) -> int:
    from kafkalog.tools.verify import verify_data_dir

    progress = Progress("verifying")
    try:
        report = verify_data_dir(_existing_data_dir(args.data_dir),
                                 lambda done, total: progress.update(done, total, " bytes"))
    finally:
        progress.clear()
    if args.json:
        _print_json(report.to_json())
    else:
        for problem in report.problems:
            print(f"PROBLEM: {problem}")
        summary = (f"{report.partitions} partitions, {report.segments} segments, {report.batches} batches, "
                   f"{report.records} records, {report.bytes} bytes checked")
        print(f"OK: {summary}" if report.ok else f"FAILED: {len(report.problems)} problems; {summary}")
    if not report.ok:
        print(f"{PROG}: error: verify found {len(report.problems)} problems in {args.data_dir}",
              file=sys.stderr)
        return 1
    return 0


def cmd_recover(args: argparse.Namespace) -> int:
    from kafkalog.tools.repair import recover_and_verify

    verifying = Progress("verifying")
    recovering = Progress("recovering partitions")
    try:
        repair = recover_and_verify(
            _existing_data_dir(args.data_dir), full=args.full,
            verify_progress=lambda done, total: verifying.update(done, total, " bytes"),
            recover_progress=recovering.update)
    finally:
        verifying.clear()
        recovering.clear()
    results = repair.partitions
    _report_cuts([r.report for r in results if r.report is not None and r.report.cuts])
    if args.json:
        _print_json([r.to_json() for r in results])
    else:
        if repair.found and not args.full:
            print(f"verify found {len(repair.found)} problems: recovered every segment (as with --full)")
        for r in results:
            changes = []
            if r.truncated_bytes:
                changes.append(f"truncated {r.truncated_bytes} bytes")
            if r.deleted_segments:
                changes.append(f"deleted segments {', '.join(r.deleted_segments)}")
            if r.rebuilt_indexes:
                changes.append(f"rebuilt {', '.join(r.rebuilt_indexes)}")
            print(f"{r.topic}-{r.partition}: log end offset {r.log_end_offset}, "
                  + ("; ".join(changes) if changes else "nothing to repair"))
        print(f"Recovered {len(results)} partitions in {args.data_dir}; "
              f"{sum(r.changed for r in results)} changed.")
        for problem in repair.remaining:
            print(f"NOT REPAIRED: {problem}")
    if repair.remaining:
        print(f"{PROG}: error: recovery cannot repair {len(repair.remaining)} problems that verify still "
              f"finds in {args.data_dir}", file=sys.stderr)
        return 1
    return 0


def cmd_retention(args: argparse.Namespace) -> int:
    with _open_manager(_existing_data_dir(args.data_dir), read_only=False) as lm:
        # compact,delete topics too: a broker's log cleaner (on by default) gives them their retention
        deleted = lm.cleanup_logs(compact_delete=True)
    print(f"Deleted {deleted} segments.")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    # The demo is its own package with its own extra; it is imported only when asked for.
    try:
        module = importlib.import_module("kafkalog.demo.main")
    except ModuleNotFoundError as e:
        if e.name is None or not e.name.startswith("kafkalog.demo"):
            raise CliError(f"the demo needs the Spark and demo extras ({e.name} is missing): "
                           "pip install 'kafkalog[demo]'") from None
        raise CliError(f"the demo is not available in this installation ({e.name} is missing)") from None
    result = module.main(list(args.demo_args))
    return int(result or 0)


# --- argument parsing ------------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (exit status 2, as argparse does)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {_one_line(message)}\n")


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid integer: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {text}")
    return value


def _positive_int(text: str) -> int:
    value = _non_negative_int(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("kafkalog")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Apache Kafka's log storage, on the command line.")
    parser.add_argument("--version", action="version", version=f"{PROG} {_package_version()}",
                        help="print the installed kafkalog version and exit")
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="log storage events on stderr (-v info, -vv debug)")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.required = True

    def data_dir_arg(p: argparse.ArgumentParser) -> None:
        p.add_argument("--data-dir", required=True, type=_data_dir, metavar="DIR",
                       help="the data directory (a Kafka log.dirs entry)")

    topics = commands.add_parser("topics", help="create, list, describe, alter or delete topics")
    topic_commands = topics.add_subparsers(dest="topics_command", metavar="ACTION", parser_class=_Parser)
    topic_commands.required = True
    p = topic_commands.add_parser("create", help="create a topic")
    data_dir_arg(p)
    p.add_argument("--topic", required=True, help="the topic to create")
    p.add_argument("--partitions", type=_positive_int, default=1, help="number of partitions (default 1)")
    p.add_argument("--config", action="append", metavar="KEY=VALUE", help="a topic config override")
    p.set_defaults(func=cmd_topics_create)
    p = topic_commands.add_parser("list", help="list the topics")
    data_dir_arg(p)
    p.add_argument("--json", action="store_true", help="print a JSON array")
    p.set_defaults(func=cmd_topics_list)
    p = topic_commands.add_parser("describe", help="describe a topic (all topics without --topic)")
    data_dir_arg(p)
    p.add_argument("--topic", help="the topic to describe (default: every topic)")
    p.add_argument("--json", action="store_true", help="one JSON document per topic")
    p.set_defaults(func=cmd_topics_describe)
    p = topic_commands.add_parser("delete", help="delete a topic and its data")
    data_dir_arg(p)
    p.add_argument("--topic", required=True, help="the topic to delete")
    p.set_defaults(func=cmd_topics_delete)
    p = topic_commands.add_parser("alter", help="change config overrides or add partitions")
    data_dir_arg(p)
    p.add_argument("--topic", required=True, help="the topic to change")
    p.add_argument("--config", action="append", metavar="KEY=VALUE", help="set a config override")
    p.add_argument("--delete-config", action="append", metavar="KEY", help="remove a config override")
    p.add_argument("--partitions", type=_positive_int, help="grow the topic to this many partitions")
    p.set_defaults(func=cmd_topics_alter)

    p = commands.add_parser("produce", help="append JSON lines from stdin to a topic",
                            description='Each stdin line: {"key": str|object|array|null, '
                            '"value": str|object|array|null, "headers": [[k, v], ...], "timestamp": ms, '
                            '"partition": p}, every field optional. A JSON object or array is stored as '
                            'its compact JSON text.')
    data_dir_arg(p)
    p.add_argument("--topic", required=True, help="the topic to append to")
    p.add_argument("--partition", type=_non_negative_int, help="partition for lines that name none")
    p.add_argument("--compression", choices=_CODECS, default="none",
                   help="producer-side codec of the batches (default none; the topic's compression.type "
                   "still applies)")
    p.add_argument("--magic", type=int, choices=(0, 1, 2), default=2, help="record format version")
    p.add_argument("--batch-size", type=_positive_int, default=DEFAULT_BATCH_SIZE,
                   help=f"records per batch and partition (default {DEFAULT_BATCH_SIZE})")
    p.add_argument("--binary", action="store_true", help="keys, values and header values are base64")
    p.set_defaults(func=cmd_produce)

    p = commands.add_parser("consume", help="print a topic's records as JSON lines (read-only)")
    data_dir_arg(p)
    p.add_argument("--topic", required=True, help="the topic to read")
    p.add_argument("--partition", type=_non_negative_int, help="read only this partition (default: all)")
    start = p.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true",
                       help="start at the log start offset (the default)")
    start.add_argument("--offset", type=_non_negative_int, help="start at this offset")
    start.add_argument("--timestamp", type=int, metavar="MS", help="start at the first record at or after MS")
    p.add_argument("--max-records", type=_non_negative_int, metavar="N", help="stop after N records")
    p.add_argument("--binary", action="store_true", help="print keys, values and header values as base64")
    p.add_argument("--isolation-level", choices=("read_uncommitted", "read_committed"),
                   default="read_uncommitted",
                   help="read_committed hides aborted transactions and stops at the last stable offset "
                   "(default read_uncommitted)")
    p.set_defaults(func=cmd_consume)

    p = commands.add_parser("dump-log", help="dump segment files like kafka-dump-log.sh",
                            description="Dump .log, .index, .timeindex, .txnindex and .snapshot files. "
                            "Findings go to stderr; with --verify-index-only or --index-sanity-check "
                            "they also make the exit status 1, and so does a file that cannot be read "
                            "through (where kafka-dump-log.sh stops with an exception).")
    p.add_argument("files", nargs="*", metavar="FILE", help="segment, index or snapshot files")
    p.add_argument("--files", dest="kafka_files", action="append", default=[], metavar="FILE,FILE",
                   help="the same, comma-separated, as kafka-dump-log.sh takes them")
    for which in ("key", "value"):
        p.add_argument(f"--{which}-decoder-class", metavar="CLASS",
                       help=f"as kafka-dump-log.sh: {_STRING_DECODER} (the default: {which}s as UTF-8 "
                       "text); giving it implies --print-data-log")
    p.add_argument("--deep-iteration", action="store_true", help="print every record")
    p.add_argument("--print-data-log", action="store_true", help="print keys and values (implies deep)")
    p.add_argument("--index-sanity-check", action="store_true", help="only run the index sanity check")
    p.add_argument("--verify-index-only", action="store_true", help="check index entries, print none")
    p.add_argument("--skip-record-metadata", action="store_true",
                   help="with --print-data-log: only keys and values, not each record's offset, "
                   "timestamp and sizes")
    p.add_argument("--max-message-size", type=_non_negative_int, default=5 * 1024 * 1024, metavar="BYTES",
                   help="largest batch read where an index entry points (default 5 MiB, as "
                   "kafka-dump-log.sh)")
    p.add_argument("--max-bytes", type=_positive_int, default=2**31 - 1, metavar="BYTES",
                   help="read at most this many bytes of each .log file")
    p.add_argument("--offsets-decoder", action="store_true",
                   help="decode __consumer_offsets records (committed offsets, group metadata) as "
                   "kafka-dump-log.sh --offsets-decoder does (implies --print-data-log)")
    p.add_argument("--transaction-log-decoder", action="store_true",
                   help="decode __transaction_state records (transactional ids' states) as "
                   "kafka-dump-log.sh --transaction-log-decoder does (implies --print-data-log)")
    p.add_argument("--json", action="store_true", help="one JSON document per file")
    p.set_defaults(func=cmd_dump_log)

    p = commands.add_parser("verify", help="check every segment and index of a data directory (read-only)")
    data_dir_arg(p)
    p.add_argument("--json", action="store_true", help="print the report as one JSON document")
    p.set_defaults(func=cmd_verify)

    p = commands.add_parser("recover", help="run Kafka's crash recovery over a data directory")
    data_dir_arg(p)
    p.add_argument("--full", action="store_true", help="recover every segment, not just those after the "
                   "recovery point")
    p.add_argument("--json", action="store_true", help="print a JSON array, one object per partition")
    p.set_defaults(func=cmd_recover)

    p = commands.add_parser("retention", help="delete segments beyond the topics' retention (compact,delete "
                            "topics included, as a broker's log cleaner does; compact-only topics never)")
    data_dir_arg(p)
    p.set_defaults(func=cmd_retention)

    from kafkalog.broker.serve import add_serve_command
    add_serve_command(commands)
    from kafkalog.cli_compact import add_compact_parser
    add_compact_parser(commands, data_dir_arg)
    from kafkalog.cli_scram import add_scram_parser
    add_scram_parser(commands, data_dir_arg)

    p = commands.add_parser("demo", help="run the Spark pipeline demo")
    p.add_argument("demo_args", nargs=argparse.REMAINDER, metavar="ARGS",
                   help="arguments for the demo (kafkalog demo --help lists them)")
    p.set_defaults(func=cmd_demo)
    return parser


def _split_demo_args(argv: list[str]) -> tuple[list[str], list[str] | None]:
    """``kafkalog [-v...] demo ARGS...`` -> (argv up to ``demo``, ARGS): argparse's REMAINDER does not
    capture option-like words (``--events 5``) after a sub-command, so they are split off first."""
    for i, word in enumerate(argv):
        if not word.startswith("-"):
            return (argv[: i + 1], argv[i + 1:]) if word == "demo" else (argv, None)
    return argv, None


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    argv, demo_args = _split_demo_args(list(sys.argv[1:] if argv is None else argv))
    args = parser.parse_args(argv)
    if demo_args is not None:
        args.demo_args = demo_args
    level = {0: logging.ERROR, 1: logging.INFO}.get(args.verbose, logging.DEBUG)
    logging.basicConfig(level=level, format=f"{PROG}: %(levelname)s: %(message)s")
    if args.verbose == 0:
        # Keep the storage layer's warnings (e.g. what recovery truncated) out of normal output.
        logging.getLogger("kafkalog").setLevel(logging.CRITICAL)
    try:
        return args.func(args)
    except (CliError, KafkaLogError, InvalidConfigError, OSError) as e:
        if isinstance(e, BrokenPipeError):
            return _broken_pipe()
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            return _broken_pipe()
        print(f"{PROG}: error: {_one_line(e)}", file=sys.stderr)
        return 2 if isinstance(e, UsageError) else 1
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except Exception as e:
        # A bug, not a user error: still one line, with the traceback only when asked for (-vv).
        if args.verbose >= 2:
            raise
        print(f"{PROG}: internal error: {type(e).__name__}: {_one_line(e)} (run with -vv for details)",
              file=sys.stderr)
        return 70


def _broken_pipe() -> int:
    # The reader went away (e.g. `| head`): stop quietly, and keep Python from complaining at exit.
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except OSError:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
