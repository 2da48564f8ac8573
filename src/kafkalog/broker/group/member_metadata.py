"""``MemberMetadata``: one member of a classic group (Kafka's ``MemberMetadata``).

The protocol metadata (subscription) and assignment are opaque bytes: the broker never parses them,
so every client-side assignor (range, round-robin, sticky, cooperative-sticky) works.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from kafkalog.broker.timer import Timer

__all__ = ["JoinResult", "MemberMetadata", "SyncResult"]


@dataclass(frozen=True, slots=True)
class JoinResult:
    """What a parked JoinGroup answers with (Kafka's ``JoinGroupResult``)."""

    error: int
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    skip_assignment: bool = False
    # (member id, group instance id, metadata) for the leader; empty for the others
    members: tuple[tuple[str, str | None, bytes], ...] = ()


@dataclass(frozen=True, slots=True)
class SyncResult:
    error: int
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(eq=False, slots=True)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    # (name, metadata) in the member's order of preference
    supported_protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    awaiting_join: asyncio.Future[JoinResult] | None = None
    awaiting_sync: asyncio.Future[SyncResult] | None = None
    heartbeat_timer: Timer | None = None
    is_new: bool = False

    @property
    def is_static_member(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.awaiting_join is not None and not self.awaiting_join.done()

    @property
    def is_awaiting_sync(self) -> bool:
        return self.awaiting_sync is not None and not self.awaiting_sync.done()

    def protocols(self) -> set[str]:
        return {name for name, _ in self.supported_protocols}

    def metadata(self, protocol: str) -> bytes:
        for name, metadata in self.supported_protocols:
            if name == protocol:
                return metadata
        raise KeyError(f"Member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        """Same protocols with the same metadata, in the same order (a rejoin that changes nothing)."""
        return protocols == self.supported_protocols

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among ``candidates``."""
        for name, _ in self.supported_protocols:
            if name in candidates:
                return name
        raise ValueError(f"Member {self.member_id} does not support any of {sorted(candidates)}")

    def complete_join(self, result: JoinResult) -> bool:
        future, self.awaiting_join = self.awaiting_join, None
        if future is not None and not future.done():
            future.set_result(result)
            return True
        return False

    def complete_sync(self, result: SyncResult) -> bool:
        future, self.awaiting_sync = self.awaiting_sync, None
        if future is not None and not future.done():
            future.set_result(result)
            return True
        return False
