"""The timers of a rebalance (Kafka's ``DelayedJoin``, ``InitialDelayedJoin`` and pending-sync timeout),
as ``broker.timer`` timers: every parked JoinGroup/SyncGroup is answered by the time they fire.

- ``DelayedJoin``: the join phase ends when every known member has rejoined, or after the group's
  rebalance timeout (then the members that did not rejoin are dropped).
- ``InitialDelayedJoin``: a rebalance out of Empty waits the whole ``group.initial.rebalance.delay.ms``
  and again for as long as new members keep arriving, in all at most the larger of that delay and the
  rebalance timeout, so that consumers started together land in one generation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kafkalog.broker import timer

__all__ = ["DelayedJoin"]


@dataclass(eq=False, slots=True)
class DelayedJoin:
    initial: bool  # an InitialDelayedJoin: never completes early, only when its delay passes
    remaining_ms: int  # for an initial join: how much longer it may be extended
    handle: timer.Timer | None = None

    def schedule(self, delay_ms: int, on_expire: Callable[[], None]) -> None:
        self.cancel()
        self.handle = timer.call_later(max(delay_ms, 0) / 1000, on_expire)

    def cancel(self) -> None:
        if self.handle is not None:
            self.handle.cancel()
            self.handle = None
