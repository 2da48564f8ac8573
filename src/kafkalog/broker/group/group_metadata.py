"""``GroupMetadata``: one classic group's members, generation and state (Kafka's ``GroupMetadata``).

Plain state and the rules that only read or change it (protocol selection, static-member
replacement, generations); the coordinator decides when to call them. Owned by the loop thread.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Iterator

from kafkalog.broker.group.delayed_join import DelayedJoin
from kafkalog.broker.group.group_state import VALID_PREVIOUS_STATES, GroupState
from kafkalog.broker.group.member_metadata import MemberMetadata
from kafkalog.broker.timer import Timer
from kafkalog.errors import InvalidRequestError, KafkaLogError
from kafkalog.protocol.consumer_protocol import CONSUMER_PROTOCOL_TYPE, subscription_topics

__all__ = ["GroupMetadata", "GroupState"]

log = logging.getLogger(__name__)


def _now_ms() -> int:
    return int(time.time() * 1000)


class GroupMetadata:
    def __init__(self, group_id: str, state: GroupState = GroupState.EMPTY) -> None:
        self.group_id = group_id
        self.state = state
        self.previous_state = state
        self.current_state_timestamp: int | None = _now_ms()
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.generation_id = 0
        self.leader_id: str | None = None
        self.members: dict[str, MemberMetadata] = {}
        self.static_members: dict[str, str] = {}  # group instance id -> member id
        self.pending_members: set[str] = set()  # ids handed out with MEMBER_ID_REQUIRED
        self.pending_sync_members: set[str] = set()
        self.new_member_added = False
        self.offsets_committed = False  # an accepted commit: the group holds offsets (kept when empty)
        self.delayed_join: DelayedJoin | None = None
        self.sync_timer: Timer | None = None
        self.pending_timers: dict[str, Timer] = {}  # session timers of pending members
        self._supported: Counter[str] = Counter()  # protocol -> how many members support it
        # Kafka's subscribedTopics: what the members of the current generation subscribe to, taken
        # when the generation starts (None: unknown -- another protocol type, unreadable metadata)
        self._subscribed: frozenset[str] | None = None

    def __repr__(self) -> str:
        return (
            f"GroupMetadata({self.group_id!r}, {self.state.value}, generation={self.generation_id}, "
            f"members={list(self.members)})"
        )

    # --- state ---

    def is_state(self, state: GroupState) -> bool:
        return self.state is state

    def transition_to(self, state: GroupState) -> None:
        if self.state not in VALID_PREVIOUS_STATES[state]:
            allowed = sorted(s.value for s in VALID_PREVIOUS_STATES[state])
            raise KafkaLogError(
                f"Group {self.group_id} should be in one of {allowed} before moving to {state.value}, "
                f"but is {self.state.value}"
            )
        self.previous_state = self.state
        self.state = state
        self.current_state_timestamp = _now_ms()

    def can_rebalance(self) -> bool:
        return self.state in VALID_PREVIOUS_STATES[GroupState.PREPARING_REBALANCE]

    # --- members ---

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def get(self, member_id: str) -> MemberMetadata:
        return self.members[member_id]

    def __iter__(self) -> Iterator[MemberMetadata]:
        return iter(self.members.values())

    def __len__(self) -> int:
        return len(self.members)

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def add(self, member: MemberMetadata) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self._supported.update(member.protocols())
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> MemberMetadata | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        self._supported.subtract(member.protocols())
        if (
            member.group_instance_id is not None
            and self.static_members.get(member.group_instance_id) == member_id
        ):
            del self.static_members[member.group_instance_id]
        self.pending_sync_members.discard(member_id)
        if self.leader_id == member_id:
            # any member may lead; prefer one already waiting in JoinGroup
            waiting = [m.member_id for m in self.members.values() if m.is_awaiting_join]
            self.leader_id = waiting[0] if waiting else next(iter(self.members), None)
        return member

    def update_member(
        self,
        member: MemberMetadata,
        protocols: list[tuple[str, bytes]],
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
    ) -> None:
        self._supported.subtract(member.protocols())
        member.supported_protocols = protocols
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        self._supported.update(member.protocols())

    # --- static members ---

    def current_static_member_id(self, group_instance_id: str | None) -> str | None:
        return None if group_instance_id is None else self.static_members.get(group_instance_id)

    def is_static_member_fenced(self, group_instance_id: str | None, member_id: str) -> bool:
        """A static member known under another member id: this id belongs to a replaced instance."""
        current = self.current_static_member_id(group_instance_id)
        return current is not None and current != member_id

    def replace_static_member(
        self, group_instance_id: str, old_member_id: str, new_member_id: str
    ) -> MemberMetadata:
        """Move the old member's state to ``new_member_id`` (Kafka's ``replaceStaticMember``); the caller
        fences whatever the old id was waiting for."""
        member = self.members.pop(old_member_id)
        member.member_id = new_member_id
        self.members[new_member_id] = member
        self.static_members[group_instance_id] = new_member_id
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        if old_member_id in self.pending_sync_members:
            self.pending_sync_members.discard(old_member_id)
            self.pending_sync_members.add(new_member_id)
        return member

    # --- rebalancing ---

    def num_awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.is_awaiting_join)

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_awaiting_join() and not self.pending_members

    def not_yet_rejoined_members(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def candidate_protocols(self) -> set[str]:
        """Protocols every member supports."""
        return {name for name, count in self._supported.items() if count == len(self.members) and count > 0}

    def supports_protocols(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        """May a member with these protocols join (Kafka's ``supportsProtocols``)?"""
        if not self.members:
            return bool(protocol_type) and bool(protocols)
        return self.protocol_type == protocol_type and any(
            self._supported[name] == len(self.members) for name, _ in protocols
        )

    def select_protocol(self) -> str:
        """The protocol all members support with the most first-choice votes (ties: the earliest-joined
        member's preference)."""
        candidates = self.candidate_protocols()
        if not candidates:
            raise KafkaLogError(f"No protocol is supported by all members of group {self.group_id}")
        votes = Counter(m.vote(candidates) for m in self.members.values())
        best = max(votes.values())
        return next(name for name in votes if votes[name] == best)

    def subscribed_topics(self) -> frozenset[str] | None:
        """The topics the current generation's members subscribe to, as taken when it started (Kafka's
        ``subscribedTopics``): None when unknown, which Kafka reads as "subscribed to every topic"."""
        return self._subscribed

    def is_subscribed_to_topic(self, topic: str) -> bool:
        """Kafka's ``isSubscribedToTopic``: an unknown subscription covers every topic."""
        return self._subscribed is None or topic in self._subscribed

    def compute_subscribed_topics(self) -> None:
        """Kafka's ``computeSubscribedTopics``, at a generation's start (and a group's load): a
        ``consumer`` group's members' topics in its protocol (none for an empty one); None for other
        protocol types or metadata that cannot be read."""
        self._subscribed = None
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return
        if not self.members:
            self._subscribed = frozenset()
            return
        if self.protocol_name is None:
            return
        topics: set[str] = set()
        try:
            for member in self.members.values():
                topics |= subscription_topics(member.metadata(self.protocol_name))
        except (InvalidRequestError, KeyError) as e:
            log.warning("Cannot read the subscriptions of group %s: %s", self.group_id, e)
            return
        self._subscribed = frozenset(topics)

    def init_next_generation(self) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE)
        else:
            self.protocol_name = None
            self.compute_subscribed_topics()
            self.transition_to(GroupState.EMPTY)
        self.pending_sync_members = set(self.members) if self.members else set()
