"""Timers that fire on time (the role of Kafka's ``SystemTimer``, whose timing wheel ticks every
millisecond).

asyncio sleeps in ``epoll_wait`` until its next timer is due, and Linux lets such a sleep overrun by
0.1 % of its length (``select_estimate_accuracy``: 6 ms of a 6 s session timeout, 45 ms of the
default 45 s) — measured here as 1.1 ms late per second of delay. Clients race Kafka's timers by a
few milliseconds: librdkafka's admin test closes static group members, sleeps the session timeout
and deletes the group, which a broker on time has emptied by then and a loop 6 ms late has not. So
a long delay is waited in steps: each ends early by more than the kernel may overrun it, until what
is left is short enough (50 ms) to overrun by microseconds — two or three steps for a session.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

__all__ = ["Timer", "call_later"]

_OVERRUN = 0.002  # the kernel's 0.1 %, doubled: how much earlier than due a long step ends
_SHORT = 0.05  # a wait this short overruns by at most 50 microseconds: waited in one step


class Timer:
    """A pending callback, cancellable (the part of ``asyncio.TimerHandle`` the broker uses)."""

    __slots__ = ("_callback", "_handle", "_loop", "_when")

    def __init__(self, loop: asyncio.AbstractEventLoop, when: float, callback: Callable[[], None]) -> None:
        self._loop = loop
        self._when = when
        self._callback = callback
        self._handle: asyncio.TimerHandle | None = None
        self._arm()

    def _arm(self) -> None:
        remaining = self._when - self._loop.time()
        if remaining <= _SHORT:
            self._handle = self._loop.call_at(self._when, self._fire)
        else:  # wakes 0.1-0.2 % early (6-12 ms of 6 s), then waits the rest
            self._handle = self._loop.call_later(remaining * (1 - _OVERRUN), self._arm)

    def _fire(self) -> None:
        self._handle = None
        self._callback()

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None


def call_later(delay_s: float, callback: Callable[[], None]) -> Timer:
    """``callback`` in ``delay_s`` seconds on the running loop, within about a millisecond."""
    loop = asyncio.get_running_loop()
    return Timer(loop, loop.time() + max(delay_s, 0.0), callback)
