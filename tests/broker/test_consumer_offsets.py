"""Committed offsets in ``__consumer_offsets``: Kafka's record layouts byte for byte, commits and
fetches through real clients, durability across a restart and a kill -9, expiry to tombstones that
the cleaner removes, OffsetFetch of several groups, OffsetDelete, and ``dump-log --offsets-decoder``."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient
from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition
from kio.schema.errors import ErrorCode as E

from kafkalog.broker.embedded import Broker
from kafkalog.broker.group.group_metadata_manager import GroupMetadataManager
from kafkalog.broker.group.offsets_topic import GROUP_METADATA_TOPIC_NAME, java_string_hash, partition_for
from kafkalog.clock import MockTime
from kafkalog.errors import CorruptRecordError
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.protocol.group_metadata_records import (
    GroupMetadataValue,
    MemberMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
)
from kafkalog.storage.cleaner.compact import compact_logs
from kafkalog.storage.log_manager import LogManager
from tests.broker import _raw

CONFIG = {"offsets.topic.num.partitions": 3, "num.partitions": 2}
pytestmark = pytest.mark.kafkalog_broker_config(CONFIG)


def s16(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


# --- record layouts ----------------------------------------------------------------------------


def test_offset_commit_key_and_value_layouts() -> None:
    key = encode_offset_commit_key(OffsetCommitKey("g", "topic", 7))
    assert key == struct.pack(">h", 1) + s16("g") + s16("topic") + struct.pack(">i", 7)
    assert decode_key(key) == OffsetCommitKey("g", "topic", 7)
    # Kafka 4 writes v3: offset, leaderEpoch, metadata, commitTimestamp
    value = encode_offset_commit_value(OffsetCommitValue(42, 5, "m", 1_700_000_000_000))
    assert value == struct.pack(">hqi", 3, 42, 5) + s16("m") + struct.pack(">q", 1_700_000_000_000)
    # with an expire timestamp Kafka falls back to v1 (no leader epoch)
    v1 = encode_offset_commit_value(OffsetCommitValue(42, 5, "", 10, 99))
    assert v1 == struct.pack(">hq", 1, 42) + s16("") + struct.pack(">qq", 10, 99)
    assert decode_offset_commit_value(v1) == OffsetCommitValue(42, -1, "", 10, 99)
    # v0 and the flexible v4 (compact string, empty tagged fields) read too
    v0 = struct.pack(">hq", 0, 8) + s16("x") + struct.pack(">q", 5)
    assert decode_offset_commit_value(v0) == OffsetCommitValue(8, -1, "x", 5)
    v4 = struct.pack(">hqi", 4, 8, 2) + bytes([2]) + b"x" + struct.pack(">q", 5) + b"\x00"
    assert decode_offset_commit_value(v4) == OffsetCommitValue(8, 2, "x", 5)


def test_group_metadata_value_layout() -> None:
    member = MemberMetadataValue("m-1", "static-1", "cid", "/127.0.0.1", 300_000, 45_000, b"S", b"AS")
    value = GroupMetadataValue("consumer", 3, "range", "m-1", 1234, (member,))
    data = encode_group_metadata_value(value)
    expected = (struct.pack(">h", 3) + s16("consumer") + struct.pack(">i", 3) + s16("range") + s16("m-1")
                + struct.pack(">q", 1234) + struct.pack(">i", 1)
                + s16("m-1") + s16("static-1") + s16("cid") + s16("/127.0.0.1")
                + struct.pack(">iii", 300_000, 45_000, 1) + b"S" + struct.pack(">i", 2) + b"AS")
    assert data == expected
    assert decode_group_metadata_value(data) == value
    empty = GroupMetadataValue("consumer", 4, None, None, 99)
    assert decode_group_metadata_value(encode_group_metadata_value(empty)) == empty


def test_forged_records_are_refused_without_allocation() -> None:
    with pytest.raises(CorruptRecordError):
        decode_key(struct.pack(">h", 9) + s16("g"))
    with pytest.raises(CorruptRecordError):  # a member count far beyond the bytes present
        decode_group_metadata_value(struct.pack(">h", 3) + s16("c") + struct.pack(">ihhq", 1, -1, -1, 0)
                                    + struct.pack(">i", 2**31 - 1))
    with pytest.raises(CorruptRecordError):
        decode_offset_commit_value(struct.pack(">hq", 3, 1))


def test_partition_for_matches_java_string_hash() -> None:
    # values of java.lang.String.hashCode
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112
    assert java_string_hash("polygenelubricants") == -(2**31)  # Integer.MIN_VALUE: Utils.abs gives 0
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("hello", 50) == 99162322 % 50


# --- through real clients -----------------------------------------------------------------------


def _produce(bootstrap: str, topic: str, n: int) -> None:
    producer = ck.Producer({"bootstrap.servers": bootstrap})
    for i in range(n):
        producer.produce(topic, b"v%d" % i, partition=i % 2)
    assert producer.flush(10) == 0


def _committed_ck(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        got = consumer.committed([ck.TopicPartition(topic, p) for p in (0, 1)], timeout=10)
        return {tp.partition: tp.offset for tp in got}
    finally:
        consumer.close()


def test_confluent_and_kafka_python_commits_survive_a_restart(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with Broker(data_dir, configs=CONFIG) as broker:
        bootstrap = broker.bootstrap_servers
        _produce(bootstrap, "orders", 10)
        consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "ck-group",
                                "enable.auto.commit": False})
        consumer.assign([ck.TopicPartition("orders", 0, 0), ck.TopicPartition("orders", 1, 0)])
        consumer.commit(offsets=[ck.TopicPartition("orders", 0, 3), ck.TopicPartition("orders", 1, 4)],
                        asynchronous=False)
        consumer.close()
        kp = KafkaConsumer(bootstrap_servers=bootstrap, group_id="kp-group", enable_auto_commit=False)
        kp.assign([TopicPartition("orders", 0), TopicPartition("orders", 1)])
        kp.commit({TopicPartition("orders", 0): OffsetAndMetadata(2, "note", -1),
                   TopicPartition("orders", 1): OffsetAndMetadata(5, "", -1)})
        assert kp.committed(TopicPartition("orders", 0)) == 2
        kp.close()
        # an unknown group has nothing committed
        assert _committed_ck(bootstrap, "nobody", "orders") == {0: ck.OFFSET_INVALID, 1: ck.OFFSET_INVALID}
    with Broker(data_dir, configs=CONFIG) as broker:
        bootstrap = broker.bootstrap_servers
        assert _committed_ck(bootstrap, "ck-group", "orders") == {0: 3, 1: 4}
        kp = KafkaConsumer(bootstrap_servers=bootstrap, group_id="kp-group", enable_auto_commit=False)
        assert kp.committed(TopicPartition("orders", 0), metadata=True).metadata == "note"
        assert kp.committed(TopicPartition("orders", 1)) == 5
        kp.close()

    # what is on disk is exactly the commits made, in Kafka's schema
    out = subprocess.run(
        [sys.executable, "-m", "kafkalog.cli", "dump-log", "--offsets-decoder", "--json",
         *sorted(str(p) for p in data_dir.glob(f"{GROUP_METADATA_TOPIC_NAME}-*/*.log"))],
        capture_output=True, text=True, timeout=60, check=True)
    commits = {}
    for line in out.stdout.splitlines():
        if not line.strip():
            continue
        for item in json.loads(line)["batches"]:
            for record in item.get("records", []):
                key, payload = record["key"], record["payload"]
                assert key["type"] == "1" and payload["version"] == "3"
                commits[(key["data"]["group"], key["data"]["partition"])] = payload["data"]["offset"]
    assert commits == {("ck-group", 0): 3, ("ck-group", 1): 4, ("kp-group", 0): 2, ("kp-group", 1): 5}


def test_an_existing_offsets_topic_keeps_its_partition_count(tmp_path: Path) -> None:
    """offsets.topic.num.partitions says how many partitions to create; once __consumer_offsets
    exists, groups map to the partitions it has (Kafka's coordinator takes the count from the topic),
    so a broker restarted with another setting still finds and stores every group's offsets."""
    data_dir = tmp_path / "data"
    with Broker(data_dir, configs={**CONFIG, "offsets.topic.num.partitions": 3}) as broker:
        _produce(broker.bootstrap_servers, "orders", 4)
        consumer = ck.Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "g-restart",
                                "enable.auto.commit": False})
        consumer.commit(offsets=[ck.TopicPartition("orders", 0, 1)], asynchronous=False)
        consumer.close()
    with Broker(data_dir, configs={**CONFIG, "offsets.topic.num.partitions": 50}) as broker:
        bootstrap = broker.bootstrap_servers
        assert _committed_ck(bootstrap, "g-restart", "orders")[0] == 1
        consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "g-restart",
                                "enable.auto.commit": False})
        consumer.commit(offsets=[ck.TopicPartition("orders", 1, 2)], asynchronous=False)
        consumer.close()
        assert _committed_ck(bootstrap, "g-restart", "orders") == {0: 1, 1: 2}
        assert broker.server.log_manager.partitions(GROUP_METADATA_TOPIC_NAME) == [0, 1, 2]
    with Broker(data_dir, configs=CONFIG) as broker:  # and both commits were stored
        assert _committed_ck(broker.bootstrap_servers, "g-restart", "orders") == {0: 1, 1: 2}


