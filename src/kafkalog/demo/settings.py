"""What the demo builds and when: topic names, configs, the simulated morning, Spark job settings."""

from __future__ import annotations

import datetime as dt

from kafkalog.errors import KafkaLogError
from kafkalog.records import CompressionType

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
