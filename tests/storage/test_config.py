"""LogConfig: Kafka's names, defaults, string forms, validation, derived values, persistence."""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path

import pytest

from kafkalog.errors import InvalidConfigError, InvalidTopicError, KafkaStorageError
from kafkalog.records.types import CompressionType, TimestampType
from kafkalog.storage.config import (
    LEGACY_TOPIC_CONFIGS_FILE,
    TOPIC_CONFIGS_FILE,
    LogConfig,
    read_topic_configs,
    write_topic_configs,
)

LONG_MAX = 9223372036854775807

# Kafka's topic-config defaults (spec §11; storage LogConfig at the 3.9-era snapshot).
KAFKA_DEFAULTS = {
    "segment.bytes": "1073741824",
    "segment.ms": "604800000",
    "segment.jitter.ms": "0",
    "segment.index.bytes": "10485760",
    "index.interval.bytes": "4096",
    "retention.ms": "604800000",
    "retention.bytes": "-1",
    "flush.messages": str(LONG_MAX),
    "flush.ms": str(LONG_MAX),
    "max.message.bytes": "1048588",
    "message.timestamp.type": "CreateTime",
    "message.timestamp.difference.max.ms": str(LONG_MAX),
    "message.timestamp.before.max.ms": str(LONG_MAX),
    "message.timestamp.after.max.ms": str(LONG_MAX),
    "cleanup.policy": "delete",
    "preallocate": "false",
    "min.insync.replicas": "1",
    "compression.type": "producer",
    "compression.gzip.level": "-1",
    "compression.lz4.level": "9",
    "compression.zstd.level": "3",
    "file.delete.delay.ms": "60000",
    "delete.retention.ms": "86400000",
    "min.compaction.lag.ms": "0",
    "max.compaction.lag.ms": str(LONG_MAX),
    "min.cleanable.dirty.ratio": "0.5",
    "unclean.leader.election.enable": "false",
    "message.format.version": "3.0-IV1",
    "message.downconversion.enable": "true",
    "leader.replication.throttled.replicas": "",
    "follower.replication.throttled.replicas": "",
    "local.retention.ms": "-2",
    "local.retention.bytes": "-2",
    "remote.storage.enable": "false",
    "remote.log.copy.disable": "false",
    "remote.log.delete.on.disable": "false",
}


def test_defaults_are_kafkas() -> None:
    config = LogConfig()
    assert config.to_props(include_defaults=True) == KAFKA_DEFAULTS
    assert config.to_props() == {}
    assert LogConfig.config_names() == sorted(KAFKA_DEFAULTS)
    assert config.segment_bytes == 1024**3
    assert config.message_timestamp_type is TimestampType.CREATE_TIME
    assert config.cleanup_policy == ("delete",)


def test_attribute_names_are_kafka_names_in_snake_case() -> None:
    attrs = {f.name for f in dataclasses.fields(LogConfig)} - {"overridden"}
    assert attrs == {name.replace(".", "_") for name in KAFKA_DEFAULTS}
    for name in KAFKA_DEFAULTS:
        assert LogConfig().get(name) == LogConfig.default_value(name)


def test_value_type_is_frozen_and_hashable() -> None:
    config = LogConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.segment_bytes = 5  # type: ignore[misc]
    assert hash(config) == hash(LogConfig())


def test_from_props_parses_kafka_string_forms() -> None:
    config = LogConfig.from_props(
        {
            "segment.bytes": " 1024 ",
            "segment.ms": "+60000",
            "retention.ms": -1,
            "preallocate": "TRUE",
            "unclean.leader.election.enable": " False ",
            "cleanup.policy": " compact ,  delete ",
            "compression.type": "zstd",
            "message.timestamp.type": "LogAppendTime",
            "min.cleanable.dirty.ratio": "0.25",
            "leader.replication.throttled.replicas": "0:1, 1:2",
            "follower.replication.throttled.replicas": "*",
            "message.format.version": " 2.8 ",
        }
    )
    assert config.segment_bytes == 1024
    assert config.segment_ms == 60000
    assert config.retention_ms == -1
    assert config.preallocate is True
    assert config.unclean_leader_election_enable is False
    assert config.cleanup_policy == ("compact", "delete")
    assert config.compression_type == "zstd"
    assert config.message_timestamp_type is TimestampType.LOG_APPEND_TIME
    assert config.min_cleanable_dirty_ratio == 0.25
    assert config.leader_replication_throttled_replicas == ("0:1", "1:2")
    assert config.follower_replication_throttled_replicas == ("*",)
    assert config.message_format_version == "2.8"