def test_commit_to_an_unknown_partition_is_refused(kafkalog_broker: Any) -> None:
    bootstrap = kafkalog_broker.bootstrap_servers
    _produce(bootstrap, "known", 1)
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "g-unknown",
                            "enable.auto.commit": False})
    try:
        with pytest.raises(ck.KafkaException) as info:
            consumer.commit(offsets=[ck.TopicPartition("known", 9, 1)], asynchronous=False)
        assert "UNKNOWN_TOPIC_OR_PART" in str(info.value) or "Unknown" in str(info.value)
    finally:
        consumer.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(data_dir: Path, port: int) -> subprocess.Popen[bytes]:
    args = [sys.executable, "-m", "kafkalog.cli", "serve", "--data-dir", str(data_dir), "--port", str(port),
            "--config", "offsets.topic.num.partitions=3"]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return proc
        except OSError:
            if proc.poll() is not None:
                raise AssertionError(proc.stderr.read().decode() if proc.stderr else "serve exited")
            time.sleep(0.05)
    proc.kill()
    raise AssertionError("kafkalog serve did not listen within 30 s")


def test_commits_survive_kill_9(tmp_path: Path) -> None:
    data_dir, port = tmp_path / "data", _free_port()
    proc = _serve(data_dir, port)
    try:
        bootstrap = f"127.0.0.1:{port}"
        _produce(bootstrap, "events", 4)
        consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "crashy",
                                "enable.auto.commit": False})
        for n in range(1, 6):  # several acknowledged commits; the last one must be what comes back
            consumer.commit(offsets=[ck.TopicPartition("events", 0, n)], asynchronous=False)
        consumer.close()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    proc = _serve(data_dir, port)
    try:
        assert _committed_ck(f"127.0.0.1:{port}", "crashy", "events")[0] == 5
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)


