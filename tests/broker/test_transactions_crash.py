"""Transactions across crashes. ``kafkalog serve`` is SIGKILLed with one transaction committed and
one open: after the restart the committed records and offsets are there, the open transaction holds
the last stable offset until the producer's successor aborts it, and read_committed consumers see
exactly the committed records. And a coordinator that stopped between EndTxn's steps (PrepareCommit
written, markers not) finishes the commit when it starts again."""

from __future__ import annotations

import signal

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalog.broker.embedded import Broker
from kafkalog.broker.txn.coordinator_of import transaction_coordinator
from kafkalog.broker.txn.transaction_state import TransactionState
from kafkalog.storage.log import FetchIsolation
from tests.broker.test_serve_command import _start, _stop
from tests.broker.test_transactions_clients import consume_all

CONFIG = [
    "--config",
    "transaction.state.log.num.partitions=2",
    "--config",
    "offsets.topic.num.partitions=2",
    "--config",
    "group.initial.rebalance.delay.ms=0",
]


def test_kill_9_with_a_transaction_open_then_restart(tmp_path):
    data_dir = tmp_path / "data"
    proc, bootstrap = _start(["--data-dir", str(data_dir), "--port", "0", *CONFIG])
    port = bootstrap.rsplit(":", 1)[1]
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for future in admin.create_topics([NewTopic("t", 1, 1), NewTopic("in", 1, 1)]).values():
            future.result(30)
        group = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "app"})
        metadata = group.consumer_group_metadata()
        producer = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": "app-tx"})
        producer.init_transactions(30)
        producer.begin_transaction()
        for i in range(5):
            producer.produce("t", b"committed-%d" % i, partition=0)
        producer.send_offsets_to_transaction([ck.TopicPartition("in", 0, 5)], metadata, 30)
        producer.commit_transaction(30)
        producer.begin_transaction()
        for i in range(3):
            producer.produce("t", b"open-%d" % i, partition=0)
        producer.send_offsets_to_transaction([ck.TopicPartition("in", 0, 8)], metadata, 30)
        producer.flush(30)  # the open transaction's records are in the log
        assert _stop(proc, signal.SIGKILL) == -signal.SIGKILL
        group.close()
    finally:
        if proc.poll() is None:
            _stop(proc, signal.SIGKILL)

    proc, bootstrap = _start(["--data-dir", str(data_dir), "--port", port, *CONFIG])
    try:
        # (until the open transaction ends, its offsets are unstable: a read_committed consumer's
        # OffsetFetch asks for stable offsets and would wait)
        successor = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": "app-tx"})
        successor.init_transactions(30)  # aborts what the crashed producer left open
        checker = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "app"})
        assert consume_all(bootstrap, "t", "read_committed", 5) == [b"committed-%d" % i for i in range(5)]
        (committed,) = checker.committed([ck.TopicPartition("in", 0)], 30)
        assert committed.offset == 5
        successor.begin_transaction()
        successor.produce("t", b"after", partition=0)
        successor.send_offsets_to_transaction(
            [ck.TopicPartition("in", 0, 9)], checker.consumer_group_metadata(), 30
        )
        successor.commit_transaction(30)
        assert consume_all(bootstrap, "t", "read_committed", 6) == sorted(
            [b"after", *(b"committed-%d" % i for i in range(5))]
        )
        (committed,) = checker.committed([ck.TopicPartition("in", 0)], 30)
        assert committed.offset == 9
        checker.close()
    finally:
        assert _stop(proc) == 0


def test_a_commit_interrupted_between_its_steps_is_finished_at_startup(tmp_path):
    data = tmp_path / "data"
    configs = {"transaction.state.log.num.partitions": 1, "offsets.topic.num.partitions": 1}
    with Broker(data, configs=configs) as broker:
        bootstrap = broker.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("t", 1, 1)])["t"].result(30)
        producer = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": "tx"})
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.produce("t", b"decided", partition=0)
        producer.flush(30)
        coordinator = transaction_coordinator(broker.server.apis)

        async def prepare_commit_only() -> None:  # what a crash right after the PrepareCommit record leaves
            manager = coordinator.state_manager
            metadata = manager.get("tx")
            assert metadata is not None
            manager.append_transition(
                metadata, metadata.prepare_abort_or_commit(TransactionState.PREPARE_COMMIT, 0)
            )

        broker.run_coroutine(prepare_commit_only())
        log = broker.server.log_manager.get_log("t", 0)
        assert log.last_stable_offset == 0

    with Broker(data, configs=configs) as broker:
        log = broker.server.log_manager.get_log("t", 0)
        assert log.last_stable_offset == log.log_end_offset == 2  # the record and the COMMIT marker
        assert [bytes(r.value) for r in log.records(0, isolation=FetchIsolation.TXN_COMMITTED)] == [
            b"decided"
        ]
        metadata = transaction_coordinator(broker.server.apis).state_manager.get("tx")
        assert metadata is not None and metadata.state is TransactionState.COMPLETE_COMMIT