def test_direct_construction_validates_and_normalises() -> None:
    assert LogConfig(segment_bytes="2048").segment_bytes == 2048  # type: ignore[arg-type]
    assert LogConfig(cleanup_policy=["compact"]).cleanup_policy == ("compact",)  # type: ignore[arg-type]
    with pytest.raises(InvalidConfigError, match=r"segment\.bytes"):
        LogConfig(segment_bytes=13)


@pytest.mark.parametrize(
    ("name", "value", "reason"),
    [
        ("segment.bytes", "13", "Value must be at least 14"),
        ("segment.bytes", "2147483648", "Not a number of type INT"),
        ("segment.bytes", "1_000", "Not a number of type INT"),
        ("segment.bytes", "1e3", "Not a number of type INT"),
        ("segment.bytes", True, "Expected value to be a 32-bit integer"),
        ("segment.ms", "0", "Value must be at least 1"),
        ("segment.ms", "9223372036854775808", "Not a number of type LONG"),
        ("segment.jitter.ms", "-1", "Value must be at least 0"),
        ("segment.index.bytes", "3", "Value must be at least 4"),
        ("index.interval.bytes", "-1", "Value must be at least 0"),
        ("retention.ms", "-2", "Value must be at least -1"),
        ("flush.messages", "0", "Value must be at least 1"),
        ("flush.ms", "-1", "Value must be at least 0"),
        ("max.message.bytes", "-1", "Value must be at least 0"),
        ("max.compaction.lag.ms", "0", "Value must be at least 1"),
        ("min.insync.replicas", "0", "Value must be at least 1"),
        ("local.retention.ms", "-3", "Value must be at least -2"),
        ("min.cleanable.dirty.ratio", "1.5", "Value must be no more than 1"),
        ("min.cleanable.dirty.ratio", "-0.1", "Value must be at least 0"),
        ("min.cleanable.dirty.ratio", "half", "Not a number of type DOUBLE"),
        ("min.cleanable.dirty.ratio", "NaN", "NaN"),
        ("cleanup.policy", "compact,", "String must be one of: compact, delete"),
        ("cleanup.policy", "Compact", "String must be one of: compact, delete"),
        ("compression.type", "GZIP", "one of: uncompressed, zstd, lz4, snappy, gzip, producer"),
        ("compression.type", "none", "String must be one of"),
        ("compression.gzip.level", "0", "between 1 and 9 or equal to -1"),
        ("compression.gzip.level", "10", "between 1 and 9 or equal to -1"),
        ("compression.lz4.level", "18", "Value must be no more than 17"),
        ("compression.lz4.level", "0", "Value must be at least 1"),
        ("compression.zstd.level", "23", "Value must be no more than 22"),
        ("compression.zstd.level", "-131073", "Value must be at least -131072"),
        ("message.timestamp.type", "createtime", "String must be one of: CreateTime, LogAppendTime"),
        ("message.timestamp.before.max.ms", "-1", "Value must be at least 0"),
        ("message.format.version", "0.7.0", "Version 0.7.0 is not a valid version"),
        ("message.format.version", "4.1", "is not a valid version"),
        ("message.format.version", "", "is not a valid version"),
        ("preallocate", "yes", "Expected value to be either true or false"),
        ("preallocate", 1, "Expected value to be either true or false"),
        ("leader.replication.throttled.replicas", "0:1,x", "must be the literal '*'"),
        ("follower.replication.throttled.replicas", "*,0:1", "must be the literal '*'"),
        ("retention.bytes", None, "Value must be non-null"),
    ],
)
def test_bad_values_name_key_and_reason(name: str, value: object, reason: str) -> None:
    with pytest.raises(InvalidConfigError) as info:
        LogConfig.from_props({name: value})  # type: ignore[dict-item]
    message = str(info.value)
    assert f"for configuration {name}" in message
    assert reason in message


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("segment.bytes", "14"),
        ("compression.gzip.level", "-1"),
        ("compression.gzip.level", "9"),
        ("compression.zstd.level", "-131072"),
        ("compression.lz4.level", "17"),
        ("retention.bytes", "-12345"),  # no lower bound
        ("cleanup.policy", ""),
        ("min.cleanable.dirty.ratio", "1"),
        ("min.cleanable.dirty.ratio", "1e-4"),
        ("message.format.version", "0.10.2.1"),
    ],
)
def test_edge_values_kafka_accepts(name: str, value: str) -> None:
    LogConfig.from_props({name: value})


