"""Everything the demo prints, in one place, so the pipeline reads as the pipeline only."""

from __future__ import annotations

import datetime as dt
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, TextIO

from kafkalog.demo.events import CHECKOUT_DONE
from kafkalog.demo.settings import (
    APPEND_PERIOD_MS,
    BATCH_PERIOD_MS,
    BY_PAGE_TOPIC,
    CODEC,
    MINUTE_MS,
    PRODUCER_BATCH_BYTES,
    SESSION_GAP,
    SESSIONS_TOPIC,
    START_MS,
    TOP_N,
    TOP_PAGES_TOPIC,
    TOPIC,
    WINDOW,
)

if TYPE_CHECKING:
    from kafkalog.demo.pipeline import DemoResult


class Timer:
    def __init__(self, into: dict[str, float]) -> None:
        self.into = into

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.into[name] = self.into.get(name, 0.0) + time.perf_counter() - t0


def _clock(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%H:%M")


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    if n < 1024 * 1024:
        return f"{n / 1024:.1f} KB"
    return f"{n / (1024 * 1024):.1f} MB"


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _duration(seconds: float) -> str:
    m, s = divmod(round(seconds), 60)
    return f"{m}m{s:02d}s"


class Report:
    """Everything the demo prints, in one place, so ``run`` reads as the pipeline only."""

    def __init__(self, out: TextIO) -> None:
        self.out = out

    def line(self, text: str = "") -> None:
        print(text, file=self.out, flush=True)

    def table(self, headers: Sequence[str], rows: Sequence[Sequence[object]], indent: int = 4,
              left: Sequence[int] = (0,)) -> None:
        cells = [[str(c) for c in headers], *[[str(c) for c in row] for row in rows]]
        widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
        for n, row in enumerate(cells):
            # Text columns (``left``) left-aligned, numbers right-aligned.
            parts = [c.ljust(w) if i in left else c.rjust(w)
                     for i, (c, w) in enumerate(zip(row, widths, strict=True))]
            self.line(" " * indent + "  ".join(parts).rstrip())
            if n == 0:
                self.line(" " * indent + "  ".join("-" * w for w in widths))

    def step(self, n: int, title: str) -> None:
        self.line()
        self.line(f"[{n}/5] {title}")

    def produced(self, r: DemoResult, users: int) -> None:
        first, last = r.initial_events[0].timestamp, r.initial_events[-1].timestamp
        span = f"{_clock(first)}-{_clock(last)} UTC on 2024-03-04"
        self.line(f"    {len(r.initial_events):,} events from {users:,} users, {span}, keyed by user id")
        self.line(f"    (murmur2 picks the partition); {r.produced_batches:,} {CODEC} batches of <= "
                  f"{PRODUCER_BATCH_BYTES // 1024} KiB, each appended with Log.append_as_leader:")
        self.table(["partition", "records", "offsets", "segments", "size"], [
            (p.partition, f"{p.log_end_offset - p.log_start_offset:,}",
             f"{p.log_start_offset}..{p.log_end_offset - 1}", p.segment_count, _size(p.size_in_bytes))
            for p in r.partitions])

    def batch_job(self, r: DemoResult) -> None:
        total = sum(r.spark_rows_per_partition.values())
        per = ", ".join(f"p{p}: {n:,}" for p, n in r.spark_rows_per_partition.items())
        self.line(f"    Spark read {total:,} rows ({per}); JSON values parsed with from_json")
        self.line()
        self.line(f"    Top pages, {_clock(START_MS)}-{_clock(START_MS + BATCH_PERIOD_MS)} UTC:")
        self.table(["page", "views", "unique users", "avg time on page"],
                   [(p, f"{v:,}", f"{u:,}", f"{s:.1f} s") for p, v, u, s in r.top_pages])
        windows: Counter[int] = Counter()
        for start, _, views, _, _ in r.views_per_window:
            windows[start] += views
        busiest = sorted(windows, key=lambda w: (-windows[w], w))[:3]
        self.line()
        self.line(f"    Busiest {WINDOW.replace(' minutes', '-minute')} windows and their top {TOP_N} pages "
                  f"({len(windows)} windows in all):")
        rows = []
        for w in sorted(busiest):
            tops = [f"{page} ({views:,})" for start, _, page, views in r.top_per_window if start == w]
            rows.append((f"{_clock(w)}-{_clock(w + 15 * MINUTE_MS)}", f"{windows[w]:,}", ", ".join(tops)))
        self.table(["window", "views", f"top {TOP_N} (views)"], rows, left=(0, 2))
        s = r.session_stats
        self.line()
        self.line(f"    Sessions (a session ends after {SESSION_GAP} without a view): {int(s['sessions']):,} "
                  f"sessions, {s['avg_views']:.2f} views")
        self.line(f"    each on average, median length {_duration(s['median_duration_s'])}; bounce rate "
                  f"{_pct(s['bounce_rate'])} (one view only), conversion {_pct(s['conversion_rate'])} "
                  f"(reached {CHECKOUT_DONE}):")
        self.table(["source", "sessions", "views/session", "bounce rate", "conversion"],
                   [(src, f"{n:,}", f"{v:.2f}", _pct(b), _pct(c))
                    for src, n, v, b, c in r.sessions_by_source])

    def written(self, r: DemoResult) -> None:
        n_windows = len({start for start, *_ in r.views_per_window})
        self.line(f"    {TOP_PAGES_TOPIC}: {r.written[TOP_PAGES_TOPIC]:,} records (top {TOP_N} of "
                  f"{n_windows} windows; key = page, value = JSON, timestamp = window start)")
        self.line(f"    {SESSIONS_TOPIC}: {r.written[SESSIONS_TOPIC]:,} records (one per session; "
                  "key = user id, value = JSON, timestamp = session start)")

    def streamed(self, r: DemoResult, before: dict[int, int], after: dict[int, int]) -> None:
        self.line(f"    run 1 (new checkpoint, starts at earliest): {r.stream_runs[0]:,} rows read; "
                  f"{BY_PAGE_TOPIC} holds {r.by_page_records[0]:,} records")
        self.line(f"    appended {len(r.appended_events):,} events ({_clock(START_MS + BATCH_PERIOD_MS)}-"
                  f"{_clock(START_MS + BATCH_PERIOD_MS + APPEND_PERIOD_MS)} UTC) to {TOPIC} through the "
                  "storage engine; end offsets")
        self.line("    " + ", ".join(f"p{p} {before[p]:,} -> {after[p]:,}" for p in sorted(after)))
        self.line(f"    run 2 (same checkpoint): {r.stream_runs[1]:,} rows read; {BY_PAGE_TOPIC} holds "
                  f"{r.by_page_records[1]:,} records")
        verdict = "exactly the appended events" if r.stream_runs[1] == len(r.appended_events) else "MISMATCH"
        self.line(f"    run 2 read {verdict}; a batch read from the old end offsets finds "
                  f"{r.appended_read_back:,} rows too")

    def finish(self, r: DemoResult) -> None:
        self.line(f"    chart: {r.chart}")
        self.line(f"    data:  {r.kafka_dir}  (try: kafkalog topics describe --data-dir {r.kafka_dir})")
        self.line(f"           kafkalog consume --data-dir {r.kafka_dir} --topic {TOP_PAGES_TOPIC} "
                  "--max-records 3")
        self.line()
        self.line("    timings:")
        self.table(["step", "seconds"], [(name, f"{secs:.1f}") for name, secs in r.timings.items()], indent=6)
