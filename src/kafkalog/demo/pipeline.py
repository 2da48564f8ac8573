"""The demo pipeline: ``run()`` calls every step in order (see the package docstring for the story).

Everything lives under one directory (``demo-data/`` by default) that a rerun wipes, so a rerun
prints the same numbers. ``run(spark, data_dir)`` works with any SparkSession (the tests pass theirs).
"""

from __future__ import annotations

import json
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from kafkalog.demo.chart import save_chart, views_per_bucket
from kafkalog.demo.events import PageView, generate_pageviews, users_for
from kafkalog.demo.jobs import (
    parse_pageviews,
    read_topic,
    run_by_page_stream,
    session_records,
    session_stats,
    sessionize,
    sessions_by_source,
    top_pages,
    top_pages_per_window,
    top_pages_records,
    views_per_window,
    write_topic,
)
from kafkalog.demo.produce import create_topics, describe, end_offsets, produce
from kafkalog.demo.report import Report, Timer
from kafkalog.demo.settings import (
    APPEND_PERIOD_MS,
    BATCH_PERIOD_MS,
    BY_PAGE_TOPIC,
    DEFAULT_EVENTS,
    MARKER_FILE,
    MINUTE_MS,
    NEWSLETTER_AT_MS,
    SEED,
    SESSIONS_TOPIC,
    START_MS,
    TOP_PAGES_TOPIC,
    TOPIC,
    DemoError,
)
from kafkalog.storage.log_manager import PartitionDescription

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["DemoResult", "prepare_demo_dir", "run"]


@dataclass(slots=True)
class DemoResult:
    """What the run found: the printed summary's numbers, for tests and for callers."""

    kafka_dir: Path
    chart: Path
    initial_events: list[PageView]
    appended_events: list[PageView]
    produced_batches: int = 0
    partitions: list[PartitionDescription] = field(default_factory=list)
    spark_rows_per_partition: dict[int, int] = field(default_factory=dict)
    # (window start ms, page, views, unique users, total duration ms), sorted
    views_per_window: list[tuple[int, str, int, int, int]] = field(default_factory=list)
    # (window start ms, rank, page, views), sorted
    top_per_window: list[tuple[int, int, str, int]] = field(default_factory=list)
    top_pages: list[tuple[str, int, int, float]] = field(default_factory=list)
    session_stats: dict[str, float] = field(default_factory=dict)
    sessions_by_source: list[tuple[str, int, float, float, float]] = field(default_factory=list)
    written: dict[str, int] = field(default_factory=dict)  # topic -> records in it
    stream_runs: list[int] = field(default_factory=list)  # rows read by each streaming run
    by_page_records: list[int] = field(default_factory=list)  # records in BY_PAGE_TOPIC after each run
    appended_read_back: int = 0
    timings: dict[str, float] = field(default_factory=dict)


def check_demo_dir(data_dir: Path) -> None:
    """DemoError unless ``data_dir`` may be the demo's: absent, empty, or made by the demo (it carries
    MARKER_FILE) — the demo never deletes anything it did not create. Changes nothing."""
    if not data_dir.exists():
        return
    if not data_dir.is_dir():
        raise DemoError(f"{data_dir} is not a directory")
    if not (data_dir / MARKER_FILE).is_file() and any(data_dir.iterdir()):
        raise DemoError(f"{data_dir} exists and was not made by the demo (no {MARKER_FILE} in it); "
                        "pass a new or empty --data-dir")


def prepare_demo_dir(data_dir: Path) -> None:
    """Make ``data_dir`` an empty demo directory (``check_demo_dir`` says which may be used)."""
    check_demo_dir(data_dir)
    if (data_dir / MARKER_FILE).is_file():
        for child in data_dir.iterdir():
            if child.name == MARKER_FILE:
                continue
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()
        return
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / MARKER_FILE).write_text("made by `kafkalog demo`; wiped by the next run\n", encoding="utf-8")


