"""kill -9 in the middle of producing: ``kafkalog serve`` is SIGKILLed while an acks=1 and an acks=all
producer (confluent-kafka) write numbered records, then started again on the same data directory and
port. Every acknowledged record is there at the offset it was acknowledged with, offsets are
contiguous, ``kafkalog verify`` passes, and the same producers reconnect and carry on."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalog.storage.log import Log
from tests.broker.test_serve_command import _start, _stop

CLI = [sys.executable, "-m", "kafkalog.cli"]
TOPICS = {"acks1": 1, "acksall": -1}


class _NumberedProducer(threading.Thread):
    """Produces "<topic>-<n>" for n = 0, 1, ... and records what the broker acknowledged."""

    def __init__(self, bootstrap: str, topic: str, acks: int) -> None:
        super().__init__(daemon=True)
        self.topic = topic
        self.producer = ck.Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": acks,
                "linger.ms": 2,
                "message.timeout.ms": 60000,
                "reconnect.backoff.max.ms": 200,
            }
        )
        self.acked: dict[int, bytes] = {}  # offset -> value
        self.failed = 0
        self.stop = threading.Event()
        self.sent = 0

    def _delivered(self, err, msg) -> None:
        if err is None:
            self.acked[msg.offset()] = msg.value()
        else:
            self.failed += 1

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                self.producer.produce(
                    self.topic,
                    b"%s-%d" % (self.topic.encode(), self.sent),
                    partition=0,
                    on_delivery=self._delivered,
                )
                self.sent += 1
            except BufferError:
                pass
            self.producer.poll(0.001)
        self.producer.flush(60)

    def wait_for(self, count: int, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while len(self.acked) < count and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(self.acked) >= count, (self.topic, len(self.acked), self.failed)


def test_kill_9_mid_produce_then_restart(tmp_path):
    data_dir = tmp_path / "data"
    proc, bootstrap = _start(["--data-dir", str(data_dir), "--port", "0"])
    port = bootstrap.rsplit(":", 1)[1]
    producers = []
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for future in admin.create_topics([NewTopic(t, 1, 1) for t in TOPICS]).values():
            future.result(30)
        producers = [_NumberedProducer(bootstrap, topic, acks) for topic, acks in TOPICS.items()]
        for p in producers:
            p.start()
        for p in producers:
            p.wait_for(500)
        proc.send_signal(signal.SIGKILL)  # mid-produce: both producers are still sending
        proc.wait(30)
        acked_before = {p.topic: dict(p.acked) for p in producers}

        proc, _ = _start(["--data-dir", str(data_dir), "--port", port])
        for p in producers:  # the same clients reconnect and carry on
            p.wait_for(max(acked_before[p.topic]) + 300)
            p.stop.set()
        for p in producers:
            p.join(90)
            assert not p.is_alive()
        assert _stop(proc) == 0
    finally:
        for p in producers:
            p.stop.set()
        if proc.poll() is None:
            _stop(proc, signal.SIGKILL)

    verify = subprocess.run(
        [*CLI, "verify", "--data-dir", str(data_dir)], capture_output=True, text=True, timeout=120
    )
    assert verify.returncode == 0, verify.stdout + verify.stderr
    for p in producers:
        with Log.open(data_dir / f"{p.topic}-0") as stored:
            offsets = [r.offset for r in stored.records(0)]
            values = {r.offset: r.value for r in stored.records(0)}
        assert offsets == list(range(len(offsets)))  # contiguous from 0
        # every record acknowledged before the crash, and after it, is where it was acknowledged
        assert all(values.get(offset) == value for offset, value in p.acked.items()), p.topic
        assert len(p.acked) > len(acked_before[p.topic])
