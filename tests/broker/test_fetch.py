"""Fetch: long-poll woken by appends, bounded by max_wait_ms; limits; errors; topic ids (v13+);
read_committed with aborted transactions from the .txnindex."""

from __future__ import annotations

import threading
import time
import uuid
from datetime import timedelta

import pytest
from kio.schema.errors import ErrorCode

from kafkalog.broker import Broker
from kafkalog.records.memory import MemoryRecords, MemoryRecordsBuilder
from kafkalog.records.types import CompressionType, TimestampType
from kafkalog.storage.log import FetchIsolation
from tests.broker import _raw
from tests.broker.test_produce_errors import _batch, _create, _produce


def _fetch(
    sock,
    topic,
    offset,
    *,
    version=12,
    max_wait_ms=0,
    min_bytes=1,
    max_bytes=2**31 - 1,
    partition_max_bytes=1 << 20,
    isolation_level=0,
    topic_id=None,
    correlation_id=1,
    current_leader_epoch=-1,
):
    cls, mod = _raw.request_class(1, version)
    optional = {"current_leader_epoch": current_leader_epoch, "log_start_offset": -1,
                "last_fetched_epoch": -1}
    partition = mod.FetchPartition(
        partition=0,
        fetch_offset=offset,
        partition_max_bytes=partition_max_bytes,
        **{k: v for k, v in optional.items() if k in mod.FetchPartition.__dataclass_fields__},
    )
    fetch_topic = (
        mod.FetchTopic(topic_id=topic_id, partitions=(partition,))
        if version >= 13
        else mod.FetchTopic(topic=topic, partitions=(partition,))
    )
    values = dict(
        max_wait=timedelta(milliseconds=max_wait_ms),
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=isolation_level,
        session_id=0,
        session_epoch=-1,
        topics=(fetch_topic,),
        forgotten_topics_data=(),
        rack_id="",
    )
    if version < 15:
        values["replica_id"] = -1
    fields = {f for f in cls.__dataclass_fields__}
    request = cls(**{k: v for k, v in values.items() if k in fields})
    response = _raw.request(sock, request, correlation_id)
    return response, response.responses[0].partitions[0]


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with Broker(tmp_path_factory.mktemp("fetch")) as b:
        yield b


def test_long_poll_woken_by_append(broker):
    with _raw.connect(broker.bootstrap_servers) as sock, _raw.connect(broker.bootstrap_servers) as producer:
        _create(sock, "lp")
        result = {}

        def fetch():
            result["response"] = _fetch(sock, "lp", 0, max_wait_ms=5000)
            result["at"] = time.monotonic()

        thread = threading.Thread(target=fetch)
        thread.start()
        time.sleep(0.2)
        produced_at = time.monotonic()
        assert _produce(producer, "lp", _batch(2)).error_code == ErrorCode.none
        thread.join(10)
        assert not thread.is_alive()
        latency = result["at"] - produced_at
        assert latency < 0.1, latency
        _, partition = result["response"]
        assert partition.high_watermark == 2
        assert len(list(MemoryRecords(partition.records).records())) == 2


@pytest.mark.parametrize("max_wait_ms", [0, 300, 700])
def test_empty_fetch_returns_after_max_wait(broker, max_wait_ms):
    with _raw.connect(broker.bootstrap_servers) as sock:
        _create(sock, "idle")
        start = time.monotonic()
        _, partition = _fetch(sock, "idle", 0, max_wait_ms=max_wait_ms)
        elapsed = time.monotonic() - start
        assert partition.error_code == ErrorCode.none and partition.records in (b"", None)
        assert max_wait_ms / 1000 <= elapsed + 0.005  # never earlier
        assert elapsed < max_wait_ms / 1000 + 0.15  # and not much later


def test_min_bytes_waits_until_enough(broker):
    with _raw.connect(broker.bootstrap_servers) as sock, _raw.connect(broker.bootstrap_servers) as producer:
        _create(sock, "minb")
        one = _batch(1)
        result = {}
        thread = threading.Thread(
            target=lambda: result.update(
                r=_fetch(sock, "minb", 0, max_wait_ms=3000, min_bytes=len(one) * 2 + 1)
            )
        )
        thread.start()
        time.sleep(0.1)
        _produce(producer, "minb", one)
        time.sleep(0.2)
        assert thread.is_alive()  # one batch is not enough
        _produce(producer, "minb", _batch(2))
        thread.join(5)
        assert not thread.is_alive()
        assert len(list(MemoryRecords(result["r"][1].records).batches())) == 2


