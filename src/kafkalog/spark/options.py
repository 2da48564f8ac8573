"""Options of the ``kafkalog`` Spark source and sink: names, parsing and validation.

Names and rules mirror Spark's built-in Kafka source (``KafkaSourceProvider``): the same option
names, the same precedence (``*Timestamp`` > ``*OffsetsByTimestamp`` > ``*Offsets``), the same
batch/stream restrictions and the same defaults. Two deliberate differences:

* there is no broker, so ``kafka.bootstrap.servers`` is not required, and the consumer/producer
  tuning options listed in ``IGNORED_*`` are accepted and ignored (so a query written for the
  Kafka source runs unchanged);
* an option nobody knows is an error (Spark passes unknown options through silently), because a
  misspelt ``startingOffset`` would otherwise quietly read the wrong range.

Everything here is plain Python (no pyspark import): the planner, the executors and the tests
share it. Every problem raises ``InvalidConfigError`` whose message names the option.
"""

from __future__ import annotations

import functools
import json
import logging
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from kafkalog.errors import InvalidConfigError, KafkaLogError
from kafkalog.storage.filesystem import FILESYSTEM_OPTIONS, is_local_uri, local_path
from kafkalog.storage.log import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_PENDING_UPLOAD_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIERED_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
)
from kafkalog.storage.log_file_utils import INTERNAL_TOPICS

__all__ = [
    "EARLIEST",
    "IGNORED_SINK_OPTIONS",
    "IGNORED_SOURCE_OPTIONS",
    "LATEST",
    "OffsetRangeLimit",
    "SinkOptions",
    "SourceOptions",
    "Subscription",
    "TopicPartition",
    "parse_sink_options",
    "parse_source_options",
    "user_errors",
    "user_errors_iter",
]

log = logging.getLogger(__name__)

# Kafka's special offsets in per-partition JSON (KafkaOffsetRangeLimit.LATEST/EARLIEST).
LATEST = -1
EARLIEST = -2

TopicPartition = tuple[str, int]

# --- option names (canonical spelling; Spark hands them to us lower-cased) -------------------------

PATH = "path"
ASSIGN: Final = "assign"
SUBSCRIBE: Final = "subscribe"
SUBSCRIBE_PATTERN: Final = "subscribePattern"
STRATEGY_OPTIONS = (ASSIGN, SUBSCRIBE, SUBSCRIBE_PATTERN)
STARTING_OFFSETS = "startingOffsets"
ENDING_OFFSETS = "endingOffsets"
STARTING_TIMESTAMP = "startingTimestamp"
ENDING_TIMESTAMP = "endingTimestamp"
STARTING_OFFSETS_BY_TIMESTAMP = "startingOffsetsByTimestamp"
ENDING_OFFSETS_BY_TIMESTAMP = "endingOffsetsByTimestamp"
STARTING_BY_TIMESTAMP_STRATEGY = "startingOffsetsByTimestampStrategy"
FAIL_ON_DATA_LOSS = "failOnDataLoss"
MIN_PARTITIONS = "minPartitions"
MAX_RECORDS_PER_PARTITION = "maxRecordsPerPartition"
MAX_OFFSETS_PER_TRIGGER = "maxOffsetsPerTrigger"
MIN_OFFSETS_PER_TRIGGER = "minOffsetsPerTrigger"
MAX_TRIGGER_DELAY = "maxTriggerDelay"
INCLUDE_HEADERS = "includeHeaders"
FILTER_PUSHDOWN = "filterPushdown"
ISOLATION_LEVEL = "kafka.isolation.level"
TOPIC = "topic"
CREATE_TOPIC_PARTITIONS = "createTopicPartitions"
COMPRESSION_TYPE = "kafka.compression.type"