def test_offset_fetch_of_several_groups_and_offset_delete(kafkalog_broker: Any) -> None:
    bootstrap = kafkalog_broker.bootstrap_servers
    _produce(bootstrap, "multi", 2)
    for group, offset in (("ga", 1), ("gb", 2)):
        c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
        c.commit(offsets=[ck.TopicPartition("multi", 0, offset)], asynchronous=False)
        c.close()
    host, port = bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        cls, mod = _raw.request_class(ApiKey.OFFSET_FETCH, 8)
        topics = (mod.OffsetFetchRequestTopics(name="multi", partition_indexes=(0, 1)),)
        groups = tuple(mod.OffsetFetchRequestGroup(group_id=g, topics=topics) for g in ("ga", "gb", "gc"))
        req = cls(groups=groups,
                  require_stable=False)
        resp = _raw.request(sock, req)
        got = {g.group_id: {p.partition_index: p.committed_offset for t in g.topics for p in t.partitions}
               for g in resp.groups}
        assert got == {"ga": {0: 1, 1: -1}, "gb": {0: 2, 1: -1}, "gc": {0: -1, 1: -1}}

        cls, mod = _raw.request_class(ApiKey.OFFSET_DELETE, 0)
        req = cls(group_id="ga", topics=(
            mod.OffsetDeleteRequestTopic(name="multi", partitions=(
                mod.OffsetDeleteRequestPartition(partition_index=0),
                mod.OffsetDeleteRequestPartition(partition_index=7),  # the topic has 2
            )),
            mod.OffsetDeleteRequestTopic(name="no-such-topic", partitions=(
                mod.OffsetDeleteRequestPartition(partition_index=0),)),
        ))
        resp = _raw.request(sock, req, correlation_id=2)
        assert resp.error_code == E.none
        assert [(t.name, p.partition_index, p.error_code) for t in resp.topics for p in t.partitions] == [
            ("multi", 0, E.none),
            ("multi", 7, E.unknown_topic_or_partition),
            ("no-such-topic", 0, E.unknown_topic_or_partition),
        ]
        resp = _raw.request(sock, cls(group_id="never-seen", topics=()), correlation_id=3)
        assert resp.error_code == E.group_id_not_found
    assert _committed_ck(bootstrap, "ga", "multi")[0] == ck.OFFSET_INVALID
    assert _committed_ck(bootstrap, "gb", "multi")[0] == 2