def test_first_batch_returned_even_if_larger_than_limits_and_byte_limits(broker):
    with _raw.connect(broker.bootstrap_servers) as sock:
        _create(sock, "big")
        for _ in range(3):
            _produce(sock, "big", _batch(5, size=400))
        _, p = _fetch(sock, "big", 0, partition_max_bytes=10)
        assert [b.base_offset for b in MemoryRecords(p.records).batches()] == [0]
        _, p = _fetch(sock, "big", 0, max_bytes=10)
        assert [b.base_offset for b in MemoryRecords(p.records).batches()] == [0]
        _, p = _fetch(sock, "big", 5)  # from the middle: whole batches from the one holding the offset
        assert [b.base_offset for b in MemoryRecords(p.records).batches()] == [5, 10]
        _, p = _fetch(sock, "big", 7)
        assert [b.base_offset for b in MemoryRecords(p.records).batches()] == [5, 10]
        assert (p.high_watermark, p.last_stable_offset, p.log_start_offset) == (15, 15, 0)


def test_large_fetch_goes_through_sendfile(broker):
    from kafkalog.broker import replica_manager
    from kafkalog.broker.file_region import FileRegion

    with _raw.connect(broker.bootstrap_servers) as sock:
        _create(sock, "large")
        for _ in range(8):
            _produce(sock, "large", _batch(100, size=1000))
        log = broker.server.log_manager.get_log("large", 0)
        stored = log.read(0, 1 << 30).records.read_bytes()
        assert len(stored) > replica_manager.SENDFILE_MIN_BYTES
        # the read result is a file region (sent with sendfile), not bytes
        rm = broker.server.apis.replica_manager
        infos = [(replica_manager.TopicPartition("large", 0), replica_manager.FetchPartitionInfo(0, 1 << 30))]
        params = replica_manager.FetchParams(0, 1, 1 << 30, FetchIsolation.HIGH_WATERMARK)
        ((_, data),) = rm.read_from_local_log(params, infos)[0]
        assert isinstance(data.records, FileRegion) and data.records.size == len(stored)
        assert data.records.read_all() == stored
        data.release()
        for version in (11, 12):
            _, p = _fetch(sock, "large", 0, version=version, partition_max_bytes=1 << 30)
            assert bytes(p.records) == stored
            assert len(list(MemoryRecords(p.records).batches())) == 8


def test_offset_out_of_range_and_unknown_topic(broker):
    with _raw.connect(broker.bootstrap_servers) as sock:
        _create(sock, "oor")
        _produce(sock, "oor", _batch(1))
        _, p = _fetch(sock, "oor", 5, max_wait_ms=2000)
        assert p.error_code == ErrorCode.offset_out_of_range
        _, p = _fetch(sock, "nope", 0, max_wait_ms=2000)
        assert p.error_code == ErrorCode.unknown_topic_or_partition


def test_every_version_by_name_answers_the_records(broker):
    """v4-v6 have no session fields (KIP-227 came in v7), v7-v12 do: all served the same."""
    with _raw.connect(broker.bootstrap_servers) as sock:
        _create(sock, "versions")
        _produce(sock, "versions", _batch(3))
        for version in range(4, 13):
            _, p = _fetch(sock, "versions", 1, version=version)
            assert p.error_code == ErrorCode.none and p.high_watermark == 3, version
            assert [r.offset for r in MemoryRecords(p.records).records()] == [0, 1, 2], version


def test_fetch_by_topic_id_and_unknown_topic_id(broker):
    with _raw.connect(broker.bootstrap_servers) as sock:
        _create(sock, "byid")
        _produce(sock, "byid", _batch(3))
        topic_id = broker.server.apis.metadata_cache.topic_id("byid")
        for version in (13, 16, 18):
            response, p = _fetch(sock, None, 0, version=version, topic_id=topic_id)
            assert response.responses[0].topic_id == topic_id
            assert p.error_code == ErrorCode.none and p.high_watermark == 3
        _, p = _fetch(sock, None, 0, version=13, topic_id=uuid.uuid4(), max_wait_ms=2000)
        assert p.error_code == ErrorCode.unknown_topic_id


