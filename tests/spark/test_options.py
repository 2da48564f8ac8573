"""Option parsing and validation: Spark's Kafka-source rules, one clear error naming the option."""

from __future__ import annotations

import re

import pytest

from kafkalog.errors import InvalidConfigError
from kafkalog.spark.options import (
    IGNORED_SOURCE_OPTIONS,
    parse_sink_options,
    parse_source_options,
)


@pytest.fixture()
def base(tmp_path):
    return {"path": str(tmp_path), "subscribe": "t"}


def parse(opts, streaming=False):
    # Spark hands options over lower-cased (CaseInsensitiveDict).
    return parse_source_options({k.lower(): v for k, v in opts.items()}, streaming=streaming)


def test_defaults_batch_and_stream(base):
    o = parse(base)
    assert o.starting.kind == "earliest" and o.ending.kind == "latest"
    assert o.fail_on_data_loss and not o.include_headers and not o.read_committed
    s = parse(base, streaming=True)
    assert s.starting.kind == "latest"


def test_subscription_kinds(base, tmp_path):
    assert parse({**base, "subscribe": " a, b ,,a"}).subscription.topics == ("a", "b")
    p = parse({"path": str(tmp_path), "subscribePattern": "ord.*"}).subscription
    # found anywhere in the name, as Spark does; internal topics are never listed
    assert p.matches("orders") and p.matches("xorders") and not p.matches("shipments")
    everything = parse({"path": str(tmp_path), "subscribePattern": ".*"}).subscription
    assert everything.matches("__x") and not everything.matches("__consumer_offsets")
    a = parse({"path": str(tmp_path), "assign": '{"t":[1,0],"u":[2]}'}).subscription
    assert a.assigned == (("t", 0), ("t", 1), ("u", 2))


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        ({"assign": '{"t":[0]}'}, "Only one of"),
        ({"subscribe": " , "}, "'subscribe'"),
        ({"startingOffsets": "latest"}, "'startingOffsets'"),
        ({"startingOffsets": '{"t":{"0":-1}}'}, "'startingOffsets'"),
        ({"endingOffsets": "earliest"}, "'endingOffsets'"),
        ({"endingOffsets": '{"t":{"0":-2}}'}, "'endingOffsets'"),
        ({"startingOffsets": "{not json"}, "'startingOffsets'"),
        ({"startingOffsets": '{"t":{"x":1}}'}, "'startingOffsets'"),
        ({"startingTimestamp": "soon"}, "'startingTimestamp'"),
        ({"startingOffsetsByTimestampStrategy": "maybe"}, "'startingOffsetsByTimestampStrategy'"),
        ({"failOnDataLoss": "yes"}, "'failOnDataLoss'"),
        ({"minPartitions": "0"}, "'minPartitions'"),
        ({"startingTimestamp": "1_000"}, "'startingTimestamp'"),
        ({"startingTimestamp": "-7"}, "'startingTimestamp'"),
        ({"endingOffsetsByTimestamp": '{"t":{"0":-100}}'}, "'endingOffsetsByTimestamp'"),
        ({"includeHeaders": "1"}, "'includeHeaders'"),
        ({"kafka.isolation.level": "serializable"}, "'kafka.isolation.level'"),
        ({"startingOffset": "earliest"}, "'startingoffset'"),
        ({"kafka.auto.offset.reset": "earliest"}, "auto.offset.reset"),
        ({"kafka.value.deserializer": "x"}, "value.deserializer"),
        ({"filterPushdown": "maybe"}, "'filterPushdown'"),
    ],
)
def test_batch_errors_name_the_option(base, extra, needle):
    with pytest.raises(InvalidConfigError, match=needle.replace("(", r"\(").replace(".", r"\.")):
        parse({**base, **extra})


@pytest.mark.parametrize(("key", "message"), [
    ("endingOffsets", "ending offset not valid in streaming"),
    ("endingOffsetsByTimestamp", "ending timestamp not valid in streaming"),
])
def test_ending_options_rejected_in_streams(base, key, message):
    with pytest.raises(InvalidConfigError, match=f"'{key}': {message}"):
        parse({**base, key: '{"t":{"0":5}}'}, streaming=True)


