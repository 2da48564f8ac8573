"""Consumer group benchmark: how long a rebalance takes, as a ratio against consuming without one.

* **rebalance** — three confluent-kafka (librdkafka) consumers ``subscribe`` to a 6-partition topic
  in one group on an embedded broker with ``group.initial.rebalance.delay.ms=0``; the time from
  the first ``subscribe`` until every one of them has received its first record (join, sync, offset
  fetch, first fetch). Reference, same run: three consumers ``assign`` two partitions each (no
  group protocol) and read their first record. ``ratio`` = reference / group time (below 1: the
  group protocol costs that much more). Median of several rounds, interleaved.
* **coordinator** — the in-process cost of one rebalance of three members (JoinGroup x3, SyncGroup
  x3) through ``GroupCoordinator`` on an asyncio loop, no sockets; reference: the same number of
  bare ``asyncio`` future round trips. Microseconds, best of several rounds.

Run: ``.venv/bin/python benchmarks/bench_groups.py`` (about half a minute).
"""

from __future__ import annotations

import asyncio
import shutil
import statistics
import tempfile
import time
import uuid
from pathlib import Path

import confluent_kafka as ck
from kafka import KafkaProducer

from kafkalog.broker.embedded import Broker
from kafkalog.broker.group.group_coordinator import GroupConfig, GroupCoordinator

PARTITIONS = 6
MEMBERS = 3
ROUNDS = 5
TIMEOUT_S = 30.0


def _first_records(consumers: list[ck.Consumer]) -> float:
    """Seconds until each consumer has one record. Every consumer keeps polling: librdkafka serves a
    rebalance (revoke, rejoin) only inside poll."""
    start = time.perf_counter()
    pending = set(range(len(consumers)))
    while pending:
        if time.perf_counter() - start > TIMEOUT_S:
            raise RuntimeError("consumers did not receive records in time")
        for i in range(len(consumers)):
            message = consumers[i].poll(0.01)
            if message is not None and message.error() is None:
                pending.discard(i)
    return time.perf_counter() - start


def _consumer(bootstrap: str, group: str) -> ck.Consumer:
    return ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
            "fetch.wait.max.ms": 10,
        }
    )


def _group_round(bootstrap: str, topic: str) -> float:
    group = f"bench-{uuid.uuid4().hex[:8]}"
    consumers = [_consumer(bootstrap, group) for _ in range(MEMBERS)]
    try:
        start = time.perf_counter()
        for c in consumers:
            c.subscribe([topic])
        _first_records(consumers)
        return time.perf_counter() - start
    finally:
        for c in consumers:
            c.close()


def _assign_round(bootstrap: str, topic: str) -> float:
    consumers = [_consumer(bootstrap, f"bench-{uuid.uuid4().hex[:8]}") for _ in range(MEMBERS)]
    try:
        start = time.perf_counter()
        for i, c in enumerate(consumers):
            c.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in (2 * i, 2 * i + 1)])
        _first_records(consumers)
        return time.perf_counter() - start
    finally:
        for c in consumers:
            c.close()


def bench_rebalance() -> list[dict]:
    workdir = Path(tempfile.mkdtemp(prefix="kafkalog-bench-groups-"))
    configs = {"num.partitions": PARTITIONS, "group.initial.rebalance.delay.ms": 0}
    try:
        with Broker(workdir / "data", configs=configs) as broker:
            bootstrap = broker.bootstrap_servers
            topic = "bench-groups"
            producer = KafkaProducer(bootstrap_servers=bootstrap)
            for i in range(PARTITIONS * 10):
                producer.send(topic, b"x" * 100, partition=i % PARTITIONS)
            producer.flush(10)
            producer.close()
            _assign_round(bootstrap, topic)  # warm-up: connections, metadata
            group_s, assign_s = [], []
            for _ in range(ROUNDS):
                group_s.append(_group_round(bootstrap, topic))
                assign_s.append(_assign_round(bootstrap, topic))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    group, reference = statistics.median(group_s), statistics.median(assign_s)
    return [
        {
            "measurement": f"rebalance {MEMBERS} confluent-kafka members, subscribe -> first record",
            "ms": group * 1000,
            "reference": "assign (no group) -> first record",
            "reference_ms": reference * 1000,
            "ratio": reference / group,
        }
    ]


async def _coordinator_rebalance(rounds: int) -> float:
    config = GroupConfig(min_session_timeout_ms=1, max_session_timeout_ms=60000, initial_rebalance_delay_ms=0)
    best = float("inf")
    protocols = [("range", b"\x00" * 40)]
    for r in range(rounds):
        coordinator = GroupCoordinator(config)
        start = time.perf_counter()
        ids = [
            (
                await coordinator.handle_join_group(
                    f"g{r}", "", None, True, False, "c", "/h", 5000, 5000, "consumer", protocols
                )
            ).member_id
            for _ in range(MEMBERS)
        ]
        joined = await asyncio.gather(
            *(
                coordinator.handle_join_group(
                    f"g{r}", m, None, True, False, "c", "/h", 5000, 5000, "consumer", protocols
                )
                for m in ids
            )
        )
        leader = next(j for j in joined if j.members)
        assignment = [(m, b"a") for m in ids]
        await asyncio.gather(
            *(
                coordinator.handle_sync_group(
                    f"g{r}", j.generation_id, j.member_id, None, None, None, assignment if j is leader else []
                )
                for j in joined
            )
        )
        best = min(best, time.perf_counter() - start)
        coordinator.shutdown()
    return best


async def _future_round_trips(rounds: int, n: int) -> float:
    loop = asyncio.get_running_loop()
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(n):
            future = loop.create_future()
            loop.call_soon(future.set_result, None)
            await future
        best = min(best, time.perf_counter() - start)
    return best


def bench_coordinator() -> list[dict]:
    ours = asyncio.run(_coordinator_rebalance(200))
    requests = 3 * MEMBERS  # first join, join with id, sync
    reference = asyncio.run(_future_round_trips(200, requests))
    return [
        {
            "measurement": f"GroupCoordinator rebalance, {MEMBERS} members in-process ({requests} requests)",
            "us": ours * 1e6,
            "reference": f"{requests} bare asyncio future round trips",
            "reference_us": reference * 1e6,
            "ratio": reference / ours,
        }
    ]


def run() -> list[dict]:
    return bench_coordinator() + bench_rebalance()


if __name__ == "__main__":
    for row in run():
        print(row)
