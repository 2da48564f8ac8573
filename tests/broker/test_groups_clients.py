"""Consumer groups with real clients: kafka-python, confluent-kafka and aiokafka consumers share a
6-partition topic, take over a leaving member's partitions without losing or repeating a committed
record, static members come back without a rebalance, sessions expire, and the admin clients list
and describe the groups."""

from __future__ import annotations

import asyncio
import collections
import datetime
import struct
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import aiokafka
import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kio.schema.errors import ErrorCode as E

from kafkalog.broker.request import nested_type
from kafkalog.protocol.api_keys import ApiKey
from tests.broker import _raw
from tests.broker.test_groups_protocol import join_req, sync_req

PARTITIONS = 6
GROUP_CONFIG = {
    "num.partitions": PARTITIONS,
    "group.initial.rebalance.delay.ms": 0,
    "group.min.session.timeout.ms": 100,
    "offsets.topic.num.partitions": 1,  # one __consumer_offsets partition to create: faster tests
}
pytestmark = pytest.mark.kafkalog_broker_config(GROUP_CONFIG)
DEADLINE_S = 60.0


def produce(bootstrap: str, topic: str, start: int, count: int) -> list[bytes]:
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    values = [b"v%d" % i for i in range(start, start + count)]
    for i, value in enumerate(values):
        producer.send(topic, value, partition=(start + i) % PARTITIONS)
    producer.flush(10)
    producer.close()
    return values


def wait_until(condition: Callable[[], bool], step: Callable[[], None], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        step()


class KafkaPythonMember:
    """A kafka-python consumer polling in its own thread, as applications run it. (Polled in turn from
    one thread with short timeouts, kafka-python drops a join that completed between two polls and
    joins again; a leader doing that restarts the rebalance every time.)"""

    def __init__(self, bootstrap: str, topic: str, group: str, **extra: Any) -> None:
        self._config = dict(
            bootstrap_servers=bootstrap,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=True,
            auto_commit_interval_ms=200,
            session_timeout_ms=2000,
            heartbeat_interval_ms=100,
            **extra,
        )
        self._topic = topic
        self._lock = threading.Lock()
        self._records: list[tuple[int, int, bytes]] = []
        self._partitions: set[int] = set()
        self._stop = threading.Event()
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        self._started.wait(DEADLINE_S)

    def _run(self) -> None:
        consumer = KafkaConsumer(self._topic, **self._config)
        self._started.set()
        try:
            while not self._stop.is_set():
                batches = consumer.poll(timeout_ms=500)
                with self._lock:
                    self._records += [(m.partition, m.offset, m.value) for ms in batches.values() for m in ms]
                    self._partitions = {tp.partition for tp in consumer.assignment()}
        finally:
            consumer.close()  # commits, then leaves the group

    def poll(self) -> list[tuple[int, int, bytes]]:
        time.sleep(0.02)
        with self._lock:
            got, self._records = self._records, []
        return got

    def partitions(self) -> set[int]:
        with self._lock:
            return set(self._partitions)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(DEADLINE_S)
        assert not self._thread.is_alive(), "kafka-python consumer did not close"


class ConfluentMember:
    def __init__(self, bootstrap: str, topic: str, group: str, **extra: Any) -> None:
        self.revocations = 0
        self.consumer = ck.Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": True,
                "auto.commit.interval.ms": 200,
                "session.timeout.ms": 2000,
                "heartbeat.interval.ms": 100,
                "topic.metadata.refresh.interval.ms": 1000,
                **extra,
            }
        )

        def on_revoke(_: Any, tps: list[ck.TopicPartition]) -> None:
            self.revocations += 1

        self.consumer.subscribe([topic], on_revoke=on_revoke)

    def poll(self) -> list[tuple[int, int, bytes]]:
        got = []
        for m in self.consumer.consume(num_messages=100, timeout=0.05):
            if m.error() is None:
                got.append((m.partition(), m.offset(), m.value()))
        return got

    def partitions(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment()}

    def close(self) -> None:
        self.consumer.close()


class CooperativeConfluentMember(ConfluentMember):
    """librdkafka's cooperative-sticky assignor: incremental rebalances, several JoinGroup rounds."""

    def __init__(self, bootstrap: str, topic: str, group: str, **extra: Any) -> None:
        super().__init__(
            bootstrap, topic, group, **{"partition.assignment.strategy": "cooperative-sticky", **extra}
        )


CLIENTS = {
    "kafka-python": KafkaPythonMember,
    "confluent-kafka": ConfluentMember,
    "cooperative": CooperativeConfluentMember,
}


