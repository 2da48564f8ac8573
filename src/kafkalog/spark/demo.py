"""``kafkalog demo``: a page-view pipeline from raw events to Spark results, all in Kafka's file format.

Read it top to bottom; every step is one function and ``run()`` calls them in order:

1. **Produce.** A deterministic generator invents six hours of page views on an outdoor-gear shop
   (users, pages, referrers, time on page, a newsletter spike at 09:30). They are appended to the
   topic ``pageviews`` (3 partitions, lz4) through the storage engine exactly as a Kafka producer
   and leader would: keyed by user id, so Kafka's murmur2 partitioner picks the partition; records
   grouped into producer-sized batches; ``Log.append_as_leader`` assigns the offsets.
2. **Batch job.** ``spark.read.format("kafkalog")`` reads the topic; the JSON values are parsed and
   turned into page views per page per 15-minute window, the top pages of each window, the top
   pages overall and user sessions (a session ends after 30 minutes without a view).
3. **Write results.** The top pages per window and the session summaries are written back, as JSON
   values keyed by page and by user, to two more topics with ``df.write.format("kafkalog")``.
4. **Incremental stream.** A ``readStream`` query with ``Trigger.AvailableNow`` and a checkpoint
   re-keys page views by page into a fourth topic. It runs once (reading everything so far), then
   another half hour of events is appended, then it runs again: the second run reads exactly the
   appended events, because its checkpoint remembers where the first run stopped.
5. **Report.** A summary on stdout, and a PNG chart of page views per 5 minutes.

Everything lives under one directory (``demo-data/`` by default) that a rerun wipes, so a rerun
prints the same numbers. ``run(spark, data_dir)`` is the pipeline for any SparkSession (the tests
pass theirs); ``main()`` is the command line, which starts a local session bound to 127.0.0.1.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import random
import shutil
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from itertools import accumulate
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from kafkalog.errors import KafkaLogError
from kafkalog.records import MAGIC_V2, CompressionType, MemoryRecords, SimpleRecord
from kafkalog.storage.log_manager import LogManager, PartitionDescription
from kafkalog.storage.partitioner import partition_for_key

# pyspark is imported inside the functions that use it: the event generator and the producer need
# only the storage engine, so they (and their tests) work without starting or importing Spark.
if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "DemoError",
    "DemoResult",
    "PageView",
    "generate_pageviews",
    "main",
    "prepare_demo_dir",
    "run",
]

# --- what the demo builds ------------------------------------------------------------------------

TOPIC = "pageviews"  # the raw events
TOP_PAGES_TOPIC = "pageviews-top-pages"  # batch job output: top pages of every 15-minute window
SESSIONS_TOPIC = "pageviews-sessions"  # batch job output: one record per user session
BY_PAGE_TOPIC = "pageviews-by-page"  # streaming job output: the raw events re-keyed by page
PARTITIONS = 3
CODEC = CompressionType.LZ4  # what most Kafka producers use; the results go out as zstd
# Small segments, so the 300k events roll over several segments per partition (as a busy topic
# would); no retention, because the demo's events are dated in the past and Kafka's default
# retention.ms (7 days) would otherwise make them eligible for deletion right away.
RAW_TOPIC_CONFIGS = {"segment.bytes": str(1024 * 1024), "retention.ms": "-1"}
RESULT_TOPIC_CONFIGS = {"retention.ms": "-1"}

DEFAULT_DATA_DIR = "demo-data"
DEFAULT_EVENTS = 300_000
SEED = 20240304
MARKER_FILE = ".kafkalog-demo"  # only a directory carrying this file is ever wiped

MINUTE_MS = 60_000
HOUR_MS = 60 * MINUTE_MS
START_MS = int(dt.datetime(2024, 3, 4, 6, 0, tzinfo=dt.UTC).timestamp() * 1000)  # Monday, 06:00 UTC
BATCH_PERIOD_MS = 6 * HOUR_MS  # the initial load: 06:00-12:00
APPEND_PERIOD_MS = 30 * MINUTE_MS  # what arrives later: 12:00-12:30
NEWSLETTER_AT_MS = START_MS + 3 * HOUR_MS + 30 * MINUTE_MS  # 09:30, the newsletter goes out

WINDOW = "15 minutes"
SESSION_GAP = "30 minutes"
TOP_N = 3
CHART_BUCKET = "5 minutes"
# Kafka's producer closes a batch at batch.size (16 KiB by default); so does the demo's producer.
PRODUCER_BATCH_BYTES = 16 * 1024
STREAM_TIMEOUT_S = 600  # an AvailableNow run that takes longer than this has hung
# Timestamps in result values look like 2024-03-04T09:30:00.000Z.
JSON_TIME = {"timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSXXX"}


class DemoError(KafkaLogError):
    """A problem the user can fix (e.g. a --data-dir that is not the demo's)."""


# --- 1. the events -------------------------------------------------------------------------------

DEVICES = (("mobile", 55), ("desktop", 38), ("tablet", 7))

# Pages a visitor browses to, with their popularity. The checkout pages are reached only from the
# cart, and the spring-sale post mostly from the newsletter.
BROWSE_PAGES = (
    ("/", 18), ("/search", 9), ("/products", 8),
    ("/products/trail-runner", 6), ("/products/city-sneaker", 5), ("/products/rain-jacket", 4),
    ("/products/wool-socks", 3), ("/products/day-pack", 3), ("/products/water-bottle", 2),
    ("/products/headlamp", 2), ("/products/gift-card", 1),
    ("/cart", 4), ("/blog", 3), ("/blog/trail-guide", 2), ("/blog/packing-list", 1.5),
    ("/blog/spring-sale", 0.5), ("/stores", 1.5), ("/help", 2), ("/account", 3), ("/about", 1),
)
SALE_PAGES = ("/products/trail-runner", "/products/rain-jacket", "/products/day-pack", "/products/headlamp")
CHECKOUT_DONE = "/checkout/done"

# Where sessions come from (the Referer of their first view) and where each source lands.
_SEARCH_LANDING = {"/": 3, "/products/trail-runner": 2, "/products/city-sneaker": 2,
                   "/products/rain-jacket": 1, "/blog/trail-guide": 1, "/stores": 1}
SOURCES = (
    ("google.com", 38, _SEARCH_LANDING),
    ("direct", 25, {"/": 6, "/account": 1, "/cart": 1}),
    ("instagram.com", 9, {"/products/city-sneaker": 2, "/blog/packing-list": 1, "/": 1}),
    ("facebook.com", 6, {"/": 2, "/products/wool-socks": 1, "/blog/packing-list": 1}),
    ("bing.com", 5, _SEARCH_LANDING),
    ("reddit.com", 4, {"/blog/trail-guide": 3, "/products/headlamp": 1}),
    ("newsletter", 2, {"/blog/spring-sale": 1}),
)
NEWSLETTER_SHARE = 0.08  # of the sessions of the batch period, arriving after the newsletter
NEWSLETTER_DECAY_MS = 15 * MINUTE_MS
RETURNING = "(returning)"  # the source of a session that began by coming back to an open tab
# Mean time on page in seconds, by page or by section ("/blog/" covers every post).
TIME_ON_PAGE_S = {"/": 20, "/search": 15, "/products": 25, "/products/": 55, "/cart": 30, "/checkout": 75,
                  CHECKOUT_DONE: 10, "/blog": 20, "/blog/": 95, "/help": 60}


@dataclass(frozen=True, slots=True)
class PageView:
    """One page view. ``timestamp`` (epoch ms) is also the Kafka record's timestamp (CreateTime):
    the event time travels in the record's timestamp field, not in the JSON value."""

    timestamp: int
    user_id: str
    page: str
    referrer: str  # an external domain or "direct" for a session's first view, else the previous page
    device: str
    duration_ms: int  # time on page

    def key(self) -> bytes:
        return self.user_id.encode()

    def value(self) -> bytes:
        return json.dumps({"user_id": self.user_id, "page": self.page, "referrer": self.referrer,
                           "device": self.device, "duration_ms": self.duration_ms},
                          separators=(",", ":")).encode()


def _cumulative(weights: Sequence[float]) -> list[float]:
    return list(accumulate(weights))


_BROWSE = [p for p, _ in BROWSE_PAGES]
_BROWSE_CUM = _cumulative([w for _, w in BROWSE_PAGES])
_SOURCE_NAMES = [s for s, _, _ in SOURCES]
_SOURCE_CUM = _cumulative([w for _, w, _ in SOURCES])
_LANDING = {s: (list(land), _cumulative(list(land.values()))) for s, _, land in SOURCES}


def users_for(events: int) -> int:
    """How many users browse: about eight page views (two sessions) per user on average."""
    return max(10, events // 8)


def _user_table(users: int) -> tuple[list[str], list[str], list[float]]:
    """User ids, each user's device, and cumulative activity weights: most users visit once or
    twice, a few come back many times (a capped Pareto tail). Depends only on ``users``, so the
    initial load and the appended events share one population."""
    rng = random.Random(users)
    ids = [f"u{i:06d}" for i in range(1, users + 1)]
    devices = rng.choices([d for d, _ in DEVICES], weights=[w for _, w in DEVICES], k=users)
    activity = _cumulative([min(10.0, rng.paretovariate(2.0)) for _ in range(users)])
    return ids, devices, activity


def _next_page(rng: random.Random, page: str) -> str:
    r = rng.random()
    if page == "/cart" and r < 0.35:
        return "/checkout"
    if page == "/checkout" and r < 0.6:
        return CHECKOUT_DONE
    if page == "/blog/spring-sale" and r < 0.6:
        return rng.choice(SALE_PAGES)
    if page.startswith("/products/") and r < 0.15:
        return "/cart"
    return rng.choices(_BROWSE, cum_weights=_BROWSE_CUM)[0]


def _time_on_page_ms(rng: random.Random, page: str) -> int:
    """Log-normal time on page around a per-page mean (people read posts, skim the home page)."""
    mean = TIME_ON_PAGE_S.get(page) or TIME_ON_PAGE_S.get(page[: page.find("/", 1) + 1], 35)
    sigma = 0.8
    # mu chosen so that the distribution's mean is ``mean`` seconds.
    ms = rng.lognormvariate(math.log(mean * 1000) - sigma * sigma / 2, sigma)
    return min(10 * MINUTE_MS, max(500, int(ms)))


def generate_pageviews(
    count: int,
    *,
    start_ms: int = START_MS,
    period_ms: int = BATCH_PERIOD_MS,
    users: int,
    seed: int = SEED,
    ramp: bool = True,
    warmup_ms: int = 0,
    newsletter_at_ms: int | None = None,
) -> list[PageView]:
    """Exactly ``count`` page views in [start_ms, start_ms + period_ms), sorted by time.

    Sessions start at random times (more of them later in the morning when ``ramp``; from
    ``warmup_ms`` before ``start_ms`` on, so that sessions already under way at ``start_ms``
    contribute their later views), from a weighted source that decides the landing page. Each view
    lasts a log-normal time on page, and after each view the visitor leaves with some probability.
    Now and then a visitor pauses for 5-20 minutes (same session) or leaves a tab open and comes
    back after more than 30 minutes (a new session, by the usual definition). The same arguments
    always give the same events.
    """
    rng = random.Random(seed)
    ids, devices, activity = _user_table(users)
    end_ms = start_ms + period_ms
    out: list[PageView] = []
    while len(out) < count:
        if newsletter_at_ms is not None and rng.random() < NEWSLETTER_SHARE:
            ts = newsletter_at_ms + int(rng.expovariate(1 / NEWSLETTER_DECAY_MS))
            referrer = "newsletter"
        else:
            # sqrt(u) has a linearly rising density: traffic grows through the morning.
            frac = math.sqrt(rng.random()) if ramp and rng.random() < 0.7 else rng.random()
            ts = start_ms - warmup_ms + int(frac * (period_ms + warmup_ms))
            referrer = rng.choices(_SOURCE_NAMES, cum_weights=_SOURCE_CUM)[0]
        landing_pages, landing_cum = _LANDING[referrer]
        page = rng.choices(landing_pages, cum_weights=landing_cum)[0]
        u = rng.choices(range(users), cum_weights=activity)[0]
        while ts < end_ms and len(out) < count:
            duration = _time_on_page_ms(rng, page)
            if ts >= start_ms:
                out.append(PageView(ts, ids[u], page, referrer, devices[u], duration))
            if rng.random() < (0.7 if page == CHECKOUT_DONE else 0.25):
                break
            ts += duration + int(rng.expovariate(1 / 4000))
            r = rng.random()
            if r < 0.02:
                ts += rng.randint(31 * MINUTE_MS, 2 * HOUR_MS)
            elif r < 0.05:
                ts += rng.randint(5 * MINUTE_MS, 20 * MINUTE_MS)
            referrer, page = page, _next_page(rng, page)
    out.sort(key=lambda v: v.timestamp)
    # Two overlapping sessions of one user may land on the same millisecond; nudge the later one so
    # "first/last page of a session" never depends on how a tie is broken.
    seen: set[tuple[str, int]] = set()
    nudged = False
    for i, view in enumerate(out):
        ts = view.timestamp
        while (view.user_id, ts) in seen:
            ts += 1
        if ts != view.timestamp:
            out[i] = replace(view, timestamp=ts)
            nudged = True
        seen.add((view.user_id, ts))
    if nudged:
        out.sort(key=lambda v: v.timestamp)
    return out


# --- 1. producing through the storage engine -------------------------------------------------------


def create_topics(kafka_dir: Path) -> None:
    """The raw topic and the three result topics (results are small: default segments)."""
    with LogManager(kafka_dir) as lm:
        lm.create_topic(TOPIC, PARTITIONS, RAW_TOPIC_CONFIGS)
        for topic in (TOP_PAGES_TOPIC, SESSIONS_TOPIC, BY_PAGE_TOPIC):
            lm.create_topic(topic, PARTITIONS, RESULT_TOPIC_CONFIGS)


def produce(kafka_dir: Path, views: Sequence[PageView]) -> int:
    """Append ``views`` to ``pageviews`` like a Kafka producer and leader; returns the batch count.

    The producer side: murmur2 of the key picks the partition, and records of one partition are
    collected until a batch reaches 16 KiB. The leader side: ``append_as_leader`` validates each
    batch and assigns its offsets, as a broker does for a produce request.
    """
    batches = 0
    with LogManager(kafka_dir) as lm:
        logs = [lm.get_log(TOPIC, p) for p in lm.partitions(TOPIC)]
        pending: list[list[SimpleRecord]] = [[] for _ in logs]
        pending_bytes = [0] * len(logs)

        def send(p: int) -> None:
            nonlocal batches
            if pending[p]:
                logs[p].append_as_leader(MemoryRecords.with_records(MAGIC_V2, CODEC, pending[p]))
                batches += 1
                pending[p], pending_bytes[p] = [], 0

        for view in views:
            key = view.key()
            p = partition_for_key(key, len(logs))
            record = SimpleRecord(value=view.value(), key=key, timestamp=view.timestamp)
            pending[p].append(record)
            pending_bytes[p] += len(key) + len(record.value or b"")
            if pending_bytes[p] >= PRODUCER_BATCH_BYTES:
                send(p)
        for p in range(len(logs)):
            send(p)
    # Leaving the LogManager flushed, checkpointed and released the data directory's lock, which
    # Spark's writers need (they refuse to append behind a live writer's back).
    return batches


def describe(kafka_dir: Path, topic: str) -> list[PartitionDescription]:
    with LogManager(kafka_dir, read_only=True) as lm:
        return list(lm.describe_topic(topic).partitions)


def end_offsets(kafka_dir: Path, topic: str) -> dict[int, int]:
    return {p.partition: p.log_end_offset for p in describe(kafka_dir, topic)}


# --- 2. the Spark batch job ----------------------------------------------------------------------

PAGEVIEW_SCHEMA = "user_id string, page string, referrer string, device string, duration_ms int"


def read_topic(spark: SparkSession, kafka_path: str, topic: str, **options: str) -> DataFrame:
    return spark.read.format("kafkalog").option("subscribe", topic).options(**options).load(kafka_path)


def parse_pageviews(raw: DataFrame) -> DataFrame:
    """Kafka rows (key, value, topic, partition, offset, timestamp, ...) -> one typed row per view.
    The record timestamp is the event time."""
    from pyspark.sql import functions as F

    return raw.select(
        "partition", "offset", F.col("timestamp").alias("ts"),
        F.from_json(F.col("value").cast("string"), PAGEVIEW_SCHEMA).alias("v"),
    ).select("partition", "offset", "ts", "v.*")


def views_per_window(views: DataFrame) -> DataFrame:
    """Views, unique users and time on page, per page per 15-minute window."""
    from pyspark.sql import functions as F

    return (views.groupBy(F.window("ts", WINDOW).alias("window"), "page")
            .agg(F.count("*").alias("views"),
                 F.count_distinct("user_id").alias("unique_users"),
                 F.sum("duration_ms").alias("total_duration_ms"))
            .withColumn("avg_seconds", F.round(F.col("total_duration_ms") / F.col("views") / 1000, 1)))


def top_pages_per_window(per_window: DataFrame, n: int = TOP_N) -> DataFrame:
    """The ``n`` most viewed pages of each window (ties broken by page name, so reruns agree)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    by_views = Window.partitionBy("window").orderBy(F.desc("views"), F.asc("page"))
    return per_window.withColumn("rank", F.row_number().over(by_views)).where(F.col("rank") <= n)


def top_pages(views: DataFrame, n: int = 10) -> DataFrame:
    from pyspark.sql import functions as F

    return (views.groupBy("page")
            .agg(F.count("*").alias("views"), F.count_distinct("user_id").alias("unique_users"),
                 F.round(F.avg("duration_ms") / 1000, 1).alias("avg_seconds"))
            .orderBy(F.desc("views"), F.asc("page")).limit(n))


def sessionize(views: DataFrame) -> DataFrame:
    """One row per user session: Spark's session windows close after 30 minutes without a view."""
    from pyspark.sql import functions as F

    return (views.groupBy("user_id", F.session_window("ts", SESSION_GAP))
            .agg(F.min("ts").alias("session_start"),
                 F.max("ts").alias("session_end"),
                 F.count("*").alias("views"),
                 F.count_distinct("page").alias("distinct_pages"),
                 F.min_by("page", "ts").alias("landing_page"),
                 F.max_by("page", "ts").alias("exit_page"),
                 F.min_by("referrer", "ts").alias("first_referrer"),
                 F.min("device").alias("device"),  # a user's device never changes here
                 F.bool_or(F.col("page") == CHECKOUT_DONE).alias("converted"))
            # A session that begins on one of our own pages came back to a tab left open.
            .withColumn("source", F.when(F.col("first_referrer").startswith("/"), F.lit(RETURNING))
                        .otherwise(F.col("first_referrer")))
            .withColumn("duration_s",
                        (F.unix_millis("session_end") - F.unix_millis("session_start")) / 1000)
            .drop("session_window", "first_referrer"))


def session_stats(sessions: DataFrame) -> dict[str, float]:
    from pyspark.sql import functions as F

    row = sessions.agg(
        F.count("*").alias("sessions"),
        F.avg("views").alias("avg_views"),
        F.median("duration_s").alias("median_duration_s"),
        F.avg((F.col("views") == 1).cast("int")).alias("bounce_rate"),
        F.avg(F.col("converted").cast("int")).alias("conversion_rate"),
    ).first()
    assert row is not None
    return row.asDict()


def sessions_by_source(sessions: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    return (sessions.groupBy("source")
            .agg(F.count("*").alias("sessions"), F.avg("views").alias("avg_views"),
                 F.avg((F.col("views") == 1).cast("int")).alias("bounce_rate"),
                 F.avg(F.col("converted").cast("int")).alias("conversion_rate"))
            .orderBy(F.desc("sessions"), F.asc("source")))


# --- 3. results back to topics -------------------------------------------------------------------


def top_pages_records(top: DataFrame) -> DataFrame:
    """Kafka records (key = page, JSON value, timestamp = window start) for TOP_PAGES_TOPIC."""
    from pyspark.sql import functions as F

    value = F.struct(
        F.col("window.start").alias("window_start"), F.col("window.end").alias("window_end"),
        "rank", "page", "views", "unique_users", "avg_seconds",
    )
    return top.select(F.col("page").alias("key"), F.to_json(value, JSON_TIME).alias("value"),
                      F.col("window.start").alias("timestamp"))


def session_records(sessions: DataFrame) -> DataFrame:
    """Kafka records (key = user id, JSON value, timestamp = session start) for SESSIONS_TOPIC."""
    from pyspark.sql import functions as F

    value = F.struct("user_id", "session_start", "session_end", "duration_s", "views", "distinct_pages",
                     "landing_page", "exit_page", "source", "device", "converted")
    return sessions.select(F.col("user_id").alias("key"), F.to_json(value, JSON_TIME).alias("value"),
                           F.col("session_start").alias("timestamp"))


def write_topic(records: DataFrame, kafka_path: str, topic: str) -> None:
    (records.write.format("kafkalog").option("topic", topic).option("kafka.compression.type", "zstd")
     .mode("append").save(kafka_path))


# --- 4. the incremental stream -------------------------------------------------------------------


def run_by_page_stream(spark: SparkSession, kafka_path: str, checkpoint: str) -> int:
    """One ``Trigger.AvailableNow`` run of the re-keying stream; returns the rows it read.

    A fresh checkpoint starts at ``earliest``; a checkpoint from an earlier run starts where that
    run stopped, so each run reads only what arrived in between.
    """
    from pyspark.sql import functions as F

    query = (
        spark.readStream.format("kafkalog").option("subscribe", TOPIC).option("startingOffsets", "earliest")
        .load(kafka_path)
        .select(F.get_json_object(F.col("value").cast("string"), "$.page").alias("key"), "value", "timestamp")
        .writeStream.format("kafkalog")
        .option("topic", BY_PAGE_TOPIC).option("kafka.compression.type", "lz4")
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start(kafka_path)
    )
    try:
        if not query.awaitTermination(STREAM_TIMEOUT_S):
            raise DemoError(f"the streaming run did not finish within {STREAM_TIMEOUT_S} s")
    finally:
        query.stop()  # a no-op once it finished; stops it if awaiting failed
    return sum(int(progress["numInputRows"]) for progress in query.recentProgress)


# --- 5. the chart --------------------------------------------------------------------------------


def views_per_bucket(views: DataFrame) -> list[tuple[int, int]]:
    """(bucket start ms, views) per 5 minutes, for the chart."""
    from pyspark.sql import functions as F

    rows = (views.groupBy(F.window("ts", CHART_BUCKET).alias("w")).count()
            .select(F.unix_millis("w.start").alias("start"), "count").orderBy("start").collect())
    return [(r["start"], r["count"]) for r in rows]


def save_chart(path: Path, batch: list[tuple[int, int]], appended: list[tuple[int, int]]) -> None:
    # The object API with an explicit Agg canvas: no display needed, and pyplot's global backend
    # (which another part of the process may use) is left alone.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9, 3.2), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    width = 5 / 60 * 0.9  # hours

    def hours(ms: int) -> float:
        return (ms - START_MS) / HOUR_MS + 6  # hour of the day, UTC

    ax.bar([hours(t) for t, _ in batch], [n for _, n in batch], width=width, align="edge",
           color="#4c72b0", label="initial load (batch job)")
    ax.bar([hours(t) for t, _ in appended], [n for _, n in appended], width=width, align="edge",
           color="#dd8452", label="appended later (picked up by the stream)")
    ax.set_xlabel("time of day, 2024-03-04 (UTC)")
    ax.set_ylabel("page views per 5 min")
    ax.set_title(f"{TOPIC}: page views per 5 minutes")
    ax.set_xticks(range(6, 13))
    ax.set_xticklabels([f"{h:02d}:00" for h in range(6, 13)])
    ax.legend(loc="upper left", fontsize="small")
    fig.tight_layout()
    fig.savefig(path, format="png")


# --- the pipeline --------------------------------------------------------------------------------


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


def prepare_demo_dir(data_dir: Path) -> None:
    """Make ``data_dir`` an empty demo directory. Only a directory the demo made (it carries
    MARKER_FILE) or an empty one is used: the demo never deletes anything it did not create."""
    if data_dir.exists():
        if not data_dir.is_dir():
            raise DemoError(f"{data_dir} is not a directory")
        if (data_dir / MARKER_FILE).is_file():
            for child in data_dir.iterdir():
                if child.name == MARKER_FILE:
                    continue
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child)
                else:
                    child.unlink()
            return
        if any(data_dir.iterdir()):
            raise DemoError(f"{data_dir} exists and was not made by the demo (no {MARKER_FILE} in it); "
                            "pass a new or empty --data-dir")
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
    report = _Report(stream)
    prepare_demo_dir(data_dir)
    out_path.mkdir(parents=True, exist_ok=True)
    kafka_dir = data_dir / "kafka"  # a Kafka log.dirs entry: only topic-partition directories in it
    # Spark gets absolute paths: its Python workers need not share our working directory.
    kafka_path = str(kafka_dir.resolve())
    checkpoint = str((data_dir / "checkpoints" / BY_PAGE_TOPIC).resolve())
    users = users_for(events)
    result = DemoResult(kafka_dir=kafka_dir, chart=out_path / "pageviews-per-5min.png",
                        initial_events=[], appended_events=[])
    timer = _Timer(result.timings)

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


# --- printing ------------------------------------------------------------------------------------


class _Timer:
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


class _Report:
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


# --- command line --------------------------------------------------------------------------------


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