def test_offsets_topic_is_internal_and_compacted(kafkalog_broker: Any) -> None:
    bootstrap = kafkalog_broker.bootstrap_servers
    _produce(bootstrap, "t", 1)
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "meta", "enable.auto.commit": False})
    c.commit(offsets=[ck.TopicPartition("t", 0, 1)], asynchronous=False)
    c.close()
    log_manager = kafkalog_broker.server.log_manager
    config = log_manager.topic_config(GROUP_METADATA_TOPIC_NAME)
    assert config.cleanup_policy == ("compact",)
    assert log_manager.partitions(GROUP_METADATA_TOPIC_NAME) == [0, 1, 2]


# --- expiry, tombstones, compaction --------------------------------------------------------------


def test_expired_offsets_become_tombstones_that_compaction_removes(tmp_path: Path) -> None:
    clock = MockTime(1_700_000_000_000)
    retention = 60_000

    async def scenario() -> None:
        with LogManager(tmp_path / "data", time=clock) as log_manager:
            log_manager.create_topic("t", 1)
            manager = GroupMetadataManager(log_manager, num_partitions=1, retention_ms=retention, time=clock)
            manager.load()
            for offset in range(1, 4):
                commit = OffsetCommitValue(offset, -1, "", clock.milliseconds())
                errors = await manager.store_offsets("old", {("t", 0): commit})
                assert errors == {("t", 0): 0}
            clock.sleep(retention // 2)
            young = OffsetCommitValue(7, -1, "", clock.milliseconds())
            await manager.store_offsets("young", {("t", 0): young})
            clock.sleep(retention // 2 + 1)
            # "old" has no members (unknown to a coordinator): expired; "young" not yet
            assert await manager.cleanup_expired_offsets(lambda group: None) == 1
            assert manager.get_offsets("old") == {}
            assert manager.get_offsets("young") == {("t", 0): young}
            offsets_log = log_manager.get_log(GROUP_METADATA_TOPIC_NAME, 0)
            before = [(r.key, r.value) for r in offsets_log.records(0)]
            assert len(before) == 5 and before[-1][1] is None  # 3 + 1 commits, then the tombstone
            log_manager.alter_topic_config(GROUP_METADATA_TOPIC_NAME, {"segment.bytes": "1048576",
                                                                       "min.cleanable.dirty.ratio": "0.01"})
            offsets_log.roll()
            compact_logs(log_manager, GROUP_METADATA_TOPIC_NAME)
            after = [(r.key, r.value) for r in offsets_log.records(offsets_log.log_start_offset)]
            # the superseded commits of "old" are gone; its tombstone stays for delete.retention.ms
            assert len(after) == 2 and after[0][1] is not None and after[1][1] is None
        # a fresh manager reads the same state back
        with LogManager(tmp_path / "data", time=clock) as log_manager:
            manager = GroupMetadataManager(log_manager, num_partitions=1, retention_ms=retention, time=clock)
            manager.load()
            assert manager.group_ids_with_offsets() == {"young"}

    asyncio.run(scenario())


def _kafka_python_member_metadata(version: int) -> tuple[bytes, bytes]:
    """A subscription and an assignment as kafka-python's consumer encodes them."""
    from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription

    owned = [ConsumerProtocolSubscription.TopicPartition(topic="t", partitions=[1])]
    subscription = ConsumerProtocolSubscription(version=version, topics=["t", "u"], user_data=b"ud",
                                                owned_partitions=owned, generation_id=5, rack_id="r1")
    assigned = [ConsumerProtocolAssignment.TopicPartition(topic="t", partitions=[0, 1])]
    assignment = ConsumerProtocolAssignment(version=version, assigned_partitions=assigned, user_data=None)
    return subscription.encode(version=version), assignment.encode(version=version)


def test_consumer_protocol_decoded_as_kafkas_readers_read_it() -> None:
    from kafkalog.errors import InvalidRequestError
    from kafkalog.protocol.consumer_protocol import decode_assignment, decode_subscription

    for version in range(4):
        sub_bytes, assignment_bytes = _kafka_python_member_metadata(version)
        sub = decode_subscription(sub_bytes)
        assert (sub.version, sub.topics, sub.user_data) == (version, ("t", "u"), b"ud")
        assert sub.owned_partitions == ((("t", (1,)),) if version >= 1 else ())
        expected_generation, expected_rack = (5 if version >= 2 else -1), ("r1" if version >= 3 else None)
        assert (sub.generation_id, sub.rack_id) == (expected_generation, expected_rack)
        assignment = decode_assignment(assignment_bytes)
        assert (assignment.assigned_partitions, assignment.user_data) == ((("t", (0, 1)),), None)
    for bad in (b"s", b"\x00\x04" + b"\x00" * 8, b"\x00\x00\x7f\xff\xff\xff"):
        with pytest.raises(InvalidRequestError):
            decode_subscription(bad)


def test_offsets_decoder_prints_only_the_fields_of_the_records_version() -> None:
    """GroupMetadataValue v0 has no rebalanceTimeout (v1+), currentStateTimestamp (v2+) or
    groupInstanceId (v3+): Kafka's JSON writer leaves them out, rather than printing the values a
    reader fills in."""
    import struct

    from kafkalog.protocol.group_metadata_records import encode_group_metadata_key
    from kafkalog.tools.offsets_decoder import decode_offsets_record

    def text(value: str) -> bytes:
        return struct.pack(">h", len(value)) + value.encode()

    def blob(value: bytes) -> bytes:
        return struct.pack(">i", len(value)) + value

    sub, assignment = _kafka_python_member_metadata(0)
    v0 = (struct.pack(">h", 0) + text("consumer") + struct.pack(">i", 2) + text("range") + text("m1")
          + struct.pack(">i", 1) + text("m1") + text("client") + text("/10.0.0.1")
          + struct.pack(">i", 10_000) + blob(sub) + blob(assignment))
    decoded = decode_offsets_record(encode_group_metadata_key("g"), v0)
    assert decoded["payload"] == {"version": "0", "data": {
        "protocolType": "consumer", "generation": 2, "protocol": "range", "leader": "m1",
        "members": [{"memberId": "m1", "clientId": "client", "clientHost": "/10.0.0.1",
                     "sessionTimeout": 10_000,
                     "subscription": {"topics": ["t", "u"], "userData": "dWQ="},
                     "assignment": {"assignedPartitions": [{"topic": "t", "partitions": [0, 1]}],
                                    "userData": None}}]}}


def test_dump_log_offsets_decoder_text(tmp_path: Path) -> None:
    sub_v3, assignment_v3 = _kafka_python_member_metadata(3)

    async def scenario() -> None:
        with LogManager(tmp_path / "data") as log_manager:
            manager = GroupMetadataManager(log_manager, num_partitions=1)
            member = MemberMetadataValue("m", None, "c", "/h", 1000, 1000, b"s", b"a")
            real = MemberMetadataValue("k", "static-1", "c", "/h", 2000, 1000, sub_v3, assignment_v3)
            value = GroupMetadataValue("consumer", 1, "range", "m", 5, (member, real))
            assert await manager.store_group("grp", value) == 0
            await manager.store_offsets("grp", {("t", 0): OffsetCommitValue(3, 0, "", 9)})
            assert await manager.delete_group("grp") == 0

    asyncio.run(scenario())
    log_file = next((tmp_path / "data" / f"{GROUP_METADATA_TOPIC_NAME}-0").glob("*.log"))
    command = [sys.executable, "-m", "kafkalog.cli", "dump-log", "--offsets-decoder", str(log_file)]
    out = subprocess.run(command,
                         capture_output=True, text=True, timeout=60, check=True, env={**os.environ})
    lines = [line for line in out.stdout.splitlines() if "key:" in line]
    group_key = 'key: {"type":"2","data":{"group":"grp"}}'
    offset_key = 'key: {"type":"1","data":{"group":"grp","topic":"t","partition":0}}'
    assert len(lines) == 4
    assert f'{group_key} payload: {{"version":"3","data":{{"protocolType":"consumer"' in lines[0]
    # A consumer group's member metadata decoded as Kafka's tool shows it (the fields of the
    # subscription's own version); bytes that do not decode stay base64, as Kafka keeps them.
    assert ('"members":[{"memberId":"m","groupInstanceId":null,"clientId":"c","clientHost":"/h",'
            '"rebalanceTimeout":1000,"sessionTimeout":1000,"subscription":"cw==","assignment":"YQ=="},'
            '{"memberId":"k","groupInstanceId":"static-1","clientId":"c","clientHost":"/h",'
            '"rebalanceTimeout":2000,"sessionTimeout":1000,"subscription":{"topics":["t","u"],'
            '"userData":"dWQ=","ownedPartitions":[{"topic":"t","partitions":[1]}],"generationId":5,'
            '"rackId":"r1"},"assignment":{"assignedPartitions":[{"topic":"t","partitions":[0,1]}],'
            '"userData":null}}]') in lines[0]
    assert f'{offset_key} payload: {{"version":"3","data":{{"offset":3,"leaderEpoch":0,' in lines[1]
    assert lines[2].endswith(f"{offset_key} payload: <DELETE>")
    assert lines[3].endswith(f"{group_key} payload: <DELETE>")


def test_deleting_a_topic_drops_its_offsets_and_the_offsets_topic_is_internal(kafkalog_broker: Any) -> None:
    bootstrap = kafkalog_broker.bootstrap_servers
    _produce(bootstrap, "doomed", 2)
    _produce(bootstrap, "kept", 2)
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "deleter", "enable.auto.commit": False})
    c.commit(offsets=[ck.TopicPartition("doomed", 0, 1), ck.TopicPartition("kept", 0, 1)], asynchronous=False)
    c.close()
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics(["doomed"])["doomed"].result(10)
    manager = kafkalog_broker.server.apis.components["group_metadata_manager"]
    assert manager.get_offsets("deleter") == {("kept", 0): manager.get_offsets("deleter")[("kept", 0)]}
    host, port = bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        cls, _ = _raw.request_class(ApiKey.METADATA, 12)
        resp = _raw.request(sock, cls(topics=None, allow_auto_topic_creation=False,
                                      include_topic_authorized_operations=False))
        internal = {t.name: t.is_internal for t in resp.topics}
    assert internal[GROUP_METADATA_TOPIC_NAME] is True and internal["kept"] is False


