"""``millis``: the ms of a duration field exactly as the client sent it (kio decodes i32 durations
to timedelta; ``total_seconds() * 1000`` truncated 1001 ms to 1000)."""

from __future__ import annotations

from datetime import timedelta

from kafkalog.broker.request import millis


def test_every_millisecond_count_comes_back_exactly() -> None:
    for ms in [*range(0, 20_000), 60_000, 300_001, 900_000, 2**31 - 1, -1]:
        assert millis(timedelta(milliseconds=ms)) == ms
    assert millis(1001) == 1001  # an integer field passes through