def test_read_committed_lists_aborted_transactions(broker):
    with _raw.connect(broker.bootstrap_servers) as sock:
        _create(sock, "txn")
    log = broker.server.log_manager.get_log("txn", 0)

    def txn_batch(pid, seq, n):
        b = MemoryRecordsBuilder(
            2,
            CompressionType.NONE,
            TimestampType.CREATE_TIME,
            0,
            producer_id=pid,
            producer_epoch=0,
            base_sequence=seq,
            is_transactional=True,
        )
        for i in range(n):
            b.append(1000 + i, None, b"t%d" % i)
        return b.build()

    async def write():  # on the broker's loop, which owns appends
        from kafkalog.records.control import ControlRecordType, EndTransactionMarker
        from kafkalog.records.validator import AppendOrigin

        log.append_as_leader(txn_batch(77, 0, 2))
        log.append_as_leader(txn_batch(88, 0, 1))
        log.append_as_leader(
            MemoryRecords.with_end_transaction_marker(
                0, 1000, 0, 77, 0, EndTransactionMarker(ControlRecordType.ABORT, 0)
            ),
            origin=AppendOrigin.COORDINATOR,
        )
        log.append_as_leader(
            MemoryRecords.with_end_transaction_marker(
                0, 1000, 0, 88, 0, EndTransactionMarker(ControlRecordType.COMMIT, 0)
            ),
            origin=AppendOrigin.COORDINATOR,
        )

    broker.run_coroutine(write())
    with _raw.connect(broker.bootstrap_servers) as sock:
        _, committed = _fetch(sock, "txn", 0, isolation_level=1)
        assert [(a.producer_id, a.first_offset) for a in committed.aborted_transactions] == [(77, 0)]
        assert committed.last_stable_offset == 5
        _, uncommitted = _fetch(sock, "txn", 0, isolation_level=0)
        assert uncommitted.aborted_transactions is None


def test_many_partitions_stay_within_the_region_limit(tmp_path, monkeypatch):
    from kafkalog.broker import replica_manager

    monkeypatch.setattr(replica_manager, "SENDFILE_MIN_BYTES", 16 * 1024)

    with Broker(tmp_path, configs={"num.partitions": replica_manager.MAX_REGIONS_PER_FETCH + 6}) as b:
        count = replica_manager.MAX_REGIONS_PER_FETCH + 6
        with _raw.connect(b.bootstrap_servers) as sock:
            _create(sock, "wide")
        big = _batch(20, size=2000)  # > SENDFILE_MIN_BYTES: a region each, up to the limit

        async def fill():
            for p in range(count):
                b.server.log_manager.get_log("wide", p).append_as_leader(MemoryRecords(big))

        b.run_coroutine(fill())
        rm = b.server.apis.replica_manager
        from kafkalog.broker.file_region import FileRegion
        from kafkalog.broker.replica_manager import FetchParams, FetchPartitionInfo, TopicPartition

        infos = [(TopicPartition("wide", p), FetchPartitionInfo(0, 1 << 20)) for p in range(count)]
        results, total, errors = rm.read_from_local_log(
            FetchParams(0, 1, 1 << 30, FetchIsolation.HIGH_WATERMARK), infos
        )
        kinds = [isinstance(d.records, FileRegion) for _, d in results]
        assert not errors and total == count * len(big)
        assert kinds.count(True) == replica_manager.MAX_REGIONS_PER_FETCH
        stored = b.server.log_manager.get_log("wide", 0).read(0, 1 << 20).records.read_bytes()
        assert all(d.records == stored for _, d in results if not isinstance(d.records, FileRegion))
        for _, d in results:
            d.release()


def test_a_partition_named_twice_is_fetched_once_from_its_last_offset(broker):
    """Kafka's fetch data is a map by partition: one entry where the partition was first named, with
    the offset named for it last; consecutive partitions of a topic share one topic entry."""
    with _raw.connect(broker.bootstrap_servers) as sock:
        _create(sock, "dup")
        for n in (2, 3):
            _produce(sock, "dup", _batch(n))
        cls, mod = _raw.request_class(1, 12)

        def part(offset):
            return mod.FetchPartition(partition=0, current_leader_epoch=-1, fetch_offset=offset,
                                      log_start_offset=-1, last_fetched_epoch=-1, partition_max_bytes=1 << 20)

        request = cls(replica_id=-1, max_wait=timedelta(0), min_bytes=1, max_bytes=2**31 - 1,
                      isolation_level=0, session_id=0, session_epoch=-1,
                      topics=(mod.FetchTopic(topic="dup", partitions=(part(0),)),
                              mod.FetchTopic(topic="dup", partitions=(part(2),))),
                      forgotten_topics_data=(), rack_id="")
        response = _raw.request(sock, request)
        (topic,) = response.responses
        (partition,) = topic.partitions
        batches = list(MemoryRecords(partition.records).batches())
        assert (topic.topic, partition.error_code) == ("dup", ErrorCode.none)
        assert [b.base_offset for b in batches] == [2]  # from offset 2, the last one named


