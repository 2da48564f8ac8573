"""Run every benchmark (`make bench`) and print its ratios.

Each benchmark module exposes ``run() -> list[dict]``; every row carries a ``ratio`` against a reference
measured in the same run (raw ``os.write``, kafka-python's codec, Spark's Parquet reader ...), because the
machine is shared and absolute rates are noisy. ``--only records,storage`` picks modules.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODULES = ["bench_records", "bench_storage", "bench_compact", "bench_spark", "bench_broker", "bench_groups"]


def _format_row(row: dict) -> str:
    parts = []
    for key, value in row.items():
        if isinstance(value, float):
            value = f"{value:,.3f}" if abs(value) < 100 else f"{value:,.0f}"
        parts.append(f"{key}={value}")
    return "  " + "  ".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated subset, e.g. records,storage,groups")
    parser.add_argument("--json", type=Path, help="also write all rows to this JSON file")
    args = parser.parse_args(argv)
    wanted = [f"bench_{name.strip()}" for name in args.only.split(",") if name.strip()] or MODULES
    sys.path.insert(0, str(HERE))
    results: dict[str, list[dict]] = {}
    for name in wanted:
        if not (HERE / f"{name}.py").exists():
            print(f"{name}: not present, skipped")
            continue
        module = importlib.import_module(name)
        started = time.perf_counter()
        print(f"== {name}", flush=True)
        rows = module.run()
        for row in rows:
            print(_format_row(row), flush=True)
        print(f"   ({time.perf_counter() - started:.1f} s)")
        results[name] = rows
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
