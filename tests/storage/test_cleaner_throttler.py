"""``log.cleaner.io.max.bytes.per.second``: Kafka's Throttler holds the cleaner's reads and writes to
the rate, shared by the cleaner threads; its sleeps end at shutdown; the default never throttles."""

from __future__ import annotations

import random
import time as _time
from pathlib import Path

import pytest

from kafkalog.clock import SYSTEM_TIME, MockTime
from kafkalog.errors import InvalidConfigError
from kafkalog.storage.cleaner.cleaner_config import CleanerConfig
from kafkalog.storage.cleaner.offset_map import OffsetMap
from kafkalog.storage.cleaner.throttler import UNLIMITED, Throttler
from kafkalog.storage.log_manager import LogManager
from tests.storage._cleaning import all_records, append, clean, compacted_log


def test_the_throttler_sleeps_off_what_an_interval_read_above_the_rate() -> None:
    time = MockTime()
    throttler = Throttler(1000, check_interval_ms=300, time=time)  # 1000 bytes a second
    time.sleep(100)
    throttler.maybe_throttle(5000)  # within the first interval: not checked yet
    assert throttler.slept_ms == 0
    time.sleep(300)
    throttler.maybe_throttle(1000)  # 6000 bytes in 400 ms: they should have taken 6 s
    assert throttler.slept_ms == 6000 - 400
    time.sleep(400)
    throttler.maybe_throttle(200)  # 200 bytes in 400 ms: under the rate, no nap
    assert throttler.slept_ms == 5600
    time.sleep(500)
    throttler.maybe_throttle(1000)  # 1000 bytes in 500 ms (the interval began at the last check)
    assert throttler.slept_ms == 5600 + 500


def test_the_config_parses_the_rate_and_refuses_one_that_stops_the_cleaner() -> None:
    assert CleanerConfig().max_io_bytes_per_second == UNLIMITED  # Java's Double.MAX_VALUE
    assert CleanerConfig().throttler() is None  # the default never throttles: no throttler at all
    config = CleanerConfig.from_broker_props({"log.cleaner.io.max.bytes.per.second": "1048576.5"})
    assert config.max_io_bytes_per_second == 1048576.5
    throttler = config.throttler()
    assert throttler is not None and throttler.desired_rate_per_sec == 1048576.5
    for bad in ("0", "-1", "NaN"):
        with pytest.raises(InvalidConfigError, match=r"log\.cleaner\.io\.max\.bytes\.per\.second"):
            CleanerConfig.from_broker_props({"log.cleaner.io.max.bytes.per.second": bad})
    with pytest.raises(InvalidConfigError, match=r"log\.cleaner\.io\.max\.bytes\.per\.second"):
        CleanerConfig.from_broker_props({"log.cleaner.io.max.bytes.per.second": "fast"})


@pytest.mark.parametrize("io_buffer", [4096, 64 * 1024])  # the offset-order round, the overlapped one
def test_a_clean_is_held_to_the_rate(tmp_path: Path, io_buffer: int) -> None:
    log = compacted_log(tmp_path, time=SYSTEM_TIME, segment_bytes=20_000)
    rng = random.Random(3)
    for _ in range(1500):
        append(log, [(b"k%d" % rng.randrange(50), rng.randbytes(60))])
    log.roll()
    rate = 400_000  # bytes a second: the ~200 KB read twice and the writes take about a second
    # Checked at every report past 1 ms (Kafka checks every 300 ms: a clean shorter than that would
    # never be checked)
    throttler = Throttler(rate, check_interval_ms=1)
    counted = []
    maybe_throttle = throttler.maybe_throttle

    def counting(observed: float) -> None:
        counted.append(observed)
        maybe_throttle(observed)

    throttler.maybe_throttle = counting  # type: ignore[method-assign]
    started = _time.monotonic()
    clean(log, offset_map=OffsetMap(24 * 10_000), io_buffer_size=io_buffer, throttler=throttler)
    elapsed = _time.monotonic() - started
    try:
        assert len({r.key for r in all_records(log)}) == 50 and len(all_records(log)) == 50
    finally:
        log.close()
    # Every byte read by both passes and written is counted, and the clean took about as long as
    # they take at the rate (less the last check interval's, which is never slept off).
    assert sum(counted) > 2 * log.size_in_bytes
    assert throttler.slept_ms > 0
    assert elapsed >= sum(counted) / rate - 0.2


def test_a_throttled_cleaner_thread_still_stops_at_shutdown(tmp_path: Path) -> None:
    with LogManager(tmp_path / "data") as lm:
        (state,) = lm.create_topic("state", 1, {"cleanup.policy": "compact", "segment.bytes": "1500"})
        # 100 bytes a second: the first check sleeps for minutes
        cleaner = lm.start_cleaner(CleanerConfig(backoff_ms=10, max_io_bytes_per_second=100))
        assert cleaner is not None and cleaner.throttler is not None
        _time.sleep(0.35)  # past the first 300 ms check interval: the first clean is checked
        for i in range(300):
            append(state, [(b"k%d" % (i % 5), b"v%d" % i)])
        cleaner.wake()
        deadline = _time.monotonic() + 20
        while cleaner.throttler.slept_ms == 0:
            assert _time.monotonic() < deadline, "the cleaner was never throttled"
            _time.sleep(0.02)
        started = _time.monotonic()
    assert _time.monotonic() - started < 5  # closing the manager woke the sleeping thread
    assert not any(t.thread.is_alive() for t in cleaner.threads)