def _fetch_many(sock, parts, *, version=12, max_wait_ms=0, min_bytes=1, max_bytes=2**31 - 1,
                session_id=0, session_epoch=-1, replica_id=-1):
    """One Fetch of several (topic, offset, partition_max_bytes[, partition, current_leader_epoch])."""
    cls, mod = _raw.request_class(1, version)
    topics = []
    for topic, offset, pmb, *rest in parts:
        partition = rest[0] if rest else 0
        epoch = rest[1] if len(rest) > 1 else -1
        topics.append(mod.FetchTopic(topic=topic, partitions=(mod.FetchPartition(
            partition=partition, current_leader_epoch=epoch, fetch_offset=offset, log_start_offset=-1,
            last_fetched_epoch=-1, partition_max_bytes=pmb),)))
    request = cls(replica_id=replica_id, max_wait=timedelta(milliseconds=max_wait_ms), min_bytes=min_bytes,
                  max_bytes=max_bytes, isolation_level=0, session_id=session_id, session_epoch=session_epoch,
                  topics=tuple(topics), forgotten_topics_data=(), rack_id="")
    return _raw.request(sock, request)


def test_a_first_batch_cut_short_is_not_returned(broker):
    """Only the first partition with data gets a batch larger than the limits; a later partition
    whose first batch does not fit in what is left gets nothing, not a fragment (Kafka's
    checkFetchDataInfo), and the fragment does not count towards min_bytes."""
    with _raw.connect(broker.bootstrap_servers) as sock:
        for topic in ("cut1", "cut2"):
            _create(sock, topic)
            _produce(sock, topic, _batch(5, size=400))
        size = len(bytes(_fetch(sock, "cut1", 0)[1].records))
        for parts, max_bytes in ((["cut1", 0, 100], ["cut2", 0, 100]), size + 10), \
                                ((["cut1", 0, 1 << 20], ["cut2", 0, 1 << 20]), size + 10):
            response = _fetch_many(sock, parts, max_bytes=max_bytes)
            first, second = (t.partitions[0] for t in response.responses)
            assert len(bytes(first.records)) == size
            assert bytes(second.records or b"") == b"" and second.error_code == ErrorCode.none


def test_session_epochs_as_kafkas_fetch_manager_reads_them(broker):
    """A full fetch (epoch 0 or -1) is answered whatever session id it names (Kafka closes that
    session); an incremental one (epoch > 0) names a session this broker does not keep."""
    with _raw.connect(broker.bootstrap_servers) as sock:
        _create(sock, "sess")
        _produce(sock, "sess", _batch(2))
        for session_id, epoch in ((123, -1), (123, 0), (0, 0)):
            response = _fetch_many(sock, [("sess", 0, 1 << 20)], session_id=session_id, session_epoch=epoch)
            assert (response.error_code, response.session_id) == (ErrorCode.none, 0)
            assert len(list(MemoryRecords(response.responses[0].partitions[0].records).records())) == 2
        for session_id in (123, 0):
            response = _fetch_many(sock, [("sess", 0, 1 << 20)], session_id=session_id, session_epoch=1)
            assert response.error_code == ErrorCode.fetch_session_id_not_found and response.responses == ()


def test_unknown_partitions_come_last_and_do_not_end_a_long_poll(broker):
    with _raw.connect(broker.bootstrap_servers) as sock:
        _create(sock, "waits")
        for unknown in (("no-such", 0, 1 << 20), ("waits", 0, 1 << 20, 7)):
            started = time.monotonic()
            response = _fetch_many(sock, [unknown, ("waits", 0, 1 << 20)], max_wait_ms=600)
            elapsed = time.monotonic() - started
            assert elapsed >= 0.5, elapsed  # the known, empty partition long-polls all the same
            answered = [(t.topic, q.partition_index, q.error_code) for t in response.responses
                        for q in t.partitions]
            assert answered == [("waits", 0, ErrorCode.none),
                                (unknown[0], unknown[3] if len(unknown) > 3 else 0,
                                 ErrorCode.unknown_topic_or_partition)]


def test_a_replicas_fetch_fails_per_partition(broker):
    """This node has no followers: Kafka's Partition.fetchRecords refuses a replica it does not
    know, after the leader epoch check."""
    with _raw.connect(broker.bootstrap_servers) as sock:
        _create(sock, "replica")
        _produce(sock, "replica", _batch(1))
        epoch = broker.server.apis.replica_manager.leader_epoch(_tp("replica"))
        for version, current_epoch, expected in ((12, -1, ErrorCode.not_leader_or_follower),
                                                 (12, epoch, ErrorCode.unknown_leader_epoch),
                                                 (12, epoch + 5, ErrorCode.unknown_leader_epoch)):
            response = _fetch_many(sock, [("replica", 0, 1 << 20, 0, current_epoch)], version=version,
                                   replica_id=3)
            assert response.error_code == ErrorCode.none
            assert response.responses[0].partitions[0].error_code == expected