def run(
    spark: SparkSession,
    data_dir: Path | str,
    *,
    events: int = DEFAULT_EVENTS,
    append_events: int | None = None,
    out_dir: Path | str | None = None,
    seed: int = SEED,
    out: TextIO | None = None,
) -> DemoResult:
    """The whole pipeline in ``data_dir`` (wiped first), using ``spark``; prints to ``out``.

    ``events`` page views make the initial load, ``append_events`` (default an eighth of it) arrive
    later; the chart goes to ``out_dir`` (default ``data_dir/output``).
    """
    if events < 1:
        raise DemoError(f"--events must be at least 1, got {events}")
    stream = sys.stdout if out is None else out
    data_dir = Path(data_dir)
    out_path = data_dir / "output" if out_dir is None else Path(out_dir)
    # An eighth: the half hour after 12:00 then carries on at the rate the morning ended with.
    append_events = max(1, events // 8) if append_events is None else append_events
    report = Report(stream)
    prepare_demo_dir(data_dir)
    out_path.mkdir(parents=True, exist_ok=True)
    kafka_dir = data_dir / "kafka"  # a Kafka log.dirs entry: only topic-partition directories in it
    # Spark gets absolute paths: its Python workers need not share our working directory.
    kafka_path = str(kafka_dir.resolve())
    checkpoint = str((data_dir / "checkpoints" / BY_PAGE_TOPIC).resolve())
    users = users_for(events)
    result = DemoResult(kafka_dir=kafka_dir, chart=out_path / "pageviews-per-5min.png",
                        initial_events=[], appended_events=[])
    timer = Timer(result.timings)

    # 1 -------------------------------------------------------------------------------------------
    report.step(1, f"Produce {events:,} page views into topic '{TOPIC}' through the storage engine")
    with timer("generate events"):
        result.initial_events = generate_pageviews(
            events, users=users, seed=seed, newsletter_at_ms=NEWSLETTER_AT_MS)
    with timer("produce (LogManager + Log.append_as_leader)"):
        create_topics(kafka_dir)
        result.produced_batches = produce(kafka_dir, result.initial_events)
    result.partitions = describe(kafka_dir, TOPIC)
    report.produced(result, users)

    # 2 -------------------------------------------------------------------------------------------
    report.step(2, f'Spark batch job: spark.read.format("kafkalog").option("subscribe", "{TOPIC}")')
    from pyspark.sql import functions as F

    with timer("spark: read + parse + cache"):
        views = parse_pageviews(read_topic(spark, kafka_path, TOPIC)).cache()
        per_partition = views.groupBy("partition").count().collect()
        result.spark_rows_per_partition = {r["partition"]: r["count"] for r in sorted(per_partition)}
    try:
        with timer("spark: windows, top pages"):
            per_window = views_per_window(views).cache()
            result.views_per_window = sorted(
                (r["start"], r["page"], r["views"], r["unique_users"], r["total_duration_ms"])
                for r in per_window.select(F.unix_millis("window.start").alias("start"), "page", "views",
                                           "unique_users", "total_duration_ms").collect())
            top = top_pages_per_window(per_window)
            result.top_per_window = sorted(
                (r["start"], r["rank"], r["page"], r["views"])
                for r in top.select(F.unix_millis("window.start").alias("start"), "rank", "page",
                                    "views").collect())
            result.top_pages = [(r["page"], r["views"], r["unique_users"], r["avg_seconds"])
                                for r in top_pages(views).collect()]
        with timer("spark: sessions"):
            sessions = sessionize(views).cache()
            result.session_stats = session_stats(sessions)
            result.sessions_by_source = [
                (r["source"], r["sessions"], r["avg_views"], r["bounce_rate"], r["conversion_rate"])
                for r in sessions_by_source(sessions).collect()]
        report.batch_job(result)

        # 3 ---------------------------------------------------------------------------------------
        report.step(3, 'Write the results to topics with df.write.format("kafkalog")')
        with timer("spark: write results"):
            write_topic(top_pages_records(top), kafka_path, TOP_PAGES_TOPIC)
            write_topic(session_records(sessions), kafka_path, SESSIONS_TOPIC)
        for topic in (TOP_PAGES_TOPIC, SESSIONS_TOPIC):
            result.written[topic] = sum(end_offsets(kafka_dir, topic).values())
        with timer("spark: chart data"):
            batch_buckets = views_per_bucket(views)
        per_window.unpersist()
        sessions.unpersist()
    finally:
        views.unpersist()
    report.written(result)

    # 4 -------------------------------------------------------------------------------------------
    report.step(4, "Incremental stream: readStream + Trigger.AvailableNow + checkpoint, run twice")
    with timer("stream run 1"):
        result.stream_runs.append(run_by_page_stream(spark, kafka_path, checkpoint))
    result.by_page_records.append(sum(end_offsets(kafka_dir, BY_PAGE_TOPIC).values()))
    before_append = end_offsets(kafka_dir, TOPIC)
    with timer("append more events"):
        result.appended_events = generate_pageviews(
            append_events, start_ms=START_MS + BATCH_PERIOD_MS, period_ms=APPEND_PERIOD_MS, users=users,
            seed=seed + 1, ramp=False, warmup_ms=30 * MINUTE_MS)
        produce(kafka_dir, result.appended_events)
    with timer("stream run 2"):
        result.stream_runs.append(run_by_page_stream(spark, kafka_path, checkpoint))
    result.by_page_records.append(sum(end_offsets(kafka_dir, BY_PAGE_TOPIC).values()))
    # The same new range, read as a batch from the offsets the log had before the append.
    with timer("spark: read the appended range"):
        starting = json.dumps({TOPIC: {str(p): off for p, off in before_append.items()}})
        appended = parse_pageviews(read_topic(spark, kafka_path, TOPIC, startingOffsets=starting))
        appended_buckets = views_per_bucket(appended)
        result.appended_read_back = sum(n for _, n in appended_buckets)
    report.streamed(result, before_append, end_offsets(kafka_dir, TOPIC))

    # 5 -------------------------------------------------------------------------------------------
    with timer("chart"):
        save_chart(result.chart, batch_buckets, appended_buckets)
    report.step(5, "Report")
    report.finish(result)
    return result
