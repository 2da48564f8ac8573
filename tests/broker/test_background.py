"""Retention runs in the background every log.retention.check.interval.ms; consumers see the new
log start offset (ListOffsets earliest, OFFSET_OUT_OF_RANGE below it, log_start_offset in Fetch)."""

from __future__ import annotations

import time

from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient
from kio.schema.errors import ErrorCode

from kafkalog.broker import Broker
from tests.broker import _raw
from tests.broker.test_fetch import _fetch
from tests.broker.test_list_offsets_and_metadata import _list_offsets
from tests.broker.test_produce_errors import _batch, _create, _produce


def test_background_retention(tmp_path):
    configs = {
        "log.retention.check.interval.ms": 100,
        "log.retention.ms": 60_000,
        "log.segment.bytes": 300,
        "log.segment.delete.delay.ms": 0,
    }
    with Broker(tmp_path, configs=configs) as broker, _raw.connect(broker.bootstrap_servers) as sock:
        _create(sock, "old")
        for _ in range(4):  # timestamps from 2023: beyond a minute of retention; one segment each
            assert _produce(sock, "old", _batch(2, size=100, timestamp=1_700_000_000_000)).error_code == 0
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            (earliest,) = _list_offsets(sock, "old", [-2])
            if earliest.offset == 8:
                break
            time.sleep(0.05)
        # every segment is past retention: Kafka rolls the active one and deletes them all
        assert earliest.offset == 8
        _, p = _fetch(sock, "old", 0)
        assert p.error_code == ErrorCode.offset_out_of_range
        _, p = _fetch(sock, "old", 8)
        assert (p.error_code, p.log_start_offset, p.high_watermark) == (ErrorCode.none, 8, 8)


def test_deleted_files_go_after_the_file_delete_delay_not_at_the_next_check(tmp_path):
    # Kafka schedules a one-shot delete-file task file.delete.delay.ms after the rename; the next
    # retention check (2 s later here) must not be what removes the files.
    configs = {
        "log.retention.check.interval.ms": 2000,
        "log.retention.ms": 60_000,
        "log.segment.bytes": 300,
        "log.segment.delete.delay.ms": 300,
    }
    with Broker(tmp_path, configs=configs) as broker, _raw.connect(broker.bootstrap_servers) as sock:
        _create(sock, "old")
        for _ in range(4):
            assert _produce(sock, "old", _batch(2, size=100, timestamp=1_700_000_000_000)).error_code == 0
        partition_dir = tmp_path / "old-0"
        renamed = gone = None
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            deleted = list(partition_dir.glob("*.deleted"))
            now = time.monotonic()
            if deleted and renamed is None:
                renamed = now
            if renamed is not None and not deleted:
                gone = now
                break
            time.sleep(0.02)
        assert renamed is not None and gone is not None
        assert 0.15 <= gone - renamed < 1.2
        assert sorted(p.name for p in partition_dir.glob("*.log")) == ["00000000000000000008.log"]


def _wait_for_file(path, expected, timeout_s=10.0):
    deadline = time.monotonic() + timeout_s
    text = None
    while time.monotonic() < deadline:
        text = path.read_text() if path.exists() else None
        if text == expected:
            break
        time.sleep(0.05)
    return text


def test_checkpoint_files_and_their_own_intervals(tmp_path):
    # Kafka creates the checkpoint files empty when LogManager, the cleaner and ReplicaManager start;
    # high watermarks go to replication-offset-checkpoint every
    # replica.high.watermark.checkpoint.interval.ms and at shutdown; log start offsets have their own
    # task (log.flush.start.offset.checkpoint.interval.ms), apart from the recovery points'.
    configs = {
        "replica.high.watermark.checkpoint.interval.ms": 200,
        "log.flush.start.offset.checkpoint.interval.ms": 200,
        "log.flush.offset.checkpoint.interval.ms": 3_600_000,
        "num.partitions": 2,
    }
    hw_file = tmp_path / "replication-offset-checkpoint"
    start_file = tmp_path / "log-start-offset-checkpoint"
    recovery_file = tmp_path / "recovery-point-offset-checkpoint"
    with Broker(tmp_path, configs=configs) as broker, _raw.connect(broker.bootstrap_servers) as sock:
        for name in ("cleaner-offset-checkpoint", hw_file.name, start_file.name, recovery_file.name):
            assert (tmp_path / name).read_bytes() == b"", name
        _create(sock, "hw")
        assert _produce(sock, "hw", _batch(3)).error_code == 0
        assert _wait_for_file(hw_file, "0\n2\nhw 0 3\nhw 1 0\n") == "0\n2\nhw 0 3\nhw 1 0\n"
        assert _produce(sock, "hw", _batch(2)).error_code == 0
        assert _wait_for_file(hw_file, "0\n2\nhw 0 5\nhw 1 0\n") == "0\n2\nhw 0 5\nhw 1 0\n"
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        (deleted,) = admin.delete_records([TopicPartition("hw", 0, 4)], request_timeout=10).values()
        assert deleted.result(10).low_watermark == 4
        assert _wait_for_file(start_file, "0\n1\nhw 0 4\n") == "0\n1\nhw 0 4\n"
        assert recovery_file.read_bytes() == b""  # its hourly task has not run
        assert _produce(sock, "hw", _batch(1)).error_code == 0
    # the last high watermarks are written at shutdown, whatever the interval
    assert hw_file.read_text() == "0\n2\nhw 0 6\nhw 1 0\n"
    assert (tmp_path / "cleaner-offset-checkpoint").read_bytes() == b""
    assert recovery_file.read_text() == "0\n2\nhw 0 6\nhw 1 0\n"
