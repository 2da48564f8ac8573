"""The demo end to end on a small event count: what it prints and writes equals the same results
computed in plain Python from the generated events, and the stream's second run reads exactly the
appended events."""

from __future__ import annotations

import datetime as dt
import io
import json
import statistics
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from kafkalog.demo.events import CHECKOUT_DONE, RETURNING, PageView, generate_pageviews
from kafkalog.demo.main import build_parser
from kafkalog.demo.pipeline import DemoResult, prepare_demo_dir
from kafkalog.demo.pipeline import run as run_demo
from kafkalog.demo.settings import (
    APPEND_PERIOD_MS,
    BATCH_PERIOD_MS,
    BY_PAGE_TOPIC,
    DEFAULT_DATA_DIR,
    DEFAULT_EVENTS,
    MARKER_FILE,
    NEWSLETTER_AT_MS,
    PARTITIONS,
    SEED,
    SESSIONS_TOPIC,
    START_MS,
    TOP_PAGES_TOPIC,
    TOPIC,
    DemoError,
)
from kafkalog.records import CompressionType
from kafkalog.storage.log_manager import LogManager
from kafkalog.storage.partitioner import partition_for_key

EVENTS = 2_000
APPENDED = 250
WINDOW_MS = 15 * 60_000
GAP_MS = 30 * 60_000


@pytest.fixture(scope="module")
def demo_run(spark, tmp_path_factory) -> tuple[DemoResult, str]:
    data_dir = tmp_path_factory.mktemp("demo") / "demo-data"
    printed = io.StringIO()
    result = run_demo(spark, data_dir, events=EVENTS, append_events=APPENDED, out=printed)
    return result, printed.getvalue()


@pytest.fixture(scope="module")
def result(demo_run) -> DemoResult:
    return demo_run[0]


# --- the oracle: the demo's questions answered in plain Python ----------------------------------


def iso(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def python_views_per_window(events: list[PageView]) -> dict[tuple[int, str], tuple[int, int, int]]:
    """(window start, page) -> (views, unique users, total time on page)."""
    views: Counter[tuple[int, str]] = Counter()
    users: dict[tuple[int, str], set[str]] = defaultdict(set)
    duration: Counter[tuple[int, str]] = Counter()
    for e in events:
        key = (e.timestamp // WINDOW_MS * WINDOW_MS, e.page)
        views[key] += 1
        users[key].add(e.user_id)
        duration[key] += e.duration_ms
    return {k: (views[k], len(users[k]), duration[k]) for k in views}


def python_top_per_window(events: list[PageView], n: int = 3) -> list[tuple[int, int, str, int]]:
    by_window: dict[int, list[tuple[str, int]]] = defaultdict(list)
    for (start, page), (views, _, _) in python_views_per_window(events).items():
        by_window[start].append((page, views))
    out = []
    for start, pages in by_window.items():
        ranked = sorted(pages, key=lambda pv: (-pv[1], pv[0]))[:n]
        out.extend((start, rank, page, views) for rank, (page, views) in enumerate(ranked, 1))
    return sorted(out)


def python_sessions(events: list[PageView]) -> list[dict]:
    """A user's views form one session until the next view comes more than 30 minutes later."""
    by_user: dict[str, list[PageView]] = defaultdict(list)
    for e in events:
        by_user[e.user_id].append(e)
    sessions: list[list[PageView]] = []
    for views in by_user.values():
        views.sort(key=lambda v: v.timestamp)
        current = [views[0]]
        for v in views[1:]:
            if v.timestamp - current[-1].timestamp > GAP_MS:
                sessions.append(current)
                current = []
            current.append(v)
        sessions.append(current)
    out = []
    for s in sessions:
        first, last = s[0], s[-1]
        out.append({
            "user_id": first.user_id,
            "session_start": iso(first.timestamp),
            "session_end": iso(last.timestamp),
            "duration_s": (last.timestamp - first.timestamp) / 1000,
            "views": len(s),
            "distinct_pages": len({v.page for v in s}),
            "landing_page": first.page,
            "exit_page": last.page,
            "source": RETURNING if first.referrer.startswith("/") else first.referrer,
            "device": first.device,
            "converted": any(v.page == CHECKOUT_DONE for v in s),
        })
    return out


def topic_records(kafka_dir: Path, topic: str) -> list[tuple[int, int, bytes | None, bytes | None, int]]:
    """(partition, offset, key, value, timestamp) through the storage API, not Spark."""
    rows = []
    with LogManager(kafka_dir, read_only=True) as lm:
        for p in lm.partitions(topic):
            log = lm.get_log(topic, p)
            rows.extend((p, r.offset, r.key, r.value, r.timestamp) for r in log.records(log.log_start_offset))
    return rows


def sort_key(d: dict) -> tuple:
    return d["user_id"], d["session_start"]


# --- the generator -------------------------------------------------------------------------------


def test_generator_is_deterministic_exact_and_in_range():
    a = generate_pageviews(500, users=40, newsletter_at_ms=NEWSLETTER_AT_MS)
    assert a == generate_pageviews(500, users=40, newsletter_at_ms=NEWSLETTER_AT_MS)
    assert a != generate_pageviews(500, users=40, seed=SEED + 1)
    assert len(a) == 500
    assert [v.timestamp for v in a] == sorted(v.timestamp for v in a)
    assert all(START_MS <= v.timestamp < START_MS + BATCH_PERIOD_MS for v in a)
    assert len({(v.user_id, v.timestamp) for v in a}) == len(a)  # no ties within a user
    later = generate_pageviews(50, start_ms=START_MS + BATCH_PERIOD_MS,
                                    period_ms=APPEND_PERIOD_MS, users=40, warmup_ms=30 * 60_000)
    assert len(later) == 50
    assert all(v.timestamp >= START_MS + BATCH_PERIOD_MS for v in later)


def test_demo_dir_is_wiped_only_when_the_demo_made_it(tmp_path):
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "precious.txt").write_text("keep me")
    with pytest.raises(DemoError, match="not made by the demo"):
        prepare_demo_dir(foreign)
    assert (foreign / "precious.txt").read_text() == "keep me"

    ours = tmp_path / "demo-data"
    prepare_demo_dir(ours)
    (ours / "kafka").mkdir()
    (ours / "kafka" / "leftover").write_text("x")
    (ours / "file").write_text("x")
    prepare_demo_dir(ours)
    assert sorted(p.name for p in ours.iterdir()) == [MARKER_FILE]


def test_the_demo_refuses_a_foreign_directory_before_starting_spark(tmp_path):
    """The check comes first: one line, exit 1, in well under Spark's start-up time."""
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "precious.txt").write_text("keep me")
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "kafkalog.demo", "--data-dir", str(foreign)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "not made by the demo" in done.stderr
    assert "Starting Spark" not in done.stdout and time.monotonic() - started < 5
    assert (foreign / "precious.txt").read_text() == "keep me"