@pytest.mark.parametrize(
    "kinds",
    [
        ["kafka-python"] * 3,
        ["confluent-kafka"] * 3,
        ["cooperative"] * 3,
        ["confluent-kafka", "kafka-python", "confluent-kafka"],
    ],
    ids=["kafka-python", "confluent-kafka", "confluent-cooperative-sticky", "mixed"],
)
def test_three_consumers_split_partitions_and_take_over_a_leaver_exactly_once(kafkalog_broker, kinds):
    bootstrap = kafkalog_broker.bootstrap_servers
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    produced = produce(bootstrap, topic, 0, 60)
    members = [CLIENTS[kind](bootstrap, topic, group) for kind in kinds]
    seen: list[tuple[int, int, bytes]] = []

    def step(active: list[Any]) -> Callable[[], None]:
        return lambda: [seen.extend(m.poll()) for m in active]

    try:
        wait_until(
            lambda: [len(m.partitions()) for m in members] == [2, 2, 2] and len(seen) >= 60,
            step(members),
            "three members with two partitions each and every record",
        )
        assert set().union(*(m.partitions() for m in members)) == set(range(PARTITIONS))
        leaver, rest = members[0], members[1:]
        leaver.close()
        produced += produce(bootstrap, topic, 60, 60)
        wait_until(
            lambda: sorted(len(m.partitions()) for m in rest) == [3, 3] and len(seen) >= 120,
            step(rest),
            "the two remaining members to take over and read everything",
        )
        for _ in range(10):  # anything read twice would show up now
            step(rest)()
    finally:
        for m in members[1:]:
            m.close()
    counts = collections.Counter((p, o) for p, o, _ in seen)
    assert [key for key, n in counts.items() if n > 1] == []
    assert sorted(v for _, _, v in seen) == sorted(produced)


def test_aiokafka_consumers_share_the_topic(kafkalog_broker):
    bootstrap = kafkalog_broker.bootstrap_servers
    topic, group = f"t-{uuid.uuid4().hex[:8]}", "aio-group"
    produced = produce(bootstrap, topic, 0, 30)

    async def run() -> tuple[list[bytes], list[set[int]]]:
        consumers = [
            aiokafka.AIOKafkaConsumer(
                topic,
                bootstrap_servers=bootstrap,
                group_id=group,
                auto_offset_reset="earliest",
                session_timeout_ms=2000,
                heartbeat_interval_ms=100,
            )
            for _ in range(2)
        ]
        for c in consumers:
            await c.start()
        got: list[bytes] = []
        try:
            deadline = time.monotonic() + DEADLINE_S
            while time.monotonic() < deadline:
                for c in consumers:
                    batches = await c.getmany(timeout_ms=50)
                    got += [m.value for ms in batches.values() for m in ms]
                parts = [{tp.partition for tp in c.assignment()} for c in consumers]
                if len(got) >= 30 and all(len(p) == 3 for p in parts):
                    return got, parts
            raise AssertionError("aiokafka members did not settle")
        finally:
            for c in consumers:
                await c.stop()

    got, parts = asyncio.run(run())
    assert sorted(got) == sorted(produced)
    assert parts[0] | parts[1] == set(range(PARTITIONS)) and not parts[0] & parts[1]


def _generation(broker: Any, group: str) -> int:
    async def read() -> int:
        return broker.server.apis.components["group_coordinator"].groups[group].generation_id

    return broker.run_coroutine(read())


def test_static_member_restarts_without_rebalance(kafkalog_broker):
    bootstrap = kafkalog_broker.bootstrap_servers
    topic, group = f"t-{uuid.uuid4().hex[:8]}", "static-group"
    produce(bootstrap, topic, 0, 12)
    statics = {"group.instance.id": "inst-1", "session.timeout.ms": 6000}
    a = ConfluentMember(bootstrap, topic, group, **statics)
    b = ConfluentMember(
        bootstrap, topic, group, **{"group.instance.id": "inst-2", "session.timeout.ms": 6000}
    )
    try:
        wait_until(
            lambda: len(a.partitions()) == 3 and len(b.partitions()) == 3,
            lambda: (a.poll(), b.poll()),
            "two static members with three partitions each",
        )
        generation, before = _generation(kafkalog_broker, group), b.revocations
        a.close()  # a static member does not leave the group on close
        a = ConfluentMember(bootstrap, topic, group, **statics)
        wait_until(
            lambda: len(a.partitions()) == 3,
            lambda: (a.poll(), b.poll()),
            "the restarted member's partitions",
        )
        for _ in range(10):
            b.poll()
        assert _generation(kafkalog_broker, group) == generation
        assert b.revocations == before and len(b.partitions()) == 3
    finally:
        a.close()
        b.close()