def test_ending_timestamp_is_ignored_in_streams_as_spark_does(base, monkeypatch):
    import kafkalog.spark.options as options

    warned: list[str] = []
    monkeypatch.setattr(options.log, "warning", lambda msg, *args: warned.append(msg % args))
    s = parse({**base, "endingTimestamp": "5"}, streaming=True)
    assert s.ending == parse(base, streaming=True).ending
    assert any("'endingTimestamp' is ignored in streaming queries" in w for w in warned)


def test_bad_pattern(tmp_path):
    with pytest.raises(InvalidConfigError, match="'subscribePattern'"):
        parse({"path": str(tmp_path), "subscribePattern": "("})


def test_missing_path_and_subscription(tmp_path):
    with pytest.raises(InvalidConfigError, match="'path'"):
        parse({"subscribe": "t"})
    with pytest.raises(InvalidConfigError, match="'path'"):
        parse({"subscribe": "t", "path": str(tmp_path / "nope")})
    with pytest.raises(InvalidConfigError, match="One of the following options must be specified"):
        parse({"path": str(tmp_path)})


def test_precedence_timestamp_over_by_timestamp_over_offsets(base):
    o = parse({**base, "startingOffsets": "earliest", "startingOffsetsByTimestamp": '{"t":{"0":5}}',
               "startingTimestamp": "7"})
    assert o.starting.kind == "global_timestamp" and o.starting.timestamp == 7
    o = parse({**base, "startingOffsets": "earliest", "startingOffsetsByTimestamp": '{"t":{"0":5}}'})
    assert o.starting.kind == "timestamp" and o.starting.as_map() == {("t", 0): 5}
    o = parse({**base, "endingOffsets": '{"t":{"0":9,"1":-1}}'})
    assert o.ending.kind == "specific" and o.ending.as_map() == {("t", 0): 9, ("t", 1): -1}
    o = parse({**base, "startingTimestamp": "1", "startingOffsetsByTimestampStrategy": "LATEST"})
    assert o.starting.on_no_match == "latest"


def test_assign_must_match_specific_offsets(tmp_path):
    with pytest.raises(InvalidConfigError, match="assigned topic-partitions"):
        parse({"path": str(tmp_path), "assign": '{"t":[0,1]}', "startingOffsets": '{"t":{"0":1}}'})


def test_ignored_options_are_accepted(base):
    extra = {name: "1" for name in IGNORED_SOURCE_OPTIONS}
    extra["kafka.bootstrap.servers"] = "localhost:9092"
    extra["kafka.group.id"] = "g"
    assert parse({**base, **extra}) == parse(base)  # accepted, and they change nothing


def test_trigger_options(base):
    o = parse({**base, "maxOffsetsPerTrigger": "100", "minOffsetsPerTrigger": "10", "maxTriggerDelay": "2m"},
              streaming=True)
    assert (o.max_offsets_per_trigger, o.min_offsets_per_trigger, o.max_trigger_delay_ms) == (100, 10, 120000)
    assert parse(base, streaming=True).max_trigger_delay_ms == 15 * 60 * 1000
    # Both bounds are compared in any query, as Spark's validateGeneralOptions does.
    for streaming in (True, False):
        with pytest.raises(InvalidConfigError, match="minOffsetsPerTrigger"):
            parse({**base, "maxOffsetsPerTrigger": "10", "minOffsetsPerTrigger": "100"}, streaming=streaming)
    for extra, needle in [({"maxOffsetsPerTrigger": "-5"}, "'maxOffsetsPerTrigger'"),
                          ({"minOffsetsPerTrigger": "0"}, "'minOffsetsPerTrigger'"),
                          ({"maxTriggerDelay": "soon"}, "'maxTriggerDelay'"),
                          ({"maxTriggerDelay": "5 s"}, "'maxTriggerDelay'"),
                          ({"maxTriggerDelay": "5weeks"}, "invalid suffix")]:
        with pytest.raises(InvalidConfigError, match=needle):
            parse({**base, **extra}, streaming=True)