SOURCE_OPTIONS = (
    PATH, ASSIGN, SUBSCRIBE, SUBSCRIBE_PATTERN, STARTING_OFFSETS, ENDING_OFFSETS, STARTING_TIMESTAMP,
    ENDING_TIMESTAMP, STARTING_OFFSETS_BY_TIMESTAMP, ENDING_OFFSETS_BY_TIMESTAMP,
    STARTING_BY_TIMESTAMP_STRATEGY, FAIL_ON_DATA_LOSS, MIN_PARTITIONS, MAX_RECORDS_PER_PARTITION,
    MAX_OFFSETS_PER_TRIGGER, MIN_OFFSETS_PER_TRIGGER, MAX_TRIGGER_DELAY, INCLUDE_HEADERS, ISOLATION_LEVEL,
    FILTER_PUSHDOWN, *FILESYSTEM_OPTIONS,
)
# The filesystem options are known to the sink only so that a remote path gets the real reason.
SINK_OPTIONS = (PATH, TOPIC, INCLUDE_HEADERS, CREATE_TOPIC_PARTITIONS, COMPRESSION_TYPE, *FILESYSTEM_OPTIONS)

# Options of Spark's Kafka source that only tune the broker connection, the consumer pool or
# consumer-group bookkeeping: meaningless without a broker, accepted so queries port unchanged.
IGNORED_SOURCE_OPTIONS = (
    "kafkaConsumer.pollTimeoutMs",
    "fetchOffset.numRetries",
    "fetchOffset.retryIntervalMs",
    "groupIdPrefix",
)
# Sink-side options that only make sense with a producer talking to a broker.
IGNORED_SINK_OPTIONS = ("checkpointLocation", "queryName")

# kafka.* options Spark itself rejects, with the reason it gives.
_FORBIDDEN_KAFKA = {
    "kafka.auto.offset.reset": "Kafka option 'auto.offset.reset' is not supported. Instead set the source "
    "option 'startingOffsets' to 'earliest' or 'latest' to specify where to start.",
    "kafka.key.deserializer": "Kafka option 'key.deserializer' is not supported: keys are always returned as "
    "binary. Use DataFrame operations to deserialize them.",
    "kafka.value.deserializer": "Kafka option 'value.deserializer' is not supported: values are always "
    "returned as binary. Use DataFrame operations to deserialize them.",
    "kafka.enable.auto.commit": "Kafka option 'enable.auto.commit' is not supported: the source does not "
    "commit any offsets.",
    "kafka.interceptor.classes": "Kafka option 'interceptor.classes' is not supported.",
    "kafka.key.serializer": "Kafka option 'key.serializer' is not supported: keys are written as binary "
    "(string columns as UTF-8).",
    "kafka.value.serializer": "Kafka option 'value.serializer' is not supported: values are written as "
    "binary (string columns as UTF-8).",
}

_CANONICAL = {name.lower(): name for name in (*SOURCE_OPTIONS, *SINK_OPTIONS, *IGNORED_SOURCE_OPTIONS,
                                              *IGNORED_SINK_OPTIONS)}

_JSON_OFFSETS_EXAMPLE = '{"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}'
_JSON_TIMESTAMPS_EXAMPLE = '{"topicA":{"0":1700000000000,"1":1700000000000}}'
# Spark hands a timestamp option to Kafka's ListOffsets as it is, which reads these negative values
# as specs, not times (and refuses any other negative one).
_SPECIAL_TIMESTAMPS: Final = {
    LATEST_TIMESTAMP: "latest",
    EARLIEST_TIMESTAMP: "earliest",
    MAX_TIMESTAMP: "the record with the largest timestamp",
    EARLIEST_LOCAL_TIMESTAMP: "earliest local",
    LATEST_TIERED_TIMESTAMP: "latest tiered (none here)",
    EARLIEST_PENDING_UPLOAD_TIMESTAMP: "earliest pending upload (none here)",
}
_JSON_ASSIGN_EXAMPLE = '{"topicA":[0,1],"topicB":[2,4]}'


