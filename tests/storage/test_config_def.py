"""ConfigDef's parsing rules are Java's, for every config kafkalog reads: topic configs, broker
configs and group configs take and refuse the same texts Kafka does."""

import pytest

from kafkalog.broker.config import KafkaConfig
from kafkalog.broker.group.group_config import parse_group_config
from kafkalog.errors import InvalidConfigError
from kafkalog.storage.config import LogConfig
from kafkalog.storage.config_def import java_trim, parse_boolean, parse_int, parse_list, parse_long

# String.trim removes every char up to U+0020, control chars included, and nothing above it.
JAVA_TRIMMED = ["\x00 100\x01", "\t100\n", "\x1f100\x0b"]
# What Python's str.strip or int() would take but Java's trim and parseInt do not.
NOT_JAVA_INTS = ["1_000", "\u00a0100", "100\u2003", "\u0661\u0660\u0660", "100\x85", "0x64", "1e2", ""]


def test_java_trim_is_string_trim():
    assert java_trim("\x00\x08 a b\r\n\x1f") == "a b"
    assert java_trim("\u00a0a\u3000") == "\u00a0a\u3000"  # not whitespace to Java's trim


@pytest.mark.parametrize("text", JAVA_TRIMMED)
def test_ints_are_trimmed_as_java_does(text):
    assert parse_int("x", text) == 100 and parse_long("x", text) == 100
    assert LogConfig.from_props({"segment.ms": text}).segment_ms == 100
    assert KafkaConfig.from_props({"num.partitions": text}).num_partitions == 100
    assert parse_group_config("consumer.heartbeat.interval.ms", text) == "100"


@pytest.mark.parametrize("text", NOT_JAVA_INTS)
def test_what_parse_int_refuses_is_refused_everywhere(text):
    with pytest.raises(InvalidConfigError, match="for configuration x: Not a number of type INT"):
        parse_int("x", text)
    with pytest.raises(InvalidConfigError, match=r"for configuration segment\.ms: Not a number of type LONG"):
        LogConfig.from_props({"segment.ms": text})
    with pytest.raises(InvalidConfigError, match=r"for configuration num\.partitions: Not a number"):
        KafkaConfig.from_props({"num.partitions": text}).num_partitions  # noqa: B018 (parsed when read)
    with pytest.raises(InvalidConfigError, match=r"consumer\.session\.timeout\.ms: Not a number of type INT"):
        parse_group_config("consumer.session.timeout.ms", text)


def test_int_and_long_ranges():
    assert parse_int("x", "-2147483648") == -(2**31) and parse_long("x", "+9223372036854775807") == 2**63 - 1
    for text in ("2147483648", "-2147483649"):
        with pytest.raises(InvalidConfigError, match="Not a number of type INT"):
            parse_int("x", text)
    with pytest.raises(InvalidConfigError, match="Not a number of type LONG"):
        parse_long("x", "9223372036854775808")


def test_booleans_and_lists():
    assert parse_boolean("x", "\x00TrUe\n") is True and parse_boolean("x", " false") is False
    with pytest.raises(InvalidConfigError, match="Expected value to be either true or false"):
        parse_boolean("x", "\u00a0true")
    # Kafka's list separator is a comma with Java's (ASCII) whitespace around it.
    assert parse_list("x", " compact ,\tdelete ") == ("compact", "delete")
    assert parse_list("x", "compact,\u2003delete") == ("compact", "\u2003delete")
    assert parse_list("x", "\x01") == ()
    with pytest.raises(InvalidConfigError, match="String must be one of: compact, delete"):
        LogConfig.from_props({"cleanup.policy": "compact,\u2003delete"})
    assert LogConfig.from_props({"cleanup.policy": "\x00compact, delete\n"}).cleanup_policy == (
        "compact", "delete")
