"""``kafkalog compact``: run log compaction over a data directory now (what Kafka's log cleaner does
in the background), with a progress line on a terminal and a summary of what was removed."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["add_compact_parser", "cmd_compact"]


def _size(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of bytes") from None
    if value < 1024 * 1024:
        raise argparse.ArgumentTypeError("must be at least 1048576 (1 MiB), as Kafka requires")
    return value


def cmd_compact(args: argparse.Namespace) -> int:
    # (kafkalog.cli may run as __main__: its helpers are used, but its CliError is not raised here)
    from kafkalog.cli import Progress, _open_manager, _print_json
    from kafkalog.errors import KafkaStorageError
    from kafkalog.storage.cleaner.cleaner_config import CleanerConfig
    from kafkalog.storage.cleaner.compact import compact_logs

    config = CleanerConfig(dedupe_buffer_size=args.dedupe_buffer_size)
    progress = Progress("compacting")

    def report(done: int, total: int, rounds: int) -> None:
        progress.update(done, total, f" partitions (round {rounds + 1})" if rounds else " partitions")

    if not args.data_dir.is_dir():
        raise KafkaStorageError(f"data directory {args.data_dir} does not exist or is not a directory")
    try:
        with _open_manager(args.data_dir, read_only=False) as lm:
            results = compact_logs(lm, args.topic, config=config, progress=report)
    finally:
        progress.clear()
    if args.json:
        _print_json([r.to_json() for r in results])
        return 0
    out = sys.stdout
    for r in results:
        s = r.stats
        out.write(f"{r.topic}-{r.partition}: {r.rounds} round(s), segments {r.segments_before} -> "
                  f"{r.segments_after}, bytes {r.bytes_before} -> {r.bytes_after}, records read "
                  f"{s.messages_read}, kept {s.messages_written}, removed {s.records_removed} "
                  f"({s.superseded_removed} superseded, {s.tombstones_removed} tombstones, "
                  f"{s.aborted_removed} aborted, {s.invalid_removed} keyless, {s.markers_removed} markers)\n")
        if r.log_end_offset > r.active_base_offset:
            # What a newcomer asks after compacting a fresh topic: why nothing went.
            out.write(f"  offsets {r.active_base_offset}..{r.log_end_offset - 1} are in the active segment, "
                      "which is never cleaned until an append rolls it (segment.bytes, segment.ms)\n")
    before = sum(r.bytes_before for r in results)
    after = sum(r.bytes_after for r in results)
    removed = sum(r.stats.records_removed for r in results)
    out.write(f"Compacted {len(results)} partition(s) in {args.data_dir}: {before} -> {after} bytes, "
              f"{removed} records removed.\n")
    return 0


def add_compact_parser(commands: Any, data_dir_arg: Callable[[argparse.ArgumentParser], None]) -> None:
    p = commands.add_parser("compact", help="compact the cleanup.policy=compact topics now")
    data_dir_arg(p)
    p.add_argument("--topic", help="only this topic (default: every compacted topic)")
    p.add_argument("--dedupe-buffer-size", type=_size, default=128 * 1024 * 1024, metavar="BYTES",
                   help="memory of the key -> offset map (log.cleaner.dedupe.buffer.size, default 128 MiB); "
                        "a log with more keys than fit is cleaned in several rounds")
    p.add_argument("--json", action="store_true", help="print a JSON array, one object per partition")
    p.set_defaults(func=cmd_compact)