def test_subscriptions_are_read_from_real_client_metadata() -> None:
    from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription

    from kafkalog.errors import InvalidRequestError
    from kafkalog.protocol.consumer_protocol import subscription_topics

    for version in range(4):  # what kafka-python's consumer sends, every version
        encoded = ConsumerProtocolSubscription(version=version, topics=["a", "b"], user_data=b"u",
                                               owned_partitions=[], generation_id=5, rack_id="r")
        assert subscription_topics(encoded.encode(version=version)) == {"a", "b"}
    with pytest.raises(InvalidRequestError):
        subscription_topics(b"\x00\x00\x7f\xff\xff\xff")  # 2^31 topics in 6 bytes: refused, not allocated


def test_a_stable_consumer_group_loses_the_offsets_of_topics_it_no_longer_subscribes(tmp_path: Path) -> None:
    clock = MockTime(1_700_000_000_000)
    retention = 60_000

    async def scenario() -> None:
        with LogManager(tmp_path / "data", time=clock) as log_manager:
            manager = GroupMetadataManager(log_manager, num_partitions=1, retention_ms=retention, time=clock)
            manager.load()
            commit = OffsetCommitValue(5, -1, "", clock.milliseconds())
            await manager.store_offsets("g", {("kept", 0): commit, ("dropped", 0): commit})
            clock.sleep(retention + 1)
            subscribed = frozenset({"kept"})
            # Kafka's rules: a group rebalancing (or one whose subscriptions are unknown) keeps all
            topics_of = lambda g: subscribed  # noqa: E731
            assert await manager.cleanup_expired_offsets(lambda g: "PreparingRebalance", topics_of) == 0
            assert await manager.cleanup_expired_offsets(lambda g: "Stable", lambda g: None) == 0
            # a stable consumer group: the offsets of topics nobody subscribes to expire
            assert await manager.cleanup_expired_offsets(lambda g: "Stable", topics_of) == 1
            assert manager.get_offsets("g") == {("kept", 0): commit}

    asyncio.run(scenario())