def test_command_line_options():
    args = build_parser().parse_args(["--data-dir", "d", "--events", "5", "--out", "o"])
    assert (args.data_dir, args.events, args.out) == ("d", 5, "o")
    args = build_parser().parse_args([])
    assert (args.data_dir, args.events, args.out) == (DEFAULT_DATA_DIR, DEFAULT_EVENTS, None)


# --- step 1: the raw topic -----------------------------------------------------------------------


def test_raw_topic_holds_the_events_where_murmur2_puts_them(result: DemoResult):
    rows = topic_records(result.kafka_dir, TOPIC)
    assert len(rows) == EVENTS + APPENDED
    expected: dict[int, list[tuple[bytes, bytes, int]]] = defaultdict(list)
    for e in result.initial_events + result.appended_events:
        expected[partition_for_key(e.key(), PARTITIONS)].append((e.key(), e.value(), e.timestamp))
    for p in range(PARTITIONS):
        got = [(k, v, ts) for part, _, k, v, ts in sorted(rows) if part == p]
        assert got == expected[p]
    # The batch job ran before the append: it saw the initial events, per partition.
    initial = Counter(partition_for_key(e.key(), PARTITIONS) for e in result.initial_events)
    assert result.spark_rows_per_partition == dict(initial)
    with LogManager(result.kafka_dir, read_only=True) as lm:
        codecs = {b.compression_type for p in lm.partitions(TOPIC)
                  for b in lm.get_log(TOPIC, p).batches(0)}
    assert codecs == {CompressionType.LZ4}


# --- step 2: the batch job's answers -------------------------------------------------------------


def test_views_per_window_equal_python(result: DemoResult):
    oracle = python_views_per_window(result.initial_events)
    assert result.views_per_window == sorted((w, page, *vals) for (w, page), vals in oracle.items())