def test_unknown_config_name() -> None:
    with pytest.raises(InvalidConfigError, match=r"Unknown topic config name: segment\.size"):
        LogConfig.from_props({"segment.size": "1"})
    with pytest.raises(InvalidConfigError, match=r"Unknown topic config name: log\.segment\.bytes"):
        LogConfig.from_props({"log.segment.bytes": "1"})
    with pytest.raises(InvalidConfigError, match="Unknown topic config name"):
        LogConfig().get("nope")


def test_min_compaction_lag_above_max_is_rejected() -> None:
    with pytest.raises(InvalidConfigError, match=r"min\.compaction\.lag\.ms \(10\) > max\.compaction"):
        LogConfig.from_props({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"})


def test_to_props_round_trips_and_uses_kafka_strings() -> None:
    props = {
        "segment.bytes": "1048576",
        "cleanup.policy": "compact,delete",
        "preallocate": "true",
        "message.timestamp.type": "LogAppendTime",
        "min.cleanable.dirty.ratio": "1.0E-4",
        "compression.type": "lz4",
        "retention.ms": "-1",
    }
    config = LogConfig.from_props(props)
    assert config.to_props() == props
    assert LogConfig.from_props(config.to_props()) == config
    one = LogConfig.from_props({"min.cleanable.dirty.ratio": "1"})
    assert one.to_props() == {"min.cleanable.dirty.ratio": "1.0"}
    assert LogConfig.from_props({"min.cleanable.dirty.ratio": "0.001"}).to_props() == {
        "min.cleanable.dirty.ratio": "0.001"
    }


def test_overridden_names_only_what_was_given() -> None:
    broker = LogConfig.from_props({"segment.bytes": "5000", "retention.ms": "1000"})
    config = LogConfig.from_props({"retention.ms": "604800000", "preallocate": "true"}, defaults=broker)
    assert config.segment_bytes == 5000  # inherited from the defaults
    assert config.retention_ms == 604800000
    assert config.overridden == frozenset({"retention.ms", "preallocate"})
    assert config.overridden_props() == {"retention.ms": "604800000", "preallocate": "true"}
    # A props mapping works as defaults too; overridden is not part of equality.
    same = LogConfig.from_props(
        {"retention.ms": 604800000, "preallocate": True}, defaults={"segment.bytes": "5000"}
    )
    assert same == config
    assert LogConfig.from_props(None).overridden == frozenset()


def test_derived_values() -> None:
    assert LogConfig().init_file_size == 0
    assert LogConfig(preallocate=True, segment_bytes=4096).init_file_size == 4096
    assert LogConfig().compact is False and LogConfig().delete is True
    both = LogConfig.from_props({"cleanup.policy": "compact,delete"})
    assert both.compact and both.delete
    neither = LogConfig.from_props({"cleanup.policy": ""})
    assert not neither.compact and not neither.delete


def test_max_segment_ms_for_compacted_topics() -> None:
    assert LogConfig(segment_ms=1000, max_compaction_lag_ms=10).max_segment_ms == 1000  # delete only
    compacted = LogConfig.from_props(
        {"cleanup.policy": "compact", "segment.ms": "1000", "max.compaction.lag.ms": "10"}
    )
    assert compacted.max_segment_ms == 10
    long_lag = LogConfig.from_props({"cleanup.policy": "compact", "segment.ms": "1000"})
    assert long_lag.max_segment_ms == 1000


@pytest.mark.parametrize(
    ("version", "magic"),
    [
        ("0.8.0", 0), ("0.8.2", 0), ("0.9.0", 0), ("0.9.0.1", 0),
        ("0.10.0", 1), ("0.10.0-IV0", 1), ("0.10.1-IV2", 1), ("0.10.2", 1), ("0.10.2-IV0", 1),
        ("0.10.2.1", 1),
        ("0.11.0", 2), ("0.11.0-IV0", 2), ("1.0", 2), ("2.8", 2), ("2.8.1", 2), ("3.0-IV1", 2), ("3.9", 2),
        ("4.0-IV3", 2),
    ],
)
def test_target_magic_from_message_format_version(version: str, magic: int) -> None:
    assert LogConfig.from_props({"message.format.version": version}).target_magic == magic


def test_timestamp_limits_fall_back_to_deprecated_difference() -> None:
    assert LogConfig().effective_message_timestamp_before_max_ms == LONG_MAX
    old = LogConfig.from_props({"message.timestamp.difference.max.ms": "5000"})
    assert old.effective_message_timestamp_before_max_ms == 5000
    assert old.effective_message_timestamp_after_max_ms == 5000
    mixed = LogConfig.from_props(
        {"message.timestamp.difference.max.ms": "5000", "message.timestamp.after.max.ms": "7"}
    )
    assert mixed.effective_message_timestamp_before_max_ms == 5000
    assert mixed.effective_message_timestamp_after_max_ms == 7
    new = LogConfig.from_props({"message.timestamp.before.max.ms": "0"})
    assert new.effective_message_timestamp_before_max_ms == 0
    assert new.effective_message_timestamp_after_max_ms == LONG_MAX


@pytest.mark.parametrize(
    ("name", "codec", "level"),
    [
        ("producer", None, None),
        ("uncompressed", CompressionType.NONE, None),
        ("gzip", CompressionType.GZIP, -1),
        ("snappy", CompressionType.SNAPPY, None),
        ("lz4", CompressionType.LZ4, 9),
        ("zstd", CompressionType.ZSTD, 3),
    ],
)
def test_compression_codec_and_level(name: str, codec: CompressionType | None, level: int | None) -> None:
    config = LogConfig.from_props({"compression.type": name})
    assert config.compression == codec
    assert config.compression_level == level
    zstd = LogConfig.from_props({"compression.type": "zstd", "compression.zstd.level": "-5"})
    assert zstd.compression_level == -5


def test_local_retention_defaults_to_retention() -> None:
    config = LogConfig.from_props({"retention.ms": "1000", "retention.bytes": "2000"})
    assert config.effective_local_retention_ms == 1000
    assert config.effective_local_retention_bytes == 2000
    local = LogConfig.from_props({"local.retention.ms": "10", "local.retention.bytes": "-1"})
    assert local.effective_local_retention_ms == 10
    assert local.effective_local_retention_bytes == -1


def test_random_segment_jitter() -> None:
    assert LogConfig().random_segment_jitter(random.Random(1)) == 0
    config = LogConfig(segment_ms=1000, segment_jitter_ms=100)
    rng = random.Random(1)
    jitters = [config.random_segment_jitter(rng) for _ in range(2000)]
    assert all(0 <= j < 100 for j in jitters)
    assert len(set(jitters)) > 50
    # Jitter is bounded by segment.ms when it is larger.
    capped = LogConfig(segment_ms=10, segment_jitter_ms=1000)
    assert all(0 <= capped.random_segment_jitter(rng) < 10 for _ in range(500))


# --- broker-level names --------------------------------------------------------------------------


def test_broker_props_map_to_topic_defaults() -> None:
    config = LogConfig.from_broker_props(
        {
            "broker.id": "1",  # not a log config: ignored
            "log.dirs": "kafka-logs",
            "log.segment.bytes": "1048576",
            "log.index.size.max.bytes": "4096",
            "log.index.interval.bytes": "100",
            "log.flush.interval.messages": "10",
            "log.retention.bytes": "123456",
            "message.max.bytes": "2000000",
            "log.cleanup.policy": "compact",
            "log.cleaner.delete.retention.ms": "1",
            "log.cleaner.min.compaction.lag.ms": "2",
            "log.cleaner.max.compaction.lag.ms": "3",
            "log.cleaner.min.cleanable.ratio": "0.75",
            "log.segment.delete.delay.ms": "4",
            "log.preallocate": "true",
            "log.message.timestamp.type": "LogAppendTime",
            "log.message.format.version": "2.8",
            "compression.type": "gzip",
            "compression.gzip.level": "6",
            "min.insync.replicas": "2",
            "unclean.leader.election.enable": "true",
            "log.local.retention.ms": "-1",
        }
    )
    assert config.segment_bytes == 1048576
    assert config.segment_index_bytes == 4096
    assert config.index_interval_bytes == 100
    assert config.flush_messages == 10
    assert config.retention_bytes == 123456
    assert config.max_message_bytes == 2000000
    assert config.cleanup_policy == ("compact",)
    assert config.delete_retention_ms == 1
    assert (config.min_compaction_lag_ms, config.max_compaction_lag_ms) == (2, 3)
    assert config.min_cleanable_dirty_ratio == 0.75
    assert config.file_delete_delay_ms == 4
    assert config.preallocate is True
    assert config.message_timestamp_type is TimestampType.LOG_APPEND_TIME
    assert config.message_format_version == "2.8"
    assert (config.compression_type, config.compression_gzip_level) == ("gzip", 6)
    assert config.min_insync_replicas == 2
    assert config.unclean_leader_election_enable is True
    assert config.local_retention_ms == -1
    assert config.overridden == frozenset()


@pytest.mark.parametrize(
    ("props", "segment_ms"),
    [
        ({"log.roll.hours": "2"}, 2 * 3600_000),
        ({"log.roll.ms": "5000", "log.roll.hours": "2"}, 5000),
        ({}, 604800000),
    ],
)
def test_broker_roll_time_precedence(props: dict[str, str], segment_ms: int) -> None:
    assert LogConfig.from_broker_props(props).segment_ms == segment_ms


@pytest.mark.parametrize(
    ("props", "retention_ms"),
    [
        ({"log.retention.hours": "1"}, 3600_000),
        ({"log.retention.minutes": "5", "log.retention.hours": "1"}, 300_000),
        ({"log.retention.ms": "42", "log.retention.minutes": "5", "log.retention.hours": "1"}, 42),
        ({"log.retention.ms": "-1"}, -1),
        ({"log.retention.hours": "-5"}, -1),  # any negative retention means unlimited
        ({"log.retention.ms": "-100"}, -1),
    ],
)
def test_broker_retention_precedence(props: dict[str, str], retention_ms: int) -> None:
    assert LogConfig.from_broker_props(props).retention_ms == retention_ms


def test_broker_jitter_and_flush_synonyms() -> None:
    assert LogConfig.from_broker_props({"log.roll.jitter.hours": "1"}).segment_jitter_ms == 3600_000
    jitter = {"log.roll.jitter.ms": "7", "log.roll.jitter.hours": "1"}
    assert LogConfig.from_broker_props(jitter).segment_jitter_ms == 7
    assert LogConfig.from_broker_props({"log.flush.scheduler.interval.ms": "9"}).flush_ms == 9
    both = {"log.flush.interval.ms": "3", "log.flush.scheduler.interval.ms": "9"}
    assert LogConfig.from_broker_props(both).flush_ms == 3


@pytest.mark.parametrize(
    ("props", "broker_name"),
    [
        ({"log.segment.bytes": "10"}, "log.segment.bytes"),
        ({"log.roll.hours": "x"}, "log.roll.hours"),
        ({"log.roll.hours": "0"}, "log.roll.hours"),
        ({"log.retention.minutes": "3000000000"}, "log.retention.minutes"),
        ({"compression.type": "brotli"}, "compression.type"),
    ],
)
def test_bad_broker_values_name_the_broker_key(props: dict[str, str], broker_name: str) -> None:
    with pytest.raises(InvalidConfigError, match=broker_name):
        LogConfig.from_broker_props(props)


def test_broker_defaults_then_topic_overrides() -> None:
    broker = LogConfig.from_broker_props({"log.segment.bytes": "2048", "log.retention.hours": "1"})
    topic = LogConfig.from_props({"retention.ms": "10"}, defaults=broker)
    assert (topic.segment_bytes, topic.retention_ms) == (2048, 10)
    assert topic.overridden_props() == {"retention.ms": "10"}


# --- topic config persistence ------------------------------------------------------------------


def test_topic_configs_round_trip_in_a_top_level_json_file(tmp_path: Path) -> None:
    mapping = {
        "orders": {"retention.ms": "1000", "cleanup.policy": "compact,delete"},
        "a-topic": {"segment.bytes": 2048, "preallocate": True},
        "empty": {},
    }
    write_topic_configs(tmp_path, mapping)
    path = tmp_path / TOPIC_CONFIGS_FILE
    assert [p.name for p in tmp_path.iterdir()] == [TOPIC_CONFIGS_FILE]  # no sub-directory, no .tmp
    assert json.loads(path.read_text()) == {
        "version": 1,
        "topics": {
            "a-topic": {"preallocate": "true", "segment.bytes": "2048"},
            "orders": {"cleanup.policy": "compact,delete", "retention.ms": "1000"},
        },
    }
    read = read_topic_configs(tmp_path)
    assert read == {
        "a-topic": {"preallocate": "true", "segment.bytes": "2048"},
        "orders": {"cleanup.policy": "compact,delete", "retention.ms": "1000"},
    }
    assert LogConfig.from_props(read["orders"]).retention_ms == 1000


def test_a_legacy_topic_config_file_is_read_then_replaced_by_the_next_write(tmp_path: Path) -> None:
    legacy = tmp_path / LEGACY_TOPIC_CONFIGS_FILE
    legacy.write_bytes(b"orders\tretention.ms=5\norders\tcleanup.policy=compact\nlogs\tsegment.bytes=2048\n")
    assert read_topic_configs(tmp_path) == {
        "orders": {"retention.ms": "5", "cleanup.policy": "compact"}, "logs": {"segment.bytes": "2048"}}
    configs = read_topic_configs(tmp_path)
    configs["orders"]["retention.ms"] = "6"
    write_topic_configs(tmp_path, configs)
    assert not legacy.exists()
    assert read_topic_configs(tmp_path) == {
        "orders": {"retention.ms": "6", "cleanup.policy": "compact"}, "logs": {"segment.bytes": "2048"}}


def test_persisting_a_config_keeps_only_overrides(tmp_path: Path) -> None:
    broker = LogConfig.from_broker_props({"log.segment.bytes": "2048"})
    topic = LogConfig.from_props({"retention.ms": "10", "cleanup.policy": ""}, defaults=broker)
    write_topic_configs(tmp_path, {"t": topic.overridden_props()})
    reread = LogConfig.from_props(read_topic_configs(tmp_path)["t"], defaults=broker)
    assert reread == topic
    assert reread.overridden == topic.overridden


def test_missing_topic_config_file_means_no_overrides(tmp_path: Path) -> None:
    assert read_topic_configs(tmp_path) == {}
    write_topic_configs(tmp_path, {})
    assert json.loads((tmp_path / TOPIC_CONFIGS_FILE).read_bytes()) == {"version": 1, "topics": {}}
    assert read_topic_configs(tmp_path) == {}


def test_legacy_topic_config_file_tolerates_comments_blank_lines_and_crlf(tmp_path: Path) -> None:
    (tmp_path / LEGACY_TOPIC_CONFIGS_FILE).write_bytes(
        b"# kafkalog\n\nt\tretention.ms=5\r\nt\tcleanup.policy=\n")
    assert read_topic_configs(tmp_path) == {"t": {"retention.ms": "5", "cleanup.policy": ""}}


@pytest.mark.parametrize(
    ("content", "pattern"),
    [
        ("t retention.ms=5\n", "Malformed line 1"),
        ("t\tretention.ms\n", "Malformed line 1"),
        ("ok\tretention.ms=5\nt\t=5\n", "Malformed line 2"),
        ("a/b\tretention.ms=5\n", "Malformed line 1"),
        ("t\tretention.ms=5\nt\tretention.ms=6\n", "Line 2 .* repeats retention.ms"),
    ],
)
def test_malformed_legacy_topic_config_file(tmp_path: Path, content: str, pattern: str) -> None:
    path = tmp_path / LEGACY_TOPIC_CONFIGS_FILE
    path.write_text(content)
    with pytest.raises(KafkaStorageError, match=pattern) as info:
        read_topic_configs(tmp_path)
    assert str(path) in str(info.value)


@pytest.mark.parametrize(
    ("content", "pattern"),
    [
        ('t\tretention.ms=5\n', "not valid JSON"),
        ('{"topics": {}}', "not a version 1"),
        ('{"version": 2, "topics": {}}', "not a version 1"),
        ('{"version": 1}', "no \"topics\" object"),
        ('{"version": 1, "topics": {"a/b": {}}}', "a/b"),
        ('{"version": 1, "topics": {"t": {"retention.ms": 5}}}', "must map names to strings"),
        ('{"version": 1, "topics": {"t": ["retention.ms"]}}', "must map names to strings"),
    ],
)
def test_malformed_topic_config_file(tmp_path: Path, content: str, pattern: str) -> None:
    path = tmp_path / TOPIC_CONFIGS_FILE
    path.write_text(content)
    with pytest.raises(KafkaStorageError, match=pattern) as info:
        read_topic_configs(tmp_path)
    assert str(path) in str(info.value)


def test_write_topic_configs_refuses_what_it_cannot_store(tmp_path: Path) -> None:
    with pytest.raises(InvalidTopicError):
        write_topic_configs(tmp_path, {"bad topic": {"retention.ms": "1"}})
    with pytest.raises(InvalidConfigError, match="a str or int"):
        write_topic_configs(tmp_path, {"t": {"retention.ms": 1.5}})  # type: ignore[dict-item]
    with pytest.raises(InvalidConfigError, match="cannot be stored"):
        write_topic_configs(tmp_path, {"t": {"a=b": "1"}})
    assert not (tmp_path / TOPIC_CONFIGS_FILE).exists()