def test_group_subscriptions_come_from_the_chosen_protocol() -> None:
    from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription

    from kafkalog.broker.group.group_metadata import GroupMetadata, GroupState
    from kafkalog.broker.group.member_metadata import MemberMetadata

    def member(member_id: str, topics: list[str]) -> MemberMetadata:
        metadata = ConsumerProtocolSubscription(version=0, topics=topics, user_data=None).encode(version=0)
        return MemberMetadata(member_id, None, "client", "host", 10_000, 10_000, "consumer",
                              [("range", metadata)])

    group = GroupMetadata("g")
    assert group.subscribed_topics() is None  # no protocol chosen yet
    group.add(member("m1", ["a"]))
    group.add(member("m2", ["b", "c"]))
    group.transition_to(GroupState.PREPARING_REBALANCE)
    group.init_next_generation()
    assert group.protocol_name == "range" and group.subscribed_topics() == {"a", "b", "c"}


def test_empty_groups_without_offsets_turn_dead_at_the_periodic_cleanup(tmp_path: Path) -> None:
    """Kafka's cleanupGroupMetadata: once its offsets expired, an Empty group is forgotten and its
    stored metadata tombstoned; a group with members, or with live offsets, stays."""
    from kafkalog.broker.group.group_coordinator import GroupConfig, GroupCoordinator

    clock = MockTime(int(time.time() * 1000))
    retention = 60_000
    config = GroupConfig(min_session_timeout_ms=10, max_session_timeout_ms=60000,
                         initial_rebalance_delay_ms=0)

    async def member(c: GroupCoordinator, group: str) -> Any:
        first = await c.handle_join_group(group, "", None, True, False, "cli", "/127.0.0.1", 5000, 5000,
                                          "consumer", [("range", b"")])
        joined = await c.handle_join_group(group, first.member_id, None, True, False, "cli", "/127.0.0.1",
                                           5000, 5000, "consumer", [("range", b"")])
        await c.handle_sync_group(group, joined.generation_id, joined.member_id, None, None, None,
                                  [(joined.member_id, b"")])
        return joined

    async def scenario() -> None:
        with LogManager(tmp_path / "data", time=clock) as log_manager:
            manager = GroupMetadataManager(log_manager, num_partitions=1, retention_ms=retention, time=clock)
            c = GroupCoordinator(config, {"group_metadata_manager": manager})
            c.startup()
            left = {}
            for group in ("committed", "idle", "busy"):
                left[group] = await member(c, group)
            commit = OffsetCommitValue(5, -1, "", clock.milliseconds())
            assert await manager.store_offsets("committed", {("t", 0): commit}) == {("t", 0): 0}
            assert await manager.store_offsets("busy", {("t", 0): commit}) == {("t", 0): 0}
            for group in ("committed", "idle"):
                assert c.handle_leave_group(group, [(left[group].member_id, None)])[0] == 0
            for _ in range(100):
                if c.group_state("committed") == c.group_state("idle") == "Empty":
                    break
                await asyncio.sleep(0.01)
            assert manager.has_group("idle") and manager.has_group("committed")
            # before the retention: only the group that never committed goes
            assert await c.cleanup_group_metadata() == 0
            assert c.group_state("idle") is None and not manager.has_group("idle")
            assert c.group_state("committed") == "Empty"
            clock.sleep(retention + 5_000)  # the group's empty-since stamp is wall time, a little later
            assert await c.cleanup_group_metadata() == 1
            assert c.group_state("committed") is None and not manager.has_group("committed")
            assert c.group_state("busy") == "Stable" and manager.has_offsets("busy")
            assert sorted(g for g, _, _ in c.list_groups()[1]) == ["busy"]
            c.shutdown()
        with LogManager(tmp_path / "data", time=clock) as log_manager:
            again = GroupMetadataManager(log_manager, num_partitions=1, retention_ms=retention, time=clock)
            assert sorted(again.load()) == ["busy"]

    asyncio.run(asyncio.wait_for(scenario(), 30))


