"""InitProducerId's id allocation: blocks recorded in the data directory before use, so that no id
is handed out twice across restarts, and a damaged file is an error, not a reset to 0. Without the
file (a Kafka-written data directory) ids start above every producer id the broker already knows,
from its partitions' producer state and from ``__transaction_state``."""

from __future__ import annotations

from pathlib import Path

import confluent_kafka as ck
import pytest
from kafka import KafkaProducer

from kafkalog.broker.embedded import Broker
from kafkalog.broker.producer_id_manager import BLOCK_SIZE, PRODUCER_ID_FILE, ProducerIdManager
from kafkalog.broker.txn.coordinator_of import transaction_coordinator
from kafkalog.errors import KafkaStorageError


def test_ids_are_never_reused_across_restarts(tmp_path: Path) -> None:
    first = ProducerIdManager(tmp_path)
    ids = [first.generate_producer_id() for _ in range(3)]
    assert ids == [0, 1, 2]
    assert (tmp_path / PRODUCER_ID_FILE).read_text() == f"{BLOCK_SIZE}\n"  # the block, before any id of it
    second = ProducerIdManager(tmp_path)  # a restart: the rest of the block is skipped, not reused
    assert second.generate_producer_id() == BLOCK_SIZE
    assert [p.name for p in tmp_path.iterdir()] == [PRODUCER_ID_FILE]  # no temporary file left behind


def test_a_damaged_file_is_reported(tmp_path: Path) -> None:
    (tmp_path / PRODUCER_ID_FILE).write_text("not a number\n")
    with pytest.raises(KafkaStorageError, match="does not hold a producer id"):
        ProducerIdManager(tmp_path)


def test_ensure_above_moves_the_next_id_and_records_its_block_before_use(tmp_path: Path) -> None:
    manager = ProducerIdManager(tmp_path)  # no file: a data directory Kafka wrote
    manager.ensure_above(41)
    assert not (tmp_path / PRODUCER_ID_FILE).exists()  # nothing handed out yet
    assert manager.generate_producer_id() == 42
    assert (tmp_path / PRODUCER_ID_FILE).read_text() == f"{42 + BLOCK_SIZE}\n"
    manager.ensure_above(10)  # below what is handed out already: nothing changes
    assert manager.generate_producer_id() == 43
    restarted = ProducerIdManager(tmp_path)
    restarted.ensure_above(43)
    assert restarted.generate_producer_id() == 42 + BLOCK_SIZE  # the file is above the known ids


# --- a data directory without kafkalog-producer-ids, with real clients ------------------------------

BROKER_CONFIGS = {"transaction.state.log.num.partitions": 1, "offsets.topic.num.partitions": 1}
TIMEOUT_S = 30


def _producer_ids(broker: Broker, topic: str) -> list[int]:
    return [b.producer_id for b in broker.server.log_manager.get_log(topic, 0).batches(0)]


def _confluent_send(producer: ck.Producer, topic: str, values: list[bytes]) -> None:
    failures: list[object] = []
    for value in values:
        producer.produce(topic, value, partition=0,
                         on_delivery=lambda err, _msg: failures.append(err) if err is not None else None)
    assert producer.flush(TIMEOUT_S) == 0
    assert failures == []


def test_idempotent_producer_after_the_file_is_lost_gets_a_new_id(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with Broker(data_dir, configs=BROKER_CONFIGS) as broker:
        old = ck.Producer({"bootstrap.servers": broker.bootstrap_servers, "enable.idempotence": True,
                           "linger.ms": 0})
        for i in range(5):  # separate batches: the partition holds the producer at sequence 4
            _confluent_send(old, "t", [b"old-%d" % i])
        (old_id,) = set(_producer_ids(broker, "t"))
    (data_dir / PRODUCER_ID_FILE).unlink()  # as in a Kafka broker's log.dirs
    with Broker(data_dir, configs=BROKER_CONFIGS) as broker:
        new = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, enable_idempotence=True,
                            max_block_ms=TIMEOUT_S * 1000)
        try:
            for i in range(3):
                new.send("t", b"new-%d" % i, partition=0).get(timeout=TIMEOUT_S)
        finally:
            new.close(timeout=TIMEOUT_S)
        ids = _producer_ids(broker, "t")
        assert ids[:5] == [old_id] * 5
        assert len(ids) > 5 and old_id not in ids[5:]
        assert ids[5] > old_id
        values = [r.value for r in broker.server.log_manager.get_log("t", 0).records(0)]
        assert values == [b"old-%d" % i for i in range(5)] + [b"new-%d" % i for i in range(3)]


def test_a_transactional_id_known_only_to_the_transaction_log_keeps_its_producer_id(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with Broker(data_dir, configs=BROKER_CONFIGS) as broker:
        txn = ck.Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": "tx-old"})
        txn.init_transactions(TIMEOUT_S)  # written to __transaction_state only: no data anywhere
        del txn
    (data_dir / PRODUCER_ID_FILE).unlink()
    with Broker(data_dir, configs=BROKER_CONFIGS) as broker:
        coordinator = transaction_coordinator(broker.server.apis)
        metadata = coordinator.state_manager.get("tx-old")
        assert metadata is not None
        txn_id = metadata.producer_id
        idem = ck.Producer({"bootstrap.servers": broker.bootstrap_servers, "enable.idempotence": True})
        _confluent_send(idem, "shared", [b"idem-1"])
        # The transactional producer comes back with its id and a bumped epoch, and writes there too;
        # had both the same id, the idempotent producer would now be fenced.
        txn = ck.Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": "tx-old"})
        txn.init_transactions(TIMEOUT_S)
        txn.begin_transaction()
        _confluent_send(txn, "shared", [b"txn-1"])
        txn.commit_transaction(TIMEOUT_S)
        _confluent_send(idem, "shared", [b"idem-2"])
        batches = list(broker.server.log_manager.get_log("shared", 0).batches(0))
        data = [(b.producer_id, b.is_control) for b in batches]
        idem_id = data[0][0]
        assert idem_id != txn_id
        assert data == [(idem_id, False), (txn_id, False), (txn_id, True), (idem_id, False)]