@pytest.mark.parametrize(("raw", "ms"), [
    ("250", 250), ("250ms", 250), ("30s", 30_000), ("2m", 120_000), ("2min", 120_000), ("1h", 3_600_000),
    ("1d", 86_400_000), ("1500us", 1), ("999us", 0), ("-1500us", -1), (" 10S ", 10_000),
])
def test_max_trigger_delay_reads_spark_time_strings(base, raw, ms):
    # JavaUtils.timeStringAs: these units, a bare number in ms, truncation toward zero.
    assert parse({**base, "maxTriggerDelay": raw}, streaming=True).max_trigger_delay_ms == ms


def test_trigger_options_are_ignored_by_batch_queries_with_a_warning(base, monkeypatch):
    import kafkalog.spark.options as options

    warned: list[str] = []
    monkeypatch.setattr(options.log, "warning", lambda msg, *args: warned.append(msg % args))
    o = parse({**base, "maxOffsetsPerTrigger": "abc", "maxTriggerDelay": "soon"})
    assert o.max_offsets_per_trigger is None and o.min_offsets_per_trigger is None
    o = parse({**base, "minOffsetsPerTrigger": "0"})
    assert o.min_offsets_per_trigger is None
    assert sorted(warned) == [f"kafkalog option '{n}' is ignored in batch queries"
                              for n in ("maxOffsetsPerTrigger", "maxTriggerDelay", "minOffsetsPerTrigger")]


def test_timestamp_options_take_kafkas_special_timestamps(base):
    # Spark hands them to ListOffsets unchanged: -1 latest, -2 earliest, -3 largest timestamp ...
    for ts in (-1, -2, -3, -4, -5, -6, 0):
        assert parse({**base, "startingTimestamp": str(ts)}).starting.timestamp == ts
    o = parse({**base, "startingOffsetsByTimestamp": '{"t":{"0":-2,"1":5}}',
               "endingOffsetsByTimestamp": '{"t":{"0":-1,"1":-1}}'})
    assert o.starting.as_map() == {("t", 0): -2, ("t", 1): 5}


def test_start_and_end_checked_against_each_other_before_reading(base):
    # Spark's checkOffsetLimitValidity (batch): the same partitions, and no start past its end;
    # earliest and latest (-2, -1) are not compared.
    greater = r"UNRESOLVED_START_OFFSET_GREATER_THAN_END_OFFSET.* start offset 7 is greater than the end"
    with pytest.raises(InvalidConfigError, match=greater + " offset 5 for topic t partition 1"):
        parse({**base, "startingOffsets": '{"t":{"0":1,"1":7}}', "endingOffsets": '{"t":{"0":2,"1":5}}'})
    with pytest.raises(InvalidConfigError, match="start timestamp 9 is greater than the end timestamp 8"):
        parse({**base, "startingOffsetsByTimestamp": '{"t":{"0":9}}',
               "endingOffsetsByTimestamp": '{"t":{"0":8}}'})
    mismatched = "MISMATCHED_TOPIC_PARTITIONS_BETWEEN_START_OFFSET_AND_END_OFFSET"
    with pytest.raises(InvalidConfigError, match=mismatched):
        parse({**base, "startingOffsets": '{"t":{"0":1}}', "endingOffsets": '{"t":{"0":2,"1":5}}'})
    ok = parse({**base, "startingOffsets": '{"t":{"0":-2,"1":3}}', "endingOffsets": '{"t":{"0":2,"1":-1}}'})
    assert ok.ending.as_map() == {("t", 0): 2, ("t", 1): -1}
    # Different kinds (offsets against a timestamp) are compared once resolved, as in Spark.
    assert parse({**base, "startingOffsets": '{"t":{"0":9}}', "endingTimestamp": "8"}).ending.timestamp == 8


def test_sink_options(tmp_path):
    o = parse_sink_options({"path": str(tmp_path), "topic": "t", "kafka.compression.type": "LZ4"})
    assert (o.topic, o.compression_type, o.create_topic_partitions) == ("t", "lz4", None)
    with pytest.raises(InvalidConfigError, match="'createTopicPartitions'"):
        parse_sink_options({"path": str(tmp_path), "createtopicpartitions": "zero"})
    with pytest.raises(InvalidConfigError, match=re.escape("'kafka.compression.type'")):
        parse_sink_options({"path": str(tmp_path), "kafka.compression.type": "brotli"})
    with pytest.raises(InvalidConfigError, match="Unknown option 'subscribe'"):
        parse_sink_options({"path": str(tmp_path), "subscribe": "t"})