def test_top_pages_per_window_and_overall_equal_python(result: DemoResult):
    assert result.top_per_window == python_top_per_window(result.initial_events)
    views = Counter(e.page for e in result.initial_events)
    users: dict[str, set[str]] = defaultdict(set)
    durations: dict[str, list[int]] = defaultdict(list)
    for e in result.initial_events:
        users[e.page].add(e.user_id)
        durations[e.page].append(e.duration_ms)
    expected = sorted(views, key=lambda p: (-views[p], p))[:10]
    assert [p for p, *_ in result.top_pages] == expected
    for page, n, u, avg_s in result.top_pages:
        assert (n, u) == (views[page], len(users[page]))
        assert avg_s == pytest.approx(statistics.mean(durations[page]) / 1000, abs=0.051)


def test_session_stats_equal_python(result: DemoResult):
    sessions = python_sessions(result.initial_events)
    s = result.session_stats
    assert s["sessions"] == len(sessions)
    assert s["avg_views"] == pytest.approx(statistics.mean(x["views"] for x in sessions))
    assert s["median_duration_s"] == pytest.approx(statistics.median(x["duration_s"] for x in sessions))
    assert s["bounce_rate"] == pytest.approx(sum(x["views"] == 1 for x in sessions) / len(sessions))
    assert s["conversion_rate"] == pytest.approx(sum(x["converted"] for x in sessions) / len(sessions))
    by_source = Counter(x["source"] for x in sessions)
    assert {src: n for src, n, *_ in result.sessions_by_source} == dict(by_source)


# --- step 3: the result topics -------------------------------------------------------------------


def test_top_pages_topic_holds_the_python_top_pages(result: DemoResult):
    rows = topic_records(result.kafka_dir, TOP_PAGES_TOPIC)
    oracle = python_top_per_window(result.initial_events)
    assert len(rows) == len(oracle) == result.written[TOP_PAGES_TOPIC]
    per_window = python_views_per_window(result.initial_events)
    got = []
    for _, _, key, value, ts in rows:
        v = json.loads(value)
        assert key == v["page"].encode()
        assert ts == int(dt.datetime.fromisoformat(v["window_start"]).timestamp() * 1000)
        window_start = ts
        assert v["window_end"] == iso(window_start + WINDOW_MS)
        views, unique_users, total = per_window[(window_start, v["page"])]
        assert (v["views"], v["unique_users"]) == (views, unique_users)
        assert v["avg_seconds"] == pytest.approx(total / views / 1000, abs=0.051)
        got.append((window_start, v["rank"], v["page"], v["views"]))
    assert sorted(got) == oracle


def test_sessions_topic_holds_the_python_sessions(result: DemoResult):
    rows = topic_records(result.kafka_dir, SESSIONS_TOPIC)
    oracle = python_sessions(result.initial_events)
    assert len(rows) == len(oracle) == result.written[SESSIONS_TOPIC]
    got = []
    for partition, _, key, value, ts in rows:
        v = json.loads(value)
        assert key == v["user_id"].encode()
        assert partition == partition_for_key(key, PARTITIONS)  # keyed: Kafka's partitioner
        assert iso(ts) == v["session_start"]
        got.append(v)
    assert sorted(got, key=sort_key) == sorted(oracle, key=sort_key)


# --- step 4: the incremental stream --------------------------------------------------------------


def test_second_stream_run_reads_exactly_the_appended_events(result: DemoResult):
    assert len(result.appended_events) == APPENDED
    assert result.stream_runs == [EVENTS, APPENDED]
    assert result.by_page_records == [EVENTS, EVENTS + APPENDED]
    assert result.appended_read_back == APPENDED
    rows = topic_records(result.kafka_dir, BY_PAGE_TOPIC)
    # Every event once (run 1 and run 2 together), re-keyed by its page, its timestamp kept.
    assert all(key == json.loads(value)["page"].encode() for _, _, key, value, _ in rows)
    all_events = result.initial_events + result.appended_events
    assert Counter((value, ts) for _, _, _, value, ts in rows) == Counter(
        (e.value(), e.timestamp) for e in all_events)


# --- step 5: the report --------------------------------------------------------------------------


def test_chart_is_a_png(result: DemoResult):
    data = result.chart.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert data[12:16] == b"IHDR"
    from matplotlib import image

    pixels = image.imread(result.chart)
    assert pixels.ndim == 3 and pixels.shape[0] > 100 and pixels.shape[1] > 300


def test_summary_is_printed(demo_run):
    result, printed = demo_run
    for step in range(1, 6):
        assert f"[{step}/5]" in printed
    assert f"Spark read {EVENTS:,} rows" in printed
    assert "run 2 read exactly the appended events" in printed
    assert f"{SESSIONS_TOPIC}: {result.session_stats['sessions']:,} records" in printed
    assert str(result.chart) in printed
