"""Time as the storage layer sees it: injectable, so tests can move it by hand."""

from __future__ import annotations

import time as _time


class Time:
    """Wall clock in milliseconds and a monotonic clock in nanoseconds (Kafka's ``Time``)."""

    def milliseconds(self) -> int:
        return _time.time_ns() // 1_000_000

    def nanoseconds(self) -> int:
        return _time.monotonic_ns()

    def sleep(self, ms: int) -> None:
        _time.sleep(ms / 1000)


SYSTEM_TIME = Time()


class MockTime(Time):
    """A clock that only moves when ``sleep`` is called (Kafka's ``MockTime``)."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._ms = start_ms
        self._ns = 0

    def milliseconds(self) -> int:
        return self._ms

    def nanoseconds(self) -> int:
        return self._ns

    def sleep(self, ms: int) -> None:
        self._ms += ms
        self._ns += ms * 1_000_000