def user_errors(fn: Callable) -> Callable:
    """Re-raise kafkalog's deliberate errors without our stack frames: Spark prints the Python
    traceback of a failed data source call, and the message, not our internals, is what helps."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except KafkaLogError as e:
            raise e.with_traceback(None) from None

    return wrapper


def user_errors_iter(it: Iterator) -> Iterator:
    """``user_errors`` for a generator (the errors of an executor-side read)."""
    try:
        yield from it
    except KafkaLogError as e:
        raise e.with_traceback(None) from None


def _err(option: str, message: str) -> InvalidConfigError:
    return InvalidConfigError(f"kafkalog option '{option}': {message}")


def canonical_name(key: str) -> str:
    """The documented spelling of an option name Spark gave us lower-cased."""
    return _CANONICAL.get(key.lower(), key)


# --- value types ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Subscription:
    """Which topic-partitions a query reads: one of ``assign``, ``subscribe``, ``subscribePattern``."""

    kind: Literal["assign", "subscribe", "subscribePattern"]
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assigned: tuple[TopicPartition, ...] = ()

    def matches(self, topic: str) -> bool:
        """Whether a topic of the data directory belongs to the subscription. Kafka's internal topics
        never do: Spark (since 3.4, through the admin client) drops them from every subscription."""
        if topic in INTERNAL_TOPICS:
            return False
        if self.kind == SUBSCRIBE_PATTERN:
            assert self.pattern is not None
            # Spark keeps a topic when the pattern is found anywhere in its name (Regex.findFirstIn).
            return re.search(self.pattern, topic) is not None
        if self.kind == SUBSCRIBE:
            return topic in self.topics
        return any(t == topic for t, _ in self.assigned)

    def describe(self) -> str:
        if self.kind == SUBSCRIBE_PATTERN:
            return f"subscribePattern={self.pattern!r}"
        if self.kind == SUBSCRIBE:
            return f"subscribe={','.join(self.topics)!r}"
        return f"assign={_format_assign(self.assigned)}"


@dataclass(frozen=True, slots=True)
class OffsetRangeLimit:
    """Where a range starts or ends (Spark's ``KafkaOffsetRangeLimit`` family).

    ``kind`` is one of ``earliest``, ``latest``, ``specific`` (``per_partition`` holds offsets,
    -2 = earliest, -1 = latest), ``timestamp`` (``per_partition`` holds timestamps) and
    ``global_timestamp`` (``timestamp`` applies to every partition). ``option`` names the option
    the limit came from, for messages; ``on_no_match`` is ``startingOffsetsByTimestampStrategy``.
    """

    kind: Literal["earliest", "latest", "specific", "timestamp", "global_timestamp"]
    per_partition: tuple[tuple[str, int, int], ...] = ()
    timestamp: int | None = None
    on_no_match: Literal["error", "latest"] = "error"
    option: str | None = None

    def as_map(self) -> dict[TopicPartition, int]:
        return {(t, p): v for t, p, v in self.per_partition}

    def topic_partitions(self) -> set[TopicPartition]:
        return {(t, p) for t, p, _ in self.per_partition}


EARLIEST_LIMIT = OffsetRangeLimit("earliest")
LATEST_LIMIT = OffsetRangeLimit("latest")


@dataclass(frozen=True, slots=True)
class SourceOptions:
    """Everything a read needs, validated. Picklable: travels with the reader to executors."""

    path: str
    subscription: Subscription
    starting: OffsetRangeLimit
    ending: OffsetRangeLimit
    fail_on_data_loss: bool = True
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60 * 1000
    include_headers: bool = False
    read_committed: bool = False
    streaming: bool = False
    # None: decided where the reader is made, by whether Spark keeps pushdown plans per scan.
    filter_pushdown: bool | None = None
    # s3.* options etc. for a remote ``path`` (storage.filesystem.resolve_filesystem), as given.
    filesystem_options: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class SinkOptions:
    """Options of ``df.write.format("kafkalog")`` / ``writeStream``, validated."""

    path: str
    topic: str | None = None
    create_topic_partitions: int | None = None
    compression_type: str = "none"


# --- small parsers -------------------------------------------------------------------------------


def _parse_bool(option: str, raw: str) -> bool:
    text = raw.strip().lower()
    if text == "true":
        return True
    if text == "false":
        return False
    raise _err(option, f"expected 'true' or 'false', got {raw!r}")


_JAVA_LONG: Final = re.compile(r"[+-]?[0-9]+", re.ASCII)


def _parse_long(option: str, raw: str, *, minimum: int | None = None) -> int:
    # Scala's toLong: ASCII digits and a sign only (Python's int() also takes "1_000" and other
    # scripts' digits).
    text = raw.strip()
    if _JAVA_LONG.fullmatch(text) is None:
        raise _err(option, f"expected a whole number, got {raw!r}")
    value = int(text, 10)
    if not -(2**63) <= value < 2**63:
        raise _err(option, f"{raw!r} does not fit a 64-bit long")
    if minimum is not None and value < minimum:
        raise _err(option, f"must be at least {minimum}, got {value}")
    return value


def _parse_int(option: str, raw: str, *, minimum: int) -> int:
    value = _parse_long(option, raw, minimum=minimum)
    if value > 2**31 - 1:
        raise _err(option, f"{value} does not fit a 32-bit int")
    return value


# JavaUtils.timeStringAs, which Spark's Utils.timeStringAsMs reads maxTriggerDelay with: the unit
# in microseconds; a bare number is milliseconds.
_TIME_UNITS_US: Final = {"us": 1, "ms": 1000, "s": 1_000_000, "m": 60_000_000, "min": 60_000_000,
                         "h": 3_600_000_000, "d": 86_400_000_000}
DEFAULT_MAX_TRIGGER_DELAY: Final = "15m"


def _parse_duration_ms(option: str, raw: str) -> int:
    """Spark's time strings: ``15m``, ``30s``, ``100ms``, ``250us``, ``2h``, ``1d``, a bare number
    of milliseconds; no space before the unit; converted to milliseconds truncating, as Java does."""
    match = re.fullmatch(r"(-?[0-9]+)([a-z]+)?", raw.lower().strip(), re.ASCII)
    if match is None:
        raise _err(option, "time must be specified as seconds (s), milliseconds (ms), microseconds (us), "
                           f"minutes (m or min), hour (h), or day (d), e.g. 50s, 100ms or 250us; got {raw!r}")
    unit = match.group(2) or "ms"
    if unit not in _TIME_UNITS_US:
        raise _err(option, f"invalid suffix: {unit!r} in {raw!r}")
    micros = int(match.group(1)) * _TIME_UNITS_US[unit]
    millis = abs(micros) // 1000
    return millis if micros >= 0 else -millis


def _load_json_object(option: str, raw: str, example: str) -> dict:
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        raise _err(option, f"expected JSON such as {example}, got {raw!r}") from None
    if not isinstance(value, dict):
        raise _err(option, f"expected a JSON object such as {example}, got {raw!r}")
    return value


def _is_long(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and -(2**63) <= value < 2**63


def _partition_number(option: str, text: object, raw: str, example: str) -> int:
    # JSON object keys are strings: Spark's JsonUtils reads them with toInt.
    try:
        partition = int(str(text), 10)
    except ValueError:
        raise _err(option, f"partition {text!r} is not a number in {raw!r} (e.g. {example})") from None
    if not 0 <= partition < 2**31:
        raise _err(option, f"partition {partition} is out of range in {raw!r}")
    return partition


def parse_partition_values(option: str, raw: str, example: str) -> tuple[tuple[str, int, int], ...]:
    """``{"topic": {"0": n, ...}, ...}`` (Spark's ``JsonUtils.partitionOffsets``/``partitionTimestamps``)."""
    obj = _load_json_object(option, raw, example)
    result = []
    for topic, partitions in obj.items():
        if not isinstance(partitions, dict):
            raise _err(option, f"expected e.g. {example}, got {raw!r}")
        for key, value in partitions.items():
            partition = _partition_number(option, key, raw, example)
            if not _is_long(value):
                raise _err(option, f"value for {topic}-{partition} must be a whole number, got {value!r}")
            result.append((topic, partition, value))
    if not result:
        raise _err(option, f"no topic-partitions given in {raw!r} (expected e.g. {example})")
    return tuple(sorted(result))


def _parse_assign(raw: str) -> tuple[TopicPartition, ...]:
    if not raw.strip().startswith("{"):
        raise _err(ASSIGN, f"no topicpartitions to assign in {raw!r} (expected e.g. {_JSON_ASSIGN_EXAMPLE})")
    obj = _load_json_object(ASSIGN, raw, _JSON_ASSIGN_EXAMPLE)
    assigned: set[TopicPartition] = set()
    for topic, partitions in obj.items():
        if not isinstance(partitions, list):
            raise _err(ASSIGN, f"expected e.g. {_JSON_ASSIGN_EXAMPLE}, got {raw!r}")
        for p in partitions:
            if not _is_long(p) or not 0 <= p < 2**31:
                raise _err(ASSIGN, f"partition {p!r} of topic {topic!r} is not a valid partition number")
            assigned.add((topic, p))
    if not assigned:
        raise _err(ASSIGN, f"no topicpartitions to assign in {raw!r}")
    return tuple(sorted(assigned))


def _format_assign(assigned: tuple[TopicPartition, ...]) -> str:
    topics: dict[str, list[int]] = {}
    for t, p in assigned:
        topics.setdefault(t, []).append(p)
    return json.dumps(topics, separators=(",", ":"))


def _parse_subscription(opts: Mapping[str, str]) -> Subscription:
    given = [name for name in STRATEGY_OPTIONS if name.lower() in opts]
    if not given:
        raise InvalidConfigError(
            "One of the following options must be specified for the kafkalog source: "
            "assign, subscribe, subscribePattern"
        )
    if len(given) > 1:
        raise InvalidConfigError(
            "Only one of the following options can be specified for the kafkalog source: "
            f"assign, subscribe, subscribePattern (got {', '.join(given)})"
        )
    kind = given[0]
    raw = opts[kind.lower()]
    if kind == SUBSCRIBE:
        topics = tuple(dict.fromkeys(t.strip() for t in raw.split(",") if t.strip()))
        if not topics:
            raise _err(SUBSCRIBE, f"no topics to subscribe to in {raw!r}")
        return Subscription(SUBSCRIBE, topics=topics)
    if kind == SUBSCRIBE_PATTERN:
        pattern = raw.strip()
        if not pattern:
            raise _err(SUBSCRIBE_PATTERN, f"pattern to subscribe is empty ({raw!r})")
        try:
            re.compile(pattern)
        except re.error as e:
            raise _err(SUBSCRIBE_PATTERN, f"invalid regular expression {pattern!r}: {e}") from None
        return Subscription(SUBSCRIBE_PATTERN, pattern=pattern)
    return Subscription(ASSIGN, assigned=_parse_assign(raw))


def _range_limit(
    opts: Mapping[str, str],
    global_timestamp_key: str,
    by_timestamp_key: str,
    offsets_key: str,
    default: OffsetRangeLimit,
    on_no_match: Literal["error", "latest"],
) -> OffsetRangeLimit:
    """Spark's ``getKafkaOffsetRangeLimit``: the first option present wins, in this order."""
    if global_timestamp_key.lower() in opts:
        ts = _parse_long(global_timestamp_key, opts[global_timestamp_key.lower()])
        _check_timestamp(global_timestamp_key, ts, "the timestamp")
        return OffsetRangeLimit("global_timestamp", timestamp=ts, on_no_match=on_no_match,
                                option=global_timestamp_key)
    if by_timestamp_key.lower() in opts:
        values = parse_partition_values(by_timestamp_key, opts[by_timestamp_key.lower()],
                                        _JSON_TIMESTAMPS_EXAMPLE)
        for topic, partition, ts in values:
            _check_timestamp(by_timestamp_key, ts, f"the timestamp for {topic}-{partition}")
        return OffsetRangeLimit("timestamp", per_partition=values, on_no_match=on_no_match,
                                option=by_timestamp_key)
    if offsets_key.lower() in opts:
        raw = opts[offsets_key.lower()].strip()
        if raw.lower() == "earliest":
            return OffsetRangeLimit("earliest", option=offsets_key)
        if raw.lower() == "latest":
            return OffsetRangeLimit("latest", option=offsets_key)
        values = parse_partition_values(offsets_key, raw, _JSON_OFFSETS_EXAMPLE)
        for topic, partition, off in values:
            if off < EARLIEST:
                raise _err(offsets_key, f"offset {off} for {topic}-{partition} is invalid "
                                        "(use -2 for earliest, -1 for latest)")
        return OffsetRangeLimit("specific", per_partition=values, option=offsets_key)
    return default


def _check_offset_limit_validity(starting: OffsetRangeLimit, ending: OffsetRangeLimit) -> None:
    """Spark's ``checkOffsetLimitValidity``, before anything is read: starting and ending offsets
    (or timestamps) given per partition name the same partitions, and no start is past its end
    (earliest and latest, -2 and -1, are not compared)."""
    if starting.kind != ending.kind or starting.kind not in ("specific", "timestamp"):
        return
    starts = {(t, p): v for t, p, v in starting.per_partition}
    ends = {(t, p): v for t, p, v in ending.per_partition}
    if set(starts) != set(ends):
        raise InvalidConfigError(
            "[MISMATCHED_TOPIC_PARTITIONS_BETWEEN_START_OFFSET_AND_END_OFFSET] The specified start offset "
            "and end offset should have the same topic-partitions. Topic-partitions for start offset "
            f"('{starting.option}'): {_format_assign(tuple(sorted(starts)))}, topic-partitions for end "
            f"offset ('{ending.option}'): {_format_assign(tuple(sorted(ends)))}."
        )
    condition = "[UNRESOLVED_START_OFFSET_GREATER_THAN_END_OFFSET] " if starting.kind == "specific" else ""
    what = "offset" if starting.kind == "specific" else "timestamp"
    for (topic, partition), start in sorted(starts.items()):
        end = ends[(topic, partition)]
        if start > end >= 0:
            raise InvalidConfigError(
                f"{condition}The specified start {what} {start} is greater than the end {what} {end} for "
                f"topic {topic} partition {partition} ('{starting.option}', '{ending.option}')."
            )


def _check_timestamp(option: str, ts: int, what: str) -> None:
    if ts < 0 and ts not in _SPECIAL_TIMESTAMPS:
        specs = ", ".join(f"{k} {v}" for k, v in _SPECIAL_TIMESTAMPS.items())
        raise _err(option, f"{what} is negative ({ts}): give milliseconds since the epoch, or one of "
                           f"the special timestamps of Kafka's ListOffsets ({specs})")


def _check_names(
    opts: Mapping[str, str], known: tuple[str, ...], ignored: tuple[str, ...], what: str
) -> None:
    allowed = {n.lower() for n in (*known, *ignored)}
    for key in opts:
        low = key.lower()
        if low in _FORBIDDEN_KAFKA:
            raise InvalidConfigError(_FORBIDDEN_KAFKA[low])
        if low in allowed or low.startswith("kafka."):
            continue
        raise InvalidConfigError(
            f"Unknown option '{key}' for the kafkalog {what}. Known options: {', '.join(known)}; "
            f"accepted and ignored: {', '.join(ignored)} and kafka.* consumer/producer settings"
        )


def _path(opts: Mapping[str, str], what: str, *, local_only: bool = False) -> str:
    raw = opts.get(PATH)
    if raw is None or not raw.strip():
        raise InvalidConfigError(
            f"kafkalog option 'path' is required: the data directory of the {what} "
            "(.option('path', dir) or .load(dir) / .save(dir))"
        )
    path = raw.strip()
    if not is_local_uri(path):
        # A remote data directory (s3://bucket/prefix, ...) is checked when the catalog lists it.
        if local_only:
            raise _err(PATH, f"{path!r} is not a local directory: writes need a local directory")
        return path
    # Spark adds no scheme, but users coming from HDFS paths often do.
    path = str(local_path(path))
    if not Path(path).is_dir():
        raise _err(PATH, f"data directory {path!r} does not exist or is not a directory")
    return path


def _filesystem_options(opts: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    known = {name.lower() for name in FILESYSTEM_OPTIONS}
    return tuple(sorted((k, v) for k, v in opts.items() if k in known))


# --- entry points --------------------------------------------------------------------------------


def parse_source_options(options: Mapping[str, str], *, streaming: bool | None) -> SourceOptions:
    """Validate source options the way Spark's ``validateBatchOptions``/``validateStreamOptions`` do.

    ``streaming=None`` checks only what batch and stream queries share (used by ``schema()``, which
    runs before Spark says which kind of query it is).
    """
    opts = {k.lower(): v for k, v in options.items()}
    _check_names(opts, SOURCE_OPTIONS, IGNORED_SOURCE_OPTIONS, "source")
    path = _path(opts, "topics to read")
    subscription = _parse_subscription(opts)

    strategy_raw = opts.get(STARTING_BY_TIMESTAMP_STRATEGY.lower(), "error").strip().lower()
    if strategy_raw not in ("error", "latest"):
        raise _err(STARTING_BY_TIMESTAMP_STRATEGY, f"expected 'error' or 'latest', got {strategy_raw!r}")
    on_no_match: Literal["error", "latest"] = "error" if strategy_raw == "error" else "latest"

    if streaming is True:
        # Spark's validateStreamOptions refuses these two and lets endingTimestamp pass unread.
        if ENDING_OFFSETS.lower() in opts:
            raise _err(ENDING_OFFSETS, "ending offset not valid in streaming queries (a stream has no end)")
        if ENDING_OFFSETS_BY_TIMESTAMP.lower() in opts:
            raise _err(ENDING_OFFSETS_BY_TIMESTAMP,
                       "ending timestamp not valid in streaming queries (a stream has no end)")
        if ENDING_TIMESTAMP.lower() in opts:
            log.warning("kafkalog option '%s' is ignored in streaming queries (a stream has no end), "
                        "as Spark's Kafka source ignores it", ENDING_TIMESTAMP)
            opts = {k: v for k, v in opts.items() if k != ENDING_TIMESTAMP.lower()}
    starting = _range_limit(opts, STARTING_TIMESTAMP, STARTING_OFFSETS_BY_TIMESTAMP, STARTING_OFFSETS,
                            LATEST_LIMIT if streaming else EARLIEST_LIMIT, on_no_match)
    ending = _range_limit(opts, ENDING_TIMESTAMP, ENDING_OFFSETS_BY_TIMESTAMP, ENDING_OFFSETS,
                          LATEST_LIMIT, "latest")
    if streaming is False:
        if starting.kind == "latest":
            raise _err(STARTING_OFFSETS, "starting offset can't be latest for batch queries on Kafka")
        if starting.kind == "specific":
            for topic, partition, off in starting.per_partition:
                if off == LATEST:
                    raise _err(STARTING_OFFSETS, f"starting offset for {topic}-{partition} can't be "
                                                 "latest (-1) for batch queries")
        if ending.kind == "earliest":
            raise _err(ENDING_OFFSETS, "ending offset can't be earliest for batch queries on Kafka")
        if ending.kind == "specific":
            for topic, partition, off in ending.per_partition:
                if off == EARLIEST:
                    raise _err(ENDING_OFFSETS, f"ending offset for {topic}-{partition} can't be "
                                               "earliest (-2) for batch queries")
        _check_offset_limit_validity(starting, ending)
    for limit in (starting, ending):
        # Spark: "If startingOffsets contains specific offsets, you must specify all TopicPartitions."
        if (limit.per_partition and subscription.kind == ASSIGN
                and limit.topic_partitions() != set(subscription.assigned)):
            raise _err(limit.option or "", "must name exactly the assigned topic-partitions "
                       f"(assigned: {_format_assign(subscription.assigned)}, "
                       f"given: {_format_assign(tuple(sorted(limit.topic_partitions())))})")

    fail_on_data_loss = _parse_bool(FAIL_ON_DATA_LOSS, opts.get(FAIL_ON_DATA_LOSS.lower(), "true"))
    include_headers = _parse_bool(INCLUDE_HEADERS, opts.get(INCLUDE_HEADERS.lower(), "false"))
    pushdown_raw = opts.get(FILTER_PUSHDOWN.lower(), "auto").strip().lower()
    if pushdown_raw not in ("auto", "true", "false"):
        raise _err(FILTER_PUSHDOWN,
                   f"expected 'auto', 'true' or 'false', got {opts[FILTER_PUSHDOWN.lower()]!r}")
    filter_pushdown = None if pushdown_raw == "auto" else pushdown_raw == "true"
    min_partitions = None
    if MIN_PARTITIONS.lower() in opts:
        min_partitions = _parse_int(MIN_PARTITIONS, opts[MIN_PARTITIONS.lower()], minimum=1)
    max_records = None
    if MAX_RECORDS_PER_PARTITION.lower() in opts:
        max_records = _parse_long(MAX_RECORDS_PER_PARTITION, opts[MAX_RECORDS_PER_PARTITION.lower()],
                                  minimum=1)
    # Spark's validateGeneralOptions compares the two bounds in any query; only a stream reads them
    # (and maxTriggerDelay), and a batch query says it ignores them.
    raw_max, raw_min = opts.get(MAX_OFFSETS_PER_TRIGGER.lower()), opts.get(MIN_OFFSETS_PER_TRIGGER.lower())
    if raw_max is not None and raw_min is not None:
        low = _parse_long(MIN_OFFSETS_PER_TRIGGER, raw_min)
        high = _parse_long(MAX_OFFSETS_PER_TRIGGER, raw_max)
        if low > high:
            raise _err(MIN_OFFSETS_PER_TRIGGER, f"the value of minOffsetPerTrigger({low}) is higher "
                                                f"than the maxOffsetsPerTrigger({high})")
    max_per_trigger = min_per_trigger = None
    max_delay = _parse_duration_ms(MAX_TRIGGER_DELAY, DEFAULT_MAX_TRIGGER_DELAY)
    if streaming:
        # At least 1 (Spark takes 0, and such a stream never moves).
        if raw_max is not None:
            max_per_trigger = _parse_long(MAX_OFFSETS_PER_TRIGGER, raw_max, minimum=1)
        if raw_min is not None:
            min_per_trigger = _parse_long(MIN_OFFSETS_PER_TRIGGER, raw_min, minimum=1)
        if MAX_TRIGGER_DELAY.lower() in opts:
            max_delay = _parse_duration_ms(MAX_TRIGGER_DELAY, opts[MAX_TRIGGER_DELAY.lower()])
    elif streaming is False:
        for name in (MAX_OFFSETS_PER_TRIGGER, MIN_OFFSETS_PER_TRIGGER, MAX_TRIGGER_DELAY):
            if name.lower() in opts:
                log.warning("kafkalog option '%s' is ignored in batch queries", name)

    isolation = opts.get(ISOLATION_LEVEL.lower(), "read_uncommitted").strip().lower()
    if isolation not in ("read_uncommitted", "read_committed"):
        raise _err(ISOLATION_LEVEL, f"expected 'read_uncommitted' or 'read_committed', got {isolation!r}")

    return SourceOptions(
        path=path,
        subscription=subscription,
        starting=starting,
        ending=ending,
        fail_on_data_loss=fail_on_data_loss,
        min_partitions=min_partitions,
        max_records_per_partition=max_records,
        max_offsets_per_trigger=max_per_trigger,
        min_offsets_per_trigger=min_per_trigger,
        max_trigger_delay_ms=max_delay,
        include_headers=include_headers,
        read_committed=isolation == "read_committed",
        streaming=bool(streaming),
        filter_pushdown=filter_pushdown,
        filesystem_options=_filesystem_options(opts),
    )


_COMPRESSION_NAMES = ("none", "gzip", "snappy", "lz4", "zstd")


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    opts = {k.lower(): v for k, v in options.items()}
    _check_names(opts, SINK_OPTIONS, IGNORED_SINK_OPTIONS, "sink")
    path = _path(opts, "topics to write", local_only=True)
    topic = opts.get(TOPIC.lower())
    if topic is not None:
        topic = topic.strip()
        if not topic:
            raise _err(TOPIC, "must not be empty")
    create = None
    if CREATE_TOPIC_PARTITIONS.lower() in opts:
        create = _parse_int(CREATE_TOPIC_PARTITIONS, opts[CREATE_TOPIC_PARTITIONS.lower()], minimum=1)
    compression = opts.get(COMPRESSION_TYPE.lower(), "none").strip().lower()
    if compression == "uncompressed":
        compression = "none"
    if compression not in _COMPRESSION_NAMES:
        raise _err(COMPRESSION_TYPE, f"expected one of {', '.join(_COMPRESSION_NAMES)}, got {compression!r}")
    if INCLUDE_HEADERS.lower() in opts:
        _parse_bool(INCLUDE_HEADERS, opts[INCLUDE_HEADERS.lower()])
    return SinkOptions(path=path, topic=topic, create_topic_partitions=create, compression_type=compression)
