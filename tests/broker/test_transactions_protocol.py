"""The transaction coordinator on the wire: InitProducerId with a transactional id, AddPartitionsToTxn,
AddOffsetsToTxn, EndTxn, TxnOffsetCommit, DescribeTransactions and ListTransactions, with Kafka's
error codes per version, epoch fencing, timeouts, produce-side verification, markers in the logs and
the state in ``__transaction_state`` across a restart."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import timedelta
from typing import Any

import pytest
from kio.schema.errors import ErrorCode as E

from kafkalog.broker.embedded import Broker
from kafkalog.broker.request import build
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.protocol.transaction_log_records import decode_transaction_log_key, decode_transaction_log_value
from kafkalog.records import CompressionType, MemoryRecordsBuilder, TimestampType
from kafkalog.storage.log import FetchIsolation
from tests.broker import _raw

CONFIG = {
    "num.partitions": 2,
    "offsets.topic.num.partitions": 1,
    "transaction.state.log.num.partitions": 1,
    "group.initial.rebalance.delay.ms": 0,
}
pytestmark = pytest.mark.kafkalog_broker_config(CONFIG)
MINUTE = timedelta(minutes=1)


def req(api_key: int, version: int, **fields: Any) -> Any:
    cls, _ = _raw.request_class(api_key, version)
    return build(cls, **fields)


def create_topic(sock, topic: str) -> None:
    cls, mod = _raw.request_class(ApiKey.METADATA, 12)
    r = _raw.request(
        sock,
        cls(
            topics=(mod.MetadataRequestTopic(topic_id=None, name=topic),),
            allow_auto_topic_creation=True,
            include_topic_authorized_operations=False,
        ),
    )
    assert r.topics[0].error_code == E.none


def init_pid(
    sock, txn_id: str, version: int = 4, timeout: timedelta = MINUTE, pid: int = -1, epoch: int = -1
) -> Any:
    return _raw.request(
        sock,
        req(
            ApiKey.INIT_PRODUCER_ID,
            version,
            transactional_id=txn_id,
            transaction_timeout=timeout,
            producer_id=pid,
            producer_epoch=epoch,
        ),
    )


def add_partitions(
    sock, txn_id: str, pid: int, epoch: int, partitions: dict[str, list[int]], version: int = 3
) -> dict[tuple[str, int], E]:
    _, mod = _raw.request_class(ApiKey.ADD_PARTITIONS_TO_TXN, version)
    r = _raw.request(
        sock,
        req(
            ApiKey.ADD_PARTITIONS_TO_TXN,
            version,
            v3_and_below_transactional_id=txn_id,
            v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=tuple(
                mod.AddPartitionsToTxnTopic(name=t, partitions=tuple(ps)) for t, ps in partitions.items()
            ),
        ),
    )
    return {
        (t.name, p.partition_index): p.partition_error_code
        for t in r.results_by_topic_v3_and_below
        for p in t.results_by_partition
    }


def end_txn(sock, txn_id: str, pid: int, epoch: int, commit: bool, version: int = 3) -> E:
    r = _raw.request(
        sock,
        req(
            ApiKey.END_TXN,
            version,
            transactional_id=txn_id,
            producer_id=pid,
            producer_epoch=epoch,
            committed=commit,
        ),
    )
    return r.error_code


def txn_offset_commit(sock, txn_id: str, group: str, pid: int, epoch: int, offset: int) -> E:
    _, mod = _raw.request_class(ApiKey.TXN_OFFSET_COMMIT, 3)
    partition = mod.TxnOffsetCommitRequestPartition(
        partition_index=0, committed_offset=offset, committed_leader_epoch=-1, committed_metadata="m"
    )
    r = _raw.request(
        sock,
        req(
            ApiKey.TXN_OFFSET_COMMIT,
            3,
            transactional_id=txn_id,
            group_id=group,
            producer_id=pid,
            producer_epoch=epoch,
            generation_id=-1,
            member_id="",
            group_instance_id=None,
            topics=(mod.TxnOffsetCommitRequestTopic(name="in", partitions=(partition,)),),
        ),
    )
    return r.topics[0].partitions[0].error_code


def add_offsets(sock, txn_id: str, group: str, pid: int, epoch: int) -> E:
    r = _raw.request(
        sock,
        req(
            ApiKey.ADD_OFFSETS_TO_TXN,
            3,
            transactional_id=txn_id,
            producer_id=pid,
            producer_epoch=epoch,
            group_id=group,
        ),
    )
    return r.error_code


def txn_batch(pid: int, epoch: int, sequence: int, values: list[bytes]) -> bytes:
    builder = MemoryRecordsBuilder(
        2,
        CompressionType.NONE,
        TimestampType.CREATE_TIME,
        0,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=sequence,
        is_transactional=True,
    )
    for i, value in enumerate(values):
        builder.append(1_000 + i, None, value)
    return builder.build().to_bytes()


def produce(sock, txn_id: str | None, topic: str, partition: int, records: bytes,
            version: int = 9) -> Any:
    cls, mod = _raw.request_class(ApiKey.PRODUCE, version)
    r = _raw.request(
        sock,
        cls(
            transactional_id=txn_id,
            acks=-1,
            timeout=timedelta(seconds=5),
            topic_data=(
                mod.TopicProduceData(
                    name=topic, partition_data=(mod.PartitionProduceData(index=partition, records=records),)
                ),
            ),
        ),
    )
    return r.responses[0].partition_responses[0]


def values(broker: Broker, topic: str, partition: int, isolation: FetchIsolation) -> list[bytes]:
    log = broker.server.log_manager.get_log(topic, partition)
    return [bytes(r.value) for r in log.records(0, isolation=isolation) if r.value is not None]


def test_init_producer_id_gives_one_producer_id_and_a_new_epoch_each_time(kafkalog_broker):
    with _raw.connect(kafkalog_broker.bootstrap_servers) as sock:
        first = init_pid(sock, "tx")
        second = init_pid(sock, "tx")
        other = init_pid(sock, "other")
    assert (first.error_code, first.producer_epoch) == (E.none, 0)
    assert (second.error_code, second.producer_id, second.producer_epoch) == (E.none, first.producer_id, 1)
    assert other.producer_id != first.producer_id


@pytest.mark.parametrize("version", range(6))
def test_init_producer_id_errors_per_version(kafkalog_broker, version):
    with _raw.connect(kafkalog_broker.bootstrap_servers) as sock:
        assert init_pid(sock, "", version).error_code == E.invalid_request
        assert init_pid(sock, "tx", version, timeout=timedelta(minutes=16)).error_code == (
            E.invalid_transaction_timeout
        )  # transaction.max.timeout.ms is 15 minutes
        assert init_pid(sock, "tx", version, timeout=timedelta(0)).error_code == E.invalid_transaction_timeout
        ok = init_pid(sock, "tx", version)
        assert ok.error_code == E.none
        if version >= 3:
            # KIP-360: a producer recovering with its id and epoch gets the next epoch ...
            again = init_pid(sock, "tx", version, pid=ok.producer_id, epoch=ok.producer_epoch)
            assert (again.error_code, again.producer_epoch) == (E.none, ok.producer_epoch + 1)
            # ... one holding a stale epoch is fenced; INVALID_PRODUCER_EPOCH before v4
            stale = init_pid(sock, "tx", version, pid=ok.producer_id, epoch=ok.producer_epoch - 5)
            assert stale.error_code == (E.producer_fenced if version >= 4 else E.invalid_producer_epoch)
            foreign = init_pid(sock, "tx", version, pid=ok.producer_id + 1000, epoch=0)
            assert foreign.error_code == (E.producer_fenced if version >= 4 else E.invalid_producer_epoch)
            assert init_pid(sock, "tx", version, pid=ok.producer_id, epoch=-1).error_code == E.invalid_request


@pytest.mark.parametrize("version", range(4))
def test_add_partitions_errors_per_version(kafkalog_broker, version):
    with _raw.connect(kafkalog_broker.bootstrap_servers) as sock:
        create_topic(sock, "t")
        ok = init_pid(sock, "tx")
        pid, epoch = ok.producer_id, ok.producer_epoch
        assert add_partitions(sock, "nobody", pid, epoch, {"t": [0]}, version) == {
            ("t", 0): E.invalid_producer_id_mapping
        }
        assert add_partitions(sock, "tx", pid + 1, epoch, {"t": [0]}, version) == {
            ("t", 0): E.invalid_producer_id_mapping
        }
        fenced = E.producer_fenced if version >= 2 else E.invalid_producer_epoch
        assert add_partitions(sock, "tx", pid, epoch + 1, {"t": [0]}, version) == {("t", 0): fenced}
        # one missing partition: nothing is added
        assert add_partitions(sock, "tx", pid, epoch, {"t": [0, 7], "nope": [0]}, version) == {
            ("t", 0): E.operation_not_attempted,
            ("t", 7): E.unknown_topic_or_partition,
            ("nope", 0): E.unknown_topic_or_partition,
        }
        assert add_partitions(sock, "tx", pid, epoch, {"t": [0, 1]}, version) == {
            ("t", 0): E.none,
            ("t", 1): E.none,
        }
        assert end_txn(sock, "tx", pid, epoch, True, min(version, 4)) == E.none


def test_end_txn_follows_kafkas_state_machine(kafkalog_broker):
    with _raw.connect(kafkalog_broker.bootstrap_servers) as sock:
        create_topic(sock, "t")
        ok = init_pid(sock, "tx")
        pid, epoch = ok.producer_id, ok.producer_epoch
        assert end_txn(sock, "tx", pid, epoch, True) == E.invalid_txn_state  # Empty: nothing to end
        assert end_txn(sock, "nobody", pid, epoch, True) == E.invalid_producer_id_mapping
        add_partitions(sock, "tx", pid, epoch, {"t": [0]})
        assert end_txn(sock, "tx", pid, epoch + 1, True) == E.producer_fenced
        assert end_txn(sock, "tx", pid, epoch + 1, True, version=1) == E.invalid_producer_epoch
        assert end_txn(sock, "tx", pid, epoch, True) == E.none
        assert end_txn(sock, "tx", pid, epoch, True) == E.none  # a retried commit
        assert end_txn(sock, "tx", pid, epoch, False) == E.invalid_txn_state
        add_partitions(sock, "tx", pid, epoch, {"t": [0]})
        assert end_txn(sock, "tx", pid, epoch, False) == E.none
        assert end_txn(sock, "tx", pid, epoch, False) == E.none
        assert end_txn(sock, "tx", pid, epoch, True) == E.invalid_txn_state


def test_committed_and_aborted_writes_and_their_markers(kafkalog_broker):
    broker = kafkalog_broker
    with _raw.connect(broker.bootstrap_servers) as sock:
        create_topic(sock, "t")
        ok = init_pid(sock, "tx")
        pid, epoch = ok.producer_id, ok.producer_epoch
        add_partitions(sock, "tx", pid, epoch, {"t": [0]})
        assert produce(sock, "tx", "t", 0, txn_batch(pid, epoch, 0, [b"a", b"b"])).error_code == E.none
        log = broker.server.log_manager.get_log("t", 0)
        assert log.last_stable_offset == 0  # the open transaction holds it
        assert values(broker, "t", 0, FetchIsolation.TXN_COMMITTED) == []
        assert end_txn(sock, "tx", pid, epoch, True) == E.none
        assert log.last_stable_offset == 3  # two records and the COMMIT marker
        add_partitions(sock, "tx", pid, epoch, {"t": [0]})
        assert produce(sock, "tx", "t", 0, txn_batch(pid, epoch, 2, [b"x"])).error_code == E.none
        assert end_txn(sock, "tx", pid, epoch, False) == E.none
    assert values(broker, "t", 0, FetchIsolation.TXN_COMMITTED) == [b"a", b"b"]
    assert values(broker, "t", 0, FetchIsolation.HIGH_WATERMARK) == [b"a", b"b", b"x"]
    batches = list(log.batches(0))
    assert [(b.is_control, b.is_transactional, b.producer_id) for b in batches] == [
        (False, True, pid),
        (True, True, pid),
        (False, True, pid),
        (True, True, pid),
    ]
    assert [a.producer_id for a in log.collect_aborted_transactions(0, log.log_end_offset)] == [pid]


def test_produce_is_verified_against_the_transaction(kafkalog_broker):
    with _raw.connect(kafkalog_broker.bootstrap_servers) as sock:
        create_topic(sock, "t")
        ok = init_pid(sock, "tx")
        pid, epoch = ok.producer_id, ok.producer_epoch
        refused = produce(sock, "tx", "t", 0, txn_batch(pid, epoch, 0, [b"stray"]))
        assert refused.error_code == E.invalid_txn_state
        assert refused.error_message == "Partition was not added to the transaction"
        # from Produce v11 the coordinator's own answer, TRANSACTION_ABORTABLE (KIP-890), unexplained
        newer = produce(sock, "tx", "t", 0, txn_batch(pid, epoch, 0, [b"stray"]), version=11)
        assert (newer.error_code, newer.error_message) == (E.transaction_abortable, None)
        # a topic that does not exist is answered before any verification
        missing = produce(sock, "tx", "no-such", 0, txn_batch(pid, epoch, 0, [b"stray"]), version=11)
        assert missing.error_code == E.unknown_topic_or_partition
        add_partitions(sock, "tx", pid, epoch, {"t": [0]})
        assert produce(sock, "tx", "t", 1, txn_batch(pid, epoch, 0, [b"x"])).error_code == E.invalid_txn_state
        stale = produce(sock, "tx", "t", 0, txn_batch(pid, epoch + 1, 0, [b"x"]))
        assert stale.error_code == E.invalid_producer_epoch  # clients take it as fenced
        assert produce(sock, "tx", "t", 0, txn_batch(pid, epoch, 0, [b"x"])).error_code == E.none
    assert kafkalog_broker.server.log_manager.get_log("t", 1).log_end_offset == 0


@pytest.mark.kafkalog_broker_config({"transaction.partition.verification.enable": "false"})
def test_verification_can_be_turned_off(kafkalog_broker):
    with _raw.connect(kafkalog_broker.bootstrap_servers) as sock:
        create_topic(sock, "t")
        ok = init_pid(sock, "tx")
        r = produce(sock, "tx", "t", 0, txn_batch(ok.producer_id, ok.producer_epoch, 0, [b"unverified"]))
        assert r.error_code == E.none


def test_a_new_producer_fences_the_old_one_and_aborts_its_transaction(kafkalog_broker):
    broker = kafkalog_broker
    with _raw.connect(broker.bootstrap_servers) as sock:
        create_topic(sock, "t")
        old = init_pid(sock, "tx")
        pid, epoch = old.producer_id, old.producer_epoch
        add_partitions(sock, "tx", pid, epoch, {"t": [0]})
        assert produce(sock, "tx", "t", 0, txn_batch(pid, epoch, 0, [b"zombie"])).error_code == E.none
        # the new producer is told to retry while the open transaction is aborted with epoch + 1
        assert init_pid(sock, "tx").error_code == E.concurrent_transactions
        new = init_pid(sock, "tx")
        assert (new.error_code, new.producer_id, new.producer_epoch) == (E.none, pid, epoch + 2)
        assert end_txn(sock, "tx", pid, epoch, True) == E.producer_fenced
        assert add_partitions(sock, "tx", pid, epoch, {"t": [0]}) == {("t", 0): E.producer_fenced}
        late = produce(sock, "tx", "t", 0, txn_batch(pid, epoch, 1, [b"late"]))
        assert late.error_code == E.invalid_producer_epoch  # fenced: the ABORT marker carried epoch + 1
        # without its transactional id the request is refused before anything, as Kafka refuses it
        anonymous = produce(sock, None, "t", 0, txn_batch(pid, epoch, 1, [b"late"]))
        assert anonymous.error_code == E.transactional_id_authorization_failed
    assert values(broker, "t", 0, FetchIsolation.TXN_COMMITTED) == []
    log = broker.server.log_manager.get_log("t", 0)
    assert log.last_stable_offset == log.log_end_offset


@pytest.mark.kafkalog_broker_config({"transaction.abort.timed.out.transaction.cleanup.interval.ms": 100})
def test_a_transaction_past_its_timeout_is_aborted_and_its_producer_fenced(kafkalog_broker):
    broker = kafkalog_broker
    with _raw.connect(broker.bootstrap_servers) as sock:
        create_topic(sock, "t")
        ok = init_pid(sock, "tx", timeout=timedelta(milliseconds=300))
        pid, epoch = ok.producer_id, ok.producer_epoch
        add_partitions(sock, "tx", pid, epoch, {"t": [0]})
        produce(sock, "tx", "t", 0, txn_batch(pid, epoch, 0, [b"slow"]))
        log = broker.server.log_manager.get_log("t", 0)
        deadline = time.monotonic() + 10
        while log.last_stable_offset < log.log_end_offset:
            assert time.monotonic() < deadline, "the timed-out transaction was not aborted"
            time.sleep(0.05)
        assert end_txn(sock, "tx", pid, epoch, True) == E.producer_fenced
        described = _raw.request(sock, req(ApiKey.DESCRIBE_TRANSACTIONS, 0, transactional_ids=("tx",)))
        state = described.transaction_states[0]
        assert (state.transaction_state, state.producer_epoch) == ("CompleteAbort", epoch + 1)
    assert values(broker, "t", 0, FetchIsolation.TXN_COMMITTED) == []


def test_txn_offset_commit_counts_only_when_the_transaction_commits(kafkalog_broker):
    with _raw.connect(kafkalog_broker.bootstrap_servers) as sock:
        create_topic(sock, "in")
        ok = init_pid(sock, "tx")
        pid, epoch = ok.producer_id, ok.producer_epoch

        def commit_offset(offset: int, add: bool = True, producer_epoch: int = epoch) -> E:
            if add:
                assert add_offsets(sock, "tx", "g", pid, epoch) == E.none
            return txn_offset_commit(sock, "tx", "g", pid, producer_epoch, offset)

        def fetch(require_stable: bool) -> tuple[int, E]:
            _, mod = _raw.request_class(ApiKey.OFFSET_FETCH, 7)
            r = _raw.request(
                sock,
                req(
                    ApiKey.OFFSET_FETCH,
                    7,
                    group_id="g",
                    require_stable=require_stable,
                    topics=(mod.OffsetFetchRequestTopic(name="in", partition_indexes=(0,)),),
                ),
            )
            p = r.topics[0].partitions[0]
            return p.committed_offset, p.error_code

        # the group's partition has not joined the transaction: the commit would never be ended
        assert commit_offset(5, add=False) == E.invalid_txn_state
        assert commit_offset(5) == E.none
        assert commit_offset(5, producer_epoch=epoch + 1) == E.invalid_producer_epoch
        assert fetch(False) == (-1, E.none)
        assert fetch(True) == (-1, E.unstable_offset_commit)
        assert end_txn(sock, "tx", pid, epoch, True) == E.none
        assert fetch(True) == (5, E.none)
        assert commit_offset(9) == E.none
        assert end_txn(sock, "tx", pid, epoch, False) == E.none
        assert fetch(True) == (5, E.none)


def test_describe_and_list_transactions(kafkalog_broker):
    with _raw.connect(kafkalog_broker.bootstrap_servers) as sock:
        create_topic(sock, "t")
        a = init_pid(sock, "tx-a")
        init_pid(sock, "tx-b")
        add_partitions(sock, "tx-a", a.producer_id, a.producer_epoch, {"t": [1, 0]})
        # (unknown ids, answered with a start time of -1, are described through kafka-python's admin
        # in test_transactions_clients: kio's reader refuses negative timestamps)
        described = _raw.request(sock, req(ApiKey.DESCRIBE_TRANSACTIONS, 0, transactional_ids=("tx-a",)))
        (one,) = described.transaction_states
        assert (one.error_code, one.transaction_state, one.producer_id) == (E.none, "Ongoing", a.producer_id)
        assert [(t.topic, list(t.partitions)) for t in one.topics] == [("t", [0, 1])]
        assert one.transaction_timeout == MINUTE

        def listed(version: int, **filters: Any) -> list[tuple[str, str]]:
            fields = {
                "state_filters": (),
                "producer_id_filters": (),
                "duration_filter": -1,
                "transactional_id_pattern": None,
            }
            fields.update(filters)
            r = _raw.request(sock, req(ApiKey.LIST_TRANSACTIONS, version, **fields))
            assert r.error_code == E.none
            return [(s.transactional_id, s.transaction_state) for s in r.transaction_states]

        assert listed(0) == [("tx-a", "Ongoing"), ("tx-b", "Empty")]
        assert listed(0, state_filters=("Ongoing",)) == [("tx-a", "Ongoing")]
        assert listed(0, producer_id_filters=(a.producer_id,)) == [("tx-a", "Ongoing")]
        assert listed(1, duration_filter=3_600_000) == [("tx-b", "Empty")]  # an Empty id never started
        assert listed(2, transactional_id_pattern="tx-.") == [("tx-a", "Ongoing"), ("tx-b", "Empty")]
        assert listed(2, transactional_id_pattern="b") == []  # the whole id must match
        r = _raw.request(
            sock, req(ApiKey.LIST_TRANSACTIONS, 0, state_filters=("Bogus", "Ongoing", "Bogus"),
                      producer_id_filters=())
        )
        assert list(r.unknown_state_filters) == ["Bogus"]  # Kafka reads the filters as a set
        states = [(t.transactional_id, t.transaction_state) for t in r.transaction_states]
        assert states == [("tx-a", "Ongoing")]


def test_state_survives_a_restart_and_an_open_transaction_can_be_ended(tmp_path):
    data = tmp_path / "data"
    with Broker(data, configs=CONFIG) as broker, _raw.connect(broker.bootstrap_servers) as sock:
        create_topic(sock, "t")
        ok = init_pid(sock, "tx")
        pid, epoch = ok.producer_id, ok.producer_epoch
        add_partitions(sock, "tx", pid, epoch, {"t": [0]})
        produce(sock, "tx", "t", 0, txn_batch(pid, epoch, 0, [b"across-restart"]))
    with Broker(data, configs=CONFIG) as broker, _raw.connect(broker.bootstrap_servers) as sock:
        log = broker.server.log_manager.get_log("t", 0)
        assert log.last_stable_offset == 0  # still open: the coordinator remembers it
        assert end_txn(sock, "tx", pid, epoch, True) == E.none
        assert values(broker, "t", 0, FetchIsolation.TXN_COMMITTED) == [b"across-restart"]
        again = init_pid(sock, "tx")
        assert (again.producer_id, again.producer_epoch) == (pid, epoch + 1)
        state_log = broker.server.log_manager.get_log("__transaction_state", 0)
        stored = [
            (decode_transaction_log_key(r.key), decode_transaction_log_value(r.value))
            for r in state_log.records(0)
        ]
    assert [(key, value.status, value.producer_epoch) for key, value in stored] == [
        ("tx", 0, 0),
        ("tx", 1, 0),
        ("tx", 2, 0),
        ("tx", 4, 0),
        ("tx", 0, 1),
    ]
    assert stored[1][1].partitions == (("t", 0),)


def test_dump_log_decodes_the_transaction_log_as_kafka_dump_log_does(tmp_path):
    data = tmp_path / "data"
    with Broker(data, configs=CONFIG) as broker, _raw.connect(broker.bootstrap_servers) as sock:
        create_topic(sock, "t")
        ok = init_pid(sock, "tx")
        add_partitions(sock, "tx", ok.producer_id, ok.producer_epoch, {"t": [1, 0]})
        assert end_txn(sock, "tx", ok.producer_id, ok.producer_epoch, False) == E.none
    segment = data / "__transaction_state-0" / "00000000000000000000.log"

    def dump_log(*options: str) -> str:
        command = [sys.executable, "-m", "kafkalog.cli", "dump-log", "--transaction-log-decoder", *options]
        return subprocess.run(
            [*command, str(segment)], capture_output=True, text=True, timeout=60, check=True
        ).stdout

    out = dump_log("--json")
    records = [r for batch in json.loads(out)["batches"] for r in batch["records"]]
    assert {json.dumps(r["key"], sort_keys=True) for r in records} == {
        json.dumps({"type": "0", "data": {"transactionalId": "tx"}}, sort_keys=True)
    }
    payloads = [r["payload"]["data"] for r in records]
    assert [(p["transactionStatus"], p["transactionPartitions"]) for p in payloads] == [
        (0, None),
        (1, [{"topic": "t", "partitionIds": [0, 1]}]),
        (3, [{"topic": "t", "partitionIds": [0, 1]}]),
        (5, []),
    ]
    assert {r["payload"]["version"] for r in records} == {"0"}
    assert all(p["producerId"] == ok.producer_id and p["transactionTimeoutMs"] == 60_000 for p in payloads)
    text = dump_log()
    assert 'key: {"type":"0","data":{"transactionalId":"tx"}} payload: {"version":"0"' in text


def test_transaction_log_decoder_shows_v1_tagged_fields_as_kafkas_json_writer_does():
    """TransactionLogValue v1 (flexible, Kafka 4's transactions v2) keeps previousProducerId,
    nextProducerId and clientTransactionVersion as tagged fields; Kafka's generated JSON writer
    prints each where it differs from its default, in the schema's field order."""
    import struct

    from kafkalog.protocol.transaction_log_records import encode_transaction_log_key
    from kafkalog.tools.transaction_log_decoder import decode_transaction_log_record

    def value(tags: bytes, count: int) -> bytes:
        return (struct.pack(">hqhib", 1, 1001, 5, 60_000, 4) + bytes([2]) + bytes([2]) + b"t"
                + bytes([2]) + struct.pack(">i", 0) + bytes([0]) + struct.pack(">qq", 1_700_000_000_002,
                                                                               1_700_000_000_001)
                + bytes([count]) + tags)

    tagged = bytes([0, 8]) + struct.pack(">q", 999) + bytes([2, 2]) + struct.pack(">h", 2)
    payload = decode_transaction_log_record(encode_transaction_log_key("tx2"), value(tagged, 2))["payload"]
    assert payload["version"] == "1"
    assert list(payload["data"].items()) == [
        ("producerId", 1001), ("previousProducerId", 999), ("producerEpoch", 5),
        ("transactionTimeoutMs", 60_000), ("transactionStatus", 4),
        ("transactionPartitions", [{"topic": "t", "partitionIds": [0]}]),
        ("transactionLastUpdateTimestampMs", 1_700_000_000_002),
        ("transactionStartTimestampMs", 1_700_000_000_001), ("clientTransactionVersion", 2)]
    # At their defaults (no tagged fields at all) they are left out.
    plain = decode_transaction_log_record(encode_transaction_log_key("tx2"), value(b"", 0))["payload"]["data"]
    assert "previousProducerId" not in plain and "clientTransactionVersion" not in plain


@pytest.mark.kafkalog_broker_config({"offsets.retention.check.interval.ms": 50})
def test_a_group_with_offsets_in_an_open_transaction_is_not_cleaned_up(kafkalog_broker):
    """Kafka's cleanup turns an Empty group without offsets Dead; offsets an open transaction
    committed count (``GroupMetadata.hasOffsets``), so the group stays until the transaction ends."""
    with _raw.connect(kafkalog_broker.bootstrap_servers) as sock:
        create_topic(sock, "in")
        ok = init_pid(sock, "tx")
        pid, epoch = ok.producer_id, ok.producer_epoch
        assert add_offsets(sock, "tx", "pending", pid, epoch) == E.none
        assert txn_offset_commit(sock, "tx", "pending", pid, epoch, 3) == E.none

        def groups() -> list[str]:
            listed = _raw.request(sock, req(ApiKey.LIST_GROUPS, 4, states_filter=()))
            return [g.group_id for g in listed.groups]

        time.sleep(0.5)  # ten cleanup rounds
        assert groups() == ["pending"]
        assert end_txn(sock, "tx", pid, epoch, False) == E.none
        deadline = time.monotonic() + 10
        while groups():
            assert time.monotonic() < deadline, "the group without offsets was not cleaned up"
            time.sleep(0.05)


def test_init_producer_id_refuses_half_a_producer_identity(kafkalog_broker):
    """Kafka's handleInitProducerIdRequest: a producer id without its epoch (or the reverse) is
    INVALID_REQUEST, for an idempotent producer as for a transactional one."""
    with _raw.connect(kafkalog_broker.bootstrap_servers) as sock:
        for txn_id in (None, "half"):
            for pid, epoch in ((5, -1), (-1, 3)):
                answer = init_pid(sock, txn_id, pid=pid, epoch=epoch)
                refused = (answer.error_code, answer.producer_id, answer.producer_epoch)
                assert refused == (E.invalid_request, -1, -1)
        assert init_pid(sock, None).error_code == E.none
