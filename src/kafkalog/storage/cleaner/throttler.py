"""``Throttler``: holds the log cleaner's I/O to ``log.cleaner.io.max.bytes.per.second`` (Kafka's
``Throttler``, shared by every cleaner thread of a broker).

The cleaner reports the bytes it reads and writes; once per check interval (300 ms, as Kafka's
cleaner uses) the rate since the interval began is compared with the limit, and when it is above,
the reporting thread sleeps for as long as the bytes counted should have taken at the limit, less
the time they did take. Kafka's default limit, ``Double.MAX_VALUE``, never throttles; the cleaner
then makes no throttler at all, so the hot paths pay nothing for it.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable

from kafkalog.clock import SYSTEM_TIME, Time

__all__ = ["CHECK_INTERVAL_MS", "UNLIMITED", "Throttler"]

UNLIMITED = sys.float_info.max  # Java's Double.MAX_VALUE: Kafka's default, no limit
CHECK_INTERVAL_MS = 300


class Throttler:
    """Sleeps the thread that reports past ``desired_rate_per_sec`` units (bytes) per second."""

    def __init__(self, desired_rate_per_sec: float, *, check_interval_ms: int = CHECK_INTERVAL_MS,
                 time: Time = SYSTEM_TIME, sleep: Callable[[int], object] | None = None) -> None:
        self.desired_rate_per_sec = desired_rate_per_sec
        self._check_interval_ns = check_interval_ms * 1_000_000
        self._time = time
        # The cleaner passes a sleep its shutdown cuts short; a throttled thread is otherwise stuck.
        self._sleep = sleep if sleep is not None else time.sleep
        self._lock = threading.Lock()
        self._period_start_ns = time.nanoseconds()
        self._observed = 0.0
        self.slept_ms = 0  # in all, for tests and stats

    def maybe_throttle(self, observed: float) -> None:
        rate_limit = self.desired_rate_per_sec
        with self._lock:
            self._observed += observed
            elapsed_ns = self._time.nanoseconds() - self._period_start_ns
            if elapsed_ns <= self._check_interval_ns or self._observed <= 0:
                return
            if self._observed * 1e9 / elapsed_ns > rate_limit:
                # How long the bytes of this interval should have taken at the limit, less what they took.
                sleep_ms = round(self._observed / (rate_limit / 1000) - elapsed_ns // 1_000_000)
                if sleep_ms > 0:
                    self.slept_ms += sleep_ms
                    self._sleep(sleep_ms)
            self._period_start_ns = self._time.nanoseconds()
            self._observed = 0.0