def _auto_create(broker: Broker, name: str) -> Any:
    """The topic entry of a Metadata v12 response to a request naming ``name`` with auto-creation on."""
    host, port = broker.bootstrap_servers.split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        cls, mod = _raw.request_class(ApiKey.METADATA, 12)
        request = cls(topics=(mod.MetadataRequestTopic(topic_id=None, name=name),),
                      allow_auto_topic_creation=True, include_topic_authorized_operations=False)
        resp = _raw.request(sock, request)
    return resp.topics[0]


def test_a_metadata_request_auto_creates_the_offsets_topic_as_the_coordinator_does(tmp_path: Path) -> None:
    """A client naming __consumer_offsets in Metadata (a producer aiming at it, say) auto-creates it
    with offsets.topic.num.partitions and its compacted configs, as Kafka's AutoTopicCreationManager,
    not as an ordinary topic of num.partitions, which would leave most groups without a partition."""
    configs = {"offsets.topic.num.partitions": 5, "num.partitions": 1}
    with Broker(tmp_path / "data", configs=configs) as broker:
        topic = _auto_create(broker, GROUP_METADATA_TOPIC_NAME)
        assert topic.error_code == 0 and topic.is_internal
        log_manager = broker.server.log_manager
        assert log_manager.partitions(GROUP_METADATA_TOPIC_NAME) == [0, 1, 2, 3, 4]
        assert log_manager.topic_config(GROUP_METADATA_TOPIC_NAME).cleanup_policy == ("compact",)
        # and groups then commit into their own partition
        c = ck.Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "after-auto-create",
                         "enable.auto.commit": False})
        c.commit(offsets=[ck.TopicPartition(GROUP_METADATA_TOPIC_NAME, 0, 1)], asynchronous=False)
        c.close()



