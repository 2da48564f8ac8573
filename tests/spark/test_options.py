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
        ({"maxOffsetsPerTrigger": "-5"}, "'maxOffsetsPerTrigger'"),
        ({"includeHeaders": "1"}, "'includeHeaders'"),
        ({"kafka.isolation.level": "serializable"}, "'kafka.isolation.level'"),
        ({"startingOffset": "earliest"}, "'startingoffset'"),
        ({"kafka.auto.offset.reset": "earliest"}, "auto.offset.reset"),
        ({"kafka.value.deserializer": "x"}, "value.deserializer"),
        ({"maxTriggerDelay": "soon"}, "'maxTriggerDelay'"),
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
    with pytest.raises(InvalidConfigError, match="minOffsetsPerTrigger"):
        parse({**base, "maxOffsetsPerTrigger": "10", "minOffsetsPerTrigger": "100"}, streaming=True)


def test_sink_options(tmp_path):
    o = parse_sink_options({"path": str(tmp_path), "topic": "t", "kafka.compression.type": "LZ4"})
    assert (o.topic, o.compression_type, o.create_topic_partitions) == ("t", "lz4", None)
    with pytest.raises(InvalidConfigError, match="'createTopicPartitions'"):
        parse_sink_options({"path": str(tmp_path), "createtopicpartitions": "zero"})
    with pytest.raises(InvalidConfigError, match=re.escape("'kafka.compression.type'")):
        parse_sink_options({"path": str(tmp_path), "kafka.compression.type": "brotli"})
    with pytest.raises(InvalidConfigError, match="Unknown option 'subscribe'"):
        parse_sink_options({"path": str(tmp_path), "subscribe": "t"})
