"""The broker benchmark's load generator: librdkafka in a process of its own.

``rdkafka_performance`` (librdkafka's own tool) is built from the example source Debian's
``librdkafka-dev`` ships, into a temporary directory, by ``build_rdkafka_performance``; the two
librdkafka-internal headers it includes are replaced by a small shim written here. When it cannot be
built (no package, no compiler), ``python benchmarks/rdkafka_load.py`` does the same runs with
confluent-kafka's Producer/Consumer (librdkafka too, driven from Python) and prints one JSON line.

Modes of the fallback script: ``produce`` (N messages of S bytes, acks, linger.ms=5, to partition 0 or
spread over all partitions), ``consume`` (from the beginning of the given partitions), ``latency``
(a fixed rate, per-message delivery latency percentiles).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import time
from pathlib import Path

EXAMPLE_SOURCE = Path("/usr/share/doc/librdkafka-dev/examples/rdkafka_performance.c")
LIBRDKAFKA_INCLUDE = Path("/usr/include/librdkafka")

# Stand-ins for librdkafka's internal rd.h / rdtime.h: only what rdkafka_performance.c uses.
_SHIM = """#pragma once
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>
typedef int64_t rd_ts_t;
static inline rd_ts_t rd_clock(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (rd_ts_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}
#define rd_snprintf snprintf
#define RD_MAX(a, b) ((a) > (b) ? (a) : (b))
#define RD_MIN(a, b) ((a) < (b) ? (a) : (b))
"""


def build_rdkafka_performance(build_dir: Path) -> tuple[Path | None, str]:
    """(the built tool, "") or (None, why it could not be built)."""
    if not EXAMPLE_SOURCE.exists():
        return None, f"{EXAMPLE_SOURCE} missing (apt-get install librdkafka-dev)"
    compiler = shutil.which("gcc") or shutil.which("cc")
    if compiler is None:
        return None, "no C compiler"
    (build_dir / "src").mkdir(parents=True, exist_ok=True)
    (build_dir / "examples").mkdir(exist_ok=True)
    (build_dir / "src" / "rd.h").write_text(_SHIM)
    (build_dir / "src" / "rdtime.h").write_text('#include "rd.h"\n')
    source = build_dir / "examples" / EXAMPLE_SOURCE.name
    shutil.copyfile(EXAMPLE_SOURCE, source)
    tool = build_dir / "rdkafka_performance"
    result = subprocess.run(
        [
            compiler,
            "-O2",
            "-o",
            str(tool),
            str(source),
            f"-I{build_dir / 'src'}",
            f"-I{LIBRDKAFKA_INCLUDE}",
            "-lrdkafka",
            "-lpthread",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if result.returncode != 0:
        return None, f"build failed: {result.stderr.strip()[:300]}"
    return tool, ""


# --- the confluent-kafka fallback (runs in its own process) --------------------------------------


def _produce(args: argparse.Namespace) -> dict:
    import confluent_kafka as ck

    producer = ck.Producer(
        {
            "bootstrap.servers": args.bootstrap,
            "acks": args.acks,
            "linger.ms": 5,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    payload = b"x" * args.size
    latencies: list[float] = []
    errors = []

    def delivered(err, _msg, sent=None):
        if err is not None:
            errors.append(err)
        elif sent is not None:
            latencies.append(time.perf_counter() - sent)

    interval = 1 / args.rate if args.rate else 0
    start = time.perf_counter()
    for i in range(args.count):
        if interval:
            target = start + i * interval
            while time.perf_counter() < target:
                producer.poll(0)
            sent = time.perf_counter()
            callback = (lambda s: lambda e, m: delivered(e, m, s))(sent)
        else:
            callback = delivered
        kwargs = {"partition": 0} if args.partitions == 1 else {}
        while True:
            try:
                producer.produce(args.topic, payload, on_delivery=callback, **kwargs)
                break
            except BufferError:
                producer.poll(0.001)
        producer.poll(0)
    remaining = producer.flush(120)
    elapsed = time.perf_counter() - start
    result = {"msgs": args.count - remaining - len(errors), "elapsed_s": elapsed, "errors": len(errors)}
    if latencies:
        latencies.sort()
        result["p50_ms"] = latencies[len(latencies) // 2] * 1000
        result["p99_ms"] = latencies[int(len(latencies) * 0.99)] * 1000
    return result


def _consume(args: argparse.Namespace) -> dict:
    import confluent_kafka as ck

    consumer = ck.Consumer(
        {
            "bootstrap.servers": args.bootstrap,
            "group.id": "bench",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 10,
        }
    )
    consumer.assign([ck.TopicPartition(args.topic, p, 0) for p in range(args.partitions)])
    got = 0
    start = time.perf_counter()
    deadline = start + 120
    while got < args.count and time.perf_counter() < deadline:
        for m in consumer.consume(10_000, 1.0):
            if m.error() is None:
                got += 1
    elapsed = time.perf_counter() - start
    consumer.close()
    return {"msgs": got, "elapsed_s": elapsed, "errors": 0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["produce", "consume", "latency"])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--count", type=int, default=300_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--acks", default="1")
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--rate", type=int, default=0)
    args = parser.parse_args()
    result = _consume(args) if args.mode == "consume" else _produce(args)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