def test_a_metadata_request_auto_creates_the_transaction_topic_with_its_own_settings(tmp_path: Path) -> None:
    """__transaction_state, named in a Metadata request, is created as Kafka's AutoTopicCreationManager
    creates it: transaction.state.log.num.partitions partitions, compacted, uncompressed."""
    configs = {"transaction.state.log.num.partitions": 3, "num.partitions": 1}
    with Broker(tmp_path / "data", configs=configs) as broker:
        topic = _auto_create(broker, "__transaction_state")
        assert topic.error_code == 0 and topic.is_internal and len(topic.partitions) == 3
        log_manager = broker.server.log_manager
        assert log_manager.partitions("__transaction_state") == [0, 1, 2]
        config = log_manager.topic_config("__transaction_state")
        assert config.cleanup_policy == ("compact",) and config.compression_type == "uncompressed"


@pytest.mark.parametrize("deletion", ["delete_group", "delete_group_with_commit", "delete_offsets"])
def test_a_deletion_drops_an_open_transactions_offsets(tmp_path: Path, deletion: str) -> None:
    """Deleting a group or its offsets while a transaction holds offsets for it: the tombstone drops
    the pending commit too (Kafka's ``OffsetMetadataManager.deleteAllOffsets``/``deleteOffsets`` and
    the replay of a tombstone), so the transaction's COMMIT brings nothing back — live, and after a
    restart that replays the log."""
    from kafka import KafkaAdminClient

    data_dir = tmp_path / "data"
    with Broker(data_dir, configs=CONFIG) as broker:
        bootstrap = broker.bootstrap_servers
        _produce(bootstrap, "t", 1)
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
        try:
            if deletion == "delete_group_with_commit":
                admin.alter_group_offsets("G", {TopicPartition("t", 0): OffsetAndMetadata(1, "", -1)})
            producer = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": "tx-1"})
            producer.init_transactions(10)
            producer.begin_transaction()
            producer.produce("t", b"v")
            member = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "G"})
            producer.send_offsets_to_transaction([ck.TopicPartition("t", 0, 42)],
                                                 member.consumer_group_metadata(), 10)
            member.close()
            if deletion == "delete_offsets":
                admin.delete_group_offsets("G", [TopicPartition("t", 0)])
            else:
                admin.delete_groups(["G"])
            producer.commit_transaction(10)
            assert _committed_ck(bootstrap, "G", "t")[0] == ck.OFFSET_INVALID
        finally:
            admin.close()
    with Broker(data_dir, configs=CONFIG) as broker:
        assert _committed_ck(broker.bootstrap_servers, "G", "t")[0] == ck.OFFSET_INVALID


def test_pending_transactional_offsets_outlive_expiry_and_go_with_their_topic(tmp_path: Path) -> None:
    """An expired offset is kept while an open transaction holds a commit for its partition (Kafka's
    ``cleanupExpiredOffsets``), and a deleted topic's pending commits are tombstoned with its offsets
    (``onPartitionsDeleted``)."""
    clock = MockTime(1_700_000_000_000)
    retention = 60_000

    async def scenario() -> None:
        with LogManager(tmp_path / "data", time=clock) as log_manager:
            log_manager.create_topic("t", 2)
            manager = GroupMetadataManager(log_manager, num_partitions=1, retention_ms=retention, time=clock)
            manager.load()
            await manager.store_offsets("g", {("t", 0): OffsetCommitValue(1, -1, "", clock.milliseconds())})
            clock.sleep(retention + 1)
            pending = OffsetCommitValue(42, -1, "", clock.milliseconds())
            assert await manager.store_txn_offsets("g", 1000, 0, {("t", 0): pending}) == {("t", 0): 0}
            assert await manager.cleanup_expired_offsets(lambda group: None) == 0
            manager.complete_txn_offsets(1000, 0, commit=True)
            assert manager.get_offsets("g") == {("t", 0): pending}

            # a topic deleted while only a pending commit names it: the COMMIT applies nothing
            await manager.store_txn_offsets("g", 1001, 0, {("t", 1): OffsetCommitValue(9, -1, "", 0)})
            assert await manager.remove_offsets_of_topic("t") == 2
            assert not manager.has_pending_txn_offsets("g")
            manager.complete_txn_offsets(1001, 0, commit=True)
            assert manager.get_offsets("g") == {}

    asyncio.run(scenario())