def _tp(topic):
    from kafkalog.broker.replica_manager import TopicPartition

    return TopicPartition(topic, 0)


def test_a_parked_fetch_counts_at_most_each_partitions_max_bytes(broker):
    """Kafka's DelayedFetch counts min(bytes available, partition_max_bytes) towards min_bytes: a
    2 KB batch arriving for a partition capped at 100 bytes does not complete a fetch that wants
    200 bytes; max_wait does (the first read counts what it returns, as Kafka's does)."""
    with _raw.connect(broker.bootstrap_servers) as sock, \
            _raw.connect(broker.bootstrap_servers) as producer:
        _create(sock, "parked")
        timer = threading.Timer(0.3, lambda: _produce(producer, "parked", _batch(5, size=400)))
        started = time.monotonic()
        timer.start()
        try:
            response = _fetch_many(sock, [("parked", 0, 100)], max_wait_ms=1500, min_bytes=200)
        finally:
            timer.join()
        elapsed = time.monotonic() - started
        assert elapsed >= 1.2, elapsed
        assert len(list(MemoryRecords(response.responses[0].partitions[0].records).batches())) == 1


def test_fetch_max_bytes_caps_what_a_request_asks_for(tmp_path):
    with Broker(tmp_path, configs={"fetch.max.bytes": 3000}) as b, _raw.connect(b.bootstrap_servers) as sock:
        for topic in ("cap1", "cap2"):
            _create(sock, topic)
            for _ in range(3):
                _produce(sock, topic, _batch(2, size=800))  # ~1.7 KB a batch
        response = _fetch_many(sock, [("cap1", 0, 1 << 20), ("cap2", 0, 1 << 20)])
        sizes = [len(bytes(t.partitions[0].records or b"")) for t in response.responses]
        assert 0 < sizes[0] <= 3000 and sizes[1] == 0  # cap2's first batch no longer fits
        whole = _fetch_many(sock, [("cap1", 0, 1 << 20)])
        assert len(list(MemoryRecords(whole.responses[0].partitions[0].records).batches())) == 1


def test_a_fetcher_whose_log_diverged_is_told_where_to_truncate(tmp_path):
    """Fetch v12+'s last_fetched_epoch, as Kafka's Partition.readRecords checks it: if this log's
    end for that epoch is before the fetch offset (or the epoch is older here), no records but the
    diverging (epoch, end offset); an epoch this log cannot place is OFFSET_OUT_OF_RANGE."""
    from kafkalog.storage.log_manager import LogManager

    with LogManager(tmp_path) as manager:
        log = manager.create_topic("ep", 1)[0]
        for epoch, n in ((0, 3), (2, 2)):  # epoch 0 holds offsets 0-2, epoch 2 offsets 3-4
            log.append_as_leader(MemoryRecords(_batch(n)), leader_epoch=epoch)
    with Broker(tmp_path) as b, _raw.connect(b.bootstrap_servers) as sock:
        cls, mod = _raw.request_class(1, 12)

        def fetch(offset, last_fetched_epoch):
            partition = mod.FetchPartition(partition=0, current_leader_epoch=-1, fetch_offset=offset,
                                           last_fetched_epoch=last_fetched_epoch, log_start_offset=-1,
                                           partition_max_bytes=1 << 20)
            response = _raw.request(sock, cls(
                replica_id=-1, max_wait=timedelta(milliseconds=500), min_bytes=1 << 20, max_bytes=1 << 20,
                isolation_level=0, session_id=0, session_epoch=-1,
                topics=(mod.FetchTopic(topic="ep", partitions=(partition,)),), forgotten_topics_data=(),
                rack_id=""))
            return response.responses[0].partitions[0]

        for offset, epoch in ((4, 1), (4, 0)):
            started = time.monotonic()
            p = fetch(offset, epoch)
            assert time.monotonic() - started < 0.4  # answered at once, not after max_wait
            assert (p.error_code, bytes(p.records or b"")) == (ErrorCode.none, b"")
            assert (p.diverging_epoch.epoch, p.diverging_epoch.end_offset) == (0, 3), (offset, epoch)
        p = fetch(2, 0)  # consistent: records, no divergence
        assert p.diverging_epoch.epoch == -1
        assert next(iter(MemoryRecords(p.records).records())).offset == 0
        assert fetch(9, 7).error_code == ErrorCode.offset_out_of_range
