"""``kafkalog serve``: configs from a server.properties file and --config, SIGTERM answers the
request in flight, closes the logs and writes Kafka's clean-shutdown marker; bad configs are one
line on stderr."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import kafka
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource
from kio.schema.errors import ErrorCode

from tests.broker import _raw
from tests.broker.test_fetch import _fetch

CLI = [sys.executable, "-m", "kafkalog.cli"]


def _start(args, timeout=60):
    proc = subprocess.Popen([*CLI, "serve", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + timeout
    line = ""
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if "serving" in line or proc.poll() is not None:
            break
    assert "serving" in line, (line, proc.poll())
    return proc, line.rsplit(" on ", 1)[1].strip()


def _stop(proc, sig=signal.SIGTERM, timeout=30):
    proc.send_signal(sig)
    try:
        return proc.wait(timeout)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)


def test_serve_sigterm_clean_shutdown(tmp_path):
    data_dir = tmp_path / "data"
    props = tmp_path / "server.properties"
    props.write_text(
        "# a Kafka server.properties\nnode.id=3\nnum.partitions=3\nlog.retention.hours=1\n"
        "listeners=PLAINTEXT://127.0.0.1:9092\n"
    )
    proc, bootstrap = _start(
        [
            "--data-dir",
            str(data_dir),
            "--port",
            "0",
            "--config-file",
            str(props),
            "--config",
            "num.partitions=2",
        ]
    )
    try:
        producer = kafka.KafkaProducer(bootstrap_servers=bootstrap)
        producer.send("served", b"hello").get(10)
        producer.close()
        assert sorted(p.name for p in data_dir.iterdir() if p.name.startswith("served-")) == [
            "served-0",
            "served-1",
        ]
        # a long-poll fetch in flight when SIGTERM arrives is answered, not dropped
        with _raw.connect(bootstrap) as sock:
            result = {}
            offset_1 = _fetch(sock, "served", 0)[1]  # partition 0 may or may not hold the record
            assert offset_1.error_code == ErrorCode.none
            thread = threading.Thread(
                target=lambda: result.update(
                    r=_fetch(sock, "served", offset_1.high_watermark, max_wait_ms=20000)
                )
            )
            thread.start()
            time.sleep(0.3)
            start = time.monotonic()
            assert _stop(proc) == 0
            thread.join(10)
            assert time.monotonic() - start < 10
            assert result["r"][1].error_code == ErrorCode.none
    finally:
        if proc.poll() is None:
            _stop(proc, signal.SIGKILL)
    assert (data_dir / ".kafka_cleanshutdown").exists()
    assert "node.id=3" in (data_dir / "meta.properties").read_text()
    assert "stopped cleanly" in proc.stderr.read()


def test_serve_sigint_and_bad_config(tmp_path):
    bad = subprocess.run(
        [*CLI, "serve", "--data-dir", str(tmp_path / "d"), "--config", "num.partitions=zero"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 1
    assert bad.stderr.count("\n") == 1 and "num.partitions" in bad.stderr
    proc, _ = _start(["--data-dir", str(tmp_path / "d"), "--port", "0"])
    assert _stop(proc, signal.SIGINT) == 0
    assert (tmp_path / "d" / ".kafka_cleanshutdown").exists()


def test_the_data_directory_comes_from_log_dirs_without_data_dir(tmp_path):
    """As a Kafka broker reads it: log.dirs (else log.dir) of server.properties or --config names the
    data directory; --data-dir wins over both. One directory only, and one must be named."""
    props = tmp_path / "server.properties"
    props.write_text(f"log.dirs={tmp_path / 'from-file'}\nlog.dir={tmp_path / 'ignored'}\n")
    proc, bootstrap = _start(["--config-file", str(props), "--port", "0"])
    try:
        producer = kafka.KafkaProducer(bootstrap_servers=bootstrap)
        producer.send("t", b"v").get(10)
        producer.close()
    finally:
        assert _stop(proc) == 0
    assert (tmp_path / "from-file" / "t-0").is_dir() and not (tmp_path / "ignored").exists()
    proc, _ = _start(["--config", f"log.dir={tmp_path / 'from-dir'}", "--port", "0"])
    assert _stop(proc) == 0 and (tmp_path / "from-dir" / ".kafka_cleanshutdown").exists()
    given = ["--config-file", str(props), "--data-dir", str(tmp_path / "given"), "--port", "0"]
    proc, bootstrap = _start(given)
    try:  # the broker's log.dirs, as DescribeConfigs reports it, is the directory served
        admin = AdminClient({"bootstrap.servers": bootstrap})
        (future,) = admin.describe_configs([ConfigResource("BROKER", "1")]).values()
        entry = future.result(15)["log.dirs"]
        assert entry.value == str((tmp_path / "given").resolve())
        assert entry.source == ConfigSource.STATIC_BROKER_CONFIG.value
    finally:
        assert _stop(proc) == 0 and (tmp_path / "given" / ".kafka_cleanshutdown").exists()
    for args, why in [
        ([], "No data directory: give --data-dir, or log.dirs in --config-file or --config"),
        (["--config", f"log.dirs={tmp_path / 'a'},{tmp_path / 'b'}"], "log.dirs lists 2 directories"),
    ]:
        refused = subprocess.run([*CLI, "serve", "--port", "0", *args], capture_output=True, text=True,
                                 timeout=60)
        assert refused.returncode == 1 and refused.stderr.count("\n") == 1 and why in refused.stderr, refused


def test_serve_reports_what_crash_recovery_cuts_on_stderr(tmp_path):
    """As every writing command does: the cut a crashed directory's torn last batch costs is one
    line on stderr, without -v, once (when the data directory is opened), and the data is cut."""
    from kafkalog.records import CompressionType, MemoryRecords, SimpleRecord
    from kafkalog.storage.log_manager import LogManager

    data_dir = tmp_path / "data"
    with LogManager(data_dir) as manager:
        manager.create_topic("torn", 1)
        log = manager.get_log("torn", 0)
        for i in range(10):
            log.append_as_leader(
                MemoryRecords.with_records(2, CompressionType.NONE, [SimpleRecord(b"v%d" % i, b"k")])
            )
    (data_dir / ".kafka_cleanshutdown").unlink()  # as after a crash
    segment = data_dir / "torn-0" / "00000000000000000000.log"
    whole = segment.read_bytes()
    last_batch = len(whole) // 10  # ten equal one-record batches
    segment.write_bytes(whole[:-5])
    proc, _ = _start(["--data-dir", str(data_dir), "--port", "0"])
    try:
        assert _stop(proc) == 0
    finally:
        if proc.poll() is None:
            _stop(proc, signal.SIGKILL)
    stderr = proc.stderr.read()
    warnings = [line for line in stderr.splitlines() if line.startswith("kafkalog: warning: ")]
    assert warnings == [
        f"kafkalog: warning: torn-0: recovery cut data: truncated {last_batch - 5} bytes of "
        f"00000000000000000000.log at byte {9 * last_batch} (offsets 9 and later) "
        "(an incomplete batch at the end, a torn write)"
    ], stderr
    assert segment.stat().st_size == 9 * last_batch
    # Opened again: nothing left to cut, nothing reported.
    proc, _ = _start(["--data-dir", str(data_dir), "--port", "0"])
    assert _stop(proc) == 0
    assert "warning" not in proc.stderr.read()