def test_session_timeout_evicts_a_silent_member(kafkalog_broker):
    """A member that joins by hand and never heartbeats loses its partitions to the live one."""
    bootstrap = kafkalog_broker.bootstrap_servers
    topic, group = f"t-{uuid.uuid4().hex[:8]}", "evict-group"
    produce(bootstrap, topic, 0, 6)
    live = KafkaPythonMember(bootstrap, topic, group)
    wait_until(lambda: len(live.partitions()) == PARTITIONS, live.poll, "the first member's assignment")
    # Long enough for the leader's SyncGroup to reach the silent member on a loaded machine (with
    # 300 ms it was sometimes evicted before the split could be seen).
    session = datetime.timedelta(milliseconds=2000)
    proto = nested_type(_raw.request_class(ApiKey.JOIN_GROUP, 5)[0], "JoinGroupRequestProtocol")
    subscription = _live_subscription(kafkalog_broker, group)  # the leader must be able to decode it
    settings = dict(
        session_timeout=session,
        rebalance_timeout=session,
        protocols=(proto(name="range", metadata=subscription),),
    )
    box: dict[str, Any] = {}

    def in_background(key: str, sock: Any, body: Any) -> threading.Thread:
        thread = threading.Thread(target=lambda: box.setdefault(key, _raw.request(sock, body)))
        thread.start()
        return thread

    with _raw.connect(bootstrap) as sock:
        first = _raw.request(sock, join_req(5, group, **settings))
        assert first.error_code == E.member_id_required
        thread = in_background("join", sock, join_req(5, group, first.member_id, **settings))
        wait_until(lambda: "join" in box, live.poll, "the silent member's join")
        thread.join(5)
        assert box["join"].error_code == E.none
        thread = in_background("sync", sock, sync_req(3, box["join"], group))
        wait_until(lambda: "sync" in box, live.poll, "the silent member's assignment")
        thread.join(5)
        # the leader split the partitions: the silent member's share is half of them (whether the live
        # member is seen holding the other half between two polls depends on timing)
        assert box["sync"].error_code == E.none
        assert len(_assigned_partitions(box["sync"].assignment)) == PARTITIONS // 2
        # the silent member never heartbeats: after its session the live member gets everything back
        wait_until(lambda: len(live.partitions()) == PARTITIONS, live.poll, "eviction of the silent member")
    live.close()


def _assigned_partitions(assignment: bytes) -> list[int]:
    """The partitions of a consumer protocol Assignment (version, [topic, [partition]], user data)."""
    (topics,) = struct.unpack_from(">i", assignment, 2)
    at, partitions = 6, []
    for _ in range(topics):
        (name_length,) = struct.unpack_from(">h", assignment, at)
        at += 2 + name_length
        (count,) = struct.unpack_from(">i", assignment, at)
        partitions += struct.unpack_from(f">{count}i", assignment, at + 4)
        at += 4 + 4 * count
    return partitions


def _live_subscription(broker: Any, group: str) -> bytes:
    async def read() -> bytes:
        member = next(iter(broker.server.apis.components["group_coordinator"].groups[group]))
        return member.metadata("range")

    return broker.run_coroutine(read())


def test_admin_clients_list_and_describe_groups(kafkalog_broker):
    bootstrap = kafkalog_broker.bootstrap_servers
    topic, group = f"t-{uuid.uuid4().hex[:8]}", "admin-group"
    produce(bootstrap, topic, 0, 6)
    members = [KafkaPythonMember(bootstrap, topic, group, client_id=f"member-{i}") for i in range(2)]
    try:
        wait_until(
            lambda: all(len(m.partitions()) == 3 for m in members),
            lambda: [m.poll() for m in members],
            "a stable group of two",
        )
        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        try:
            listed = admin.list_groups()
            assert any(_field(g, "group_id") == group for g in listed), listed
            described = admin.describe_groups([group])[group]
            assert described["group_state"] == "Stable" and described["protocol_data"] == "range"
            assert sorted(m["client_id"] for m in described["members"]) == ["member-0", "member-1"]
        finally:
            admin.close()
        cadmin = AdminClient({"bootstrap.servers": bootstrap})
        result = cadmin.list_consumer_groups(request_timeout=10).result(10)
        assert group in {g.group_id for g in result.valid}
        description = cadmin.describe_consumer_groups([group], request_timeout=10)[group].result(10)
        assert description.state == ck.ConsumerGroupState.STABLE
        assert sorted(m.client_id for m in description.members) == ["member-0", "member-1"]
        owned = sorted(tp.partition for m in description.members for tp in m.assignment.topic_partitions)
        assert owned == list(range(PARTITIONS))
        assert description.authorized_operations is None  # not asked for
        asked = cadmin.describe_consumer_groups([group], include_authorized_operations=True)[group]
        ops = ck.admin.AclOperation
        assert set(asked.result(10).authorized_operations) == {
            ops.READ,
            ops.DESCRIBE,
            ops.DELETE,
            ops.DESCRIBE_CONFIGS,
            ops.ALTER_CONFIGS,
        }
    finally:
        for m in members:
            m.close()


def _field(obj: Any, name: str) -> Any:
    return obj[name] if isinstance(obj, dict) else getattr(obj, name)
