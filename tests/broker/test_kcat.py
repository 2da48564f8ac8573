"""kcat (librdkafka's command-line client, Debian's ``kcat`` package; ``make`` installs it) against
the broker, unchanged: metadata, produce with each codec and headers, consume, offsets by time, and
a balanced consumer group that commits and resumes."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from kafka import KafkaAdminClient

from kafkalog.records.types import CompressionType

pytestmark = pytest.mark.kafkalog_broker_config(
    {
        "num.partitions": 3,
        "group.initial.rebalance.delay.ms": 0,
        "offsets.topic.num.partitions": 1,
    }
)
TIMEOUT_S = 60


def kcat(bootstrap: str, *args: str, stdin: str | None = None) -> str:
    binary = shutil.which("kcat")
    if binary is None:
        pytest.fail("kcat is not installed: `make` installs it (apt-get install kcat), or install it by hand")
    done = subprocess.run(
        [binary, "-b", bootstrap, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _consume(bootstrap: str, topic: str) -> list[str]:
    out = kcat(bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-f", "%p|%o|%k|%s|%h\n")
    return sorted(out.splitlines())


def test_kcat_produces_with_every_codec_and_consumes_unchanged(kafkalog_broker):
    bootstrap = kafkalog_broker.bootstrap_servers
    expected = []
    for offset, codec in enumerate(["none", "gzip", "snappy", "lz4", "zstd"]):
        value = f"value-{codec}-" + "x" * 300  # librdkafka sends a batch plain when compressing grows it
        kcat(bootstrap, "-P", "-t", "kc", "-p", "0", "-K", ":", "-z", codec, "-H", f"codec={codec}",
             stdin=f"key-{codec}:{value}\n")  # fmt: skip
        expected.append(f"0|{offset}|key-{codec}|{value}|codec={codec}")
    assert _consume(bootstrap, "kc") == expected
    # Each batch kept the codec kcat wrote it with (the broker validates, it does not recompress).
    log = kafkalog_broker.server.log_manager.get_log("kc", 0)
    codecs = [batch.compression_type for batch in log.read(0, 1 << 20).records.batches()]
    assert codecs == [
        CompressionType.NONE,
        CompressionType.GZIP,
        CompressionType.SNAPPY,
        CompressionType.LZ4,
        CompressionType.ZSTD,
    ]


def test_kcat_metadata_and_offsets_by_time(kafkalog_broker):
    bootstrap = kafkalog_broker.bootstrap_servers
    kcat(bootstrap, "-P", "-t", "km", "-p", "2", stdin="a\nb\nc\n")
    metadata = json.loads(kcat(bootstrap, "-L", "-J", "-t", "km"))
    assert metadata["brokers"] == [{"id": 1, "name": bootstrap}]
    (topic,) = metadata["topics"]
    assert topic["topic"] == "km" and [p["partition"] for p in topic["partitions"]] == [0, 1, 2]
    assert all(p["leader"] == 1 and p["isrs"] == [{"id": 1}] for p in topic["partitions"])
    # -Q: ListOffsets by timestamp; time 0 is before every record: the first offset
    assert kcat(bootstrap, "-Q", "-t", "km:2:0").split() == ["km", "[2]", "offset", "0"]


def test_kcat_balanced_consumer_group_commits_and_resumes(kafkalog_broker):
    bootstrap = kafkalog_broker.bootstrap_servers
    first = "".join(f"v{i}\n" for i in range(6))
    for partition in range(3):
        kcat(bootstrap, "-P", "-t", "kg", "-p", str(partition), stdin=first)
    # (-o would be applied to every assigned partition, overriding the commits: reset instead)
    group_args = ("-G", "kcat-group", "kg", "-X", "auto.offset.reset=earliest", "-e", "-f", "%p|%o|%s\n")
    consumed = kcat(bootstrap, *group_args).splitlines()
    assert sorted(consumed) == sorted(f"{p}|{i}|v{i}" for p in range(3) for i in range(6))
    # kcat commits on exit: the next member of the group starts after what it read.
    kcat(bootstrap, "-P", "-t", "kg", "-p", "1", stdin="late\n")
    assert kcat(bootstrap, *group_args).splitlines() == ["1|6|late"]
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        committed = admin.list_group_offsets({"kcat-group": None})["kcat-group"]
    finally:
        admin.close()
    assert {tp.partition: meta.offset for tp, meta in committed.items()} == {0: 6, 1: 7, 2: 6}
