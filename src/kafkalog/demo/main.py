"""``kafkalog demo`` (also ``python -m kafkalog.demo``): start a local Spark session and run the
pipeline."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from kafkalog.demo.pipeline import check_demo_dir, run
from kafkalog.demo.settings import DEFAULT_DATA_DIR, DEFAULT_EVENTS
from kafkalog.errors import KafkaLogError

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kafkalog demo",
        description="Generate page views into Kafka-format topics, run Spark batch and streaming jobs "
                    "over them with format('kafkalog'), and print what they found.")
    parser.add_argument("--data-dir", default=DEFAULT_DATA_DIR, metavar="DIR",
                        help=f"demo directory, wiped at every run (default: {DEFAULT_DATA_DIR})")
    parser.add_argument("--events", type=int, default=DEFAULT_EVENTS, metavar="N",
                        help=f"page views in the initial load (default: {DEFAULT_EVENTS:,}); "
                             "an eighth as many are appended later")
    parser.add_argument("--out", metavar="DIR", help="where the chart goes (default: DATA_DIR/output)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.events < 1:
        print(f"kafkalog demo: error: --events must be at least 1, got {args.events}", file=sys.stderr)
        return 2
    try:
        check_demo_dir(Path(args.data_dir))  # before Spark's start-up, not after it
    except KafkaLogError as e:
        print(f"kafkalog demo: error: {e}", file=sys.stderr)
        return 1
    print("kafkalog demo: page views -> Kafka-format topics -> Spark batch and streaming jobs")
    print("Starting Spark (local[2] on 127.0.0.1, no UI; about 15 s)...", flush=True)
    t0 = time.perf_counter()
    try:
        from kafkalog.spark.session import get_session

        spark = get_session(app_name="kafkalog-demo", master="local[2]")
    except KafkaLogError as e:
        print(f"kafkalog demo: error: {e}", file=sys.stderr)
        return 1
    startup = time.perf_counter() - t0
    try:
        run(spark, args.data_dir, events=args.events, out_dir=args.out)
    except KafkaLogError as e:
        print(f"kafkalog demo: error: {e}", file=sys.stderr)
        return 1
    finally:
        spark.stop()
    total = time.perf_counter() - t0
    print(f"\nDone in {total:.0f} s (Spark start-up {startup:.0f} s).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
