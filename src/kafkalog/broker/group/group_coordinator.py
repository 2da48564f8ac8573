"""``GroupCoordinator``: the classic consumer group protocol (Kafka's ``GroupCoordinator``).

Everything runs on the broker's loop thread: handlers await the coordinator, timers are
``broker.timer`` timers (on time to the millisecond, as Kafka's). A JoinGroup parks on a future
until the join phase ends (every member rejoined, or the rebalance timeout, or
``group.initial.rebalance.delay.ms`` for a new group); a follower's SyncGroup parks until the
leader's assignment is stored, or the pending-sync timeout drops the members that never synced.
Session timers evict members that stop heartbeating.

Persistence goes through ``apis.components["group_metadata_manager"]`` (``__consumer_offsets``)
when one is attached: ``store_group`` after each assignment and each generation of an emptied
group, ``delete_group`` for DeleteGroups, ``load`` once before the first request.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from kafkalog.broker import timer
from kafkalog.broker.group.delayed_join import DelayedJoin
from kafkalog.broker.group.group_metadata import GroupMetadata
from kafkalog.broker.group.group_state import GroupState
from kafkalog.broker.group.member_metadata import JoinResult, MemberMetadata, SyncResult
from kafkalog.protocol.group_metadata_records import GroupMetadataValue, MemberMetadataValue

__all__ = ["GroupConfig", "GroupCoordinator", "GroupSummary", "MemberSummary"]

log = logging.getLogger(__name__)

NONE = int(ErrorCode.none)
# How long a new member's first JoinGroup may wait in a rebalance (Kafka's NewMemberJoinTimeoutMs):
# its session timeout cannot apply -- it sends no heartbeats yet -- and a client that gave up and
# retried would otherwise leave a defunct member in the group until the rebalance ends.
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000
_E = ErrorCode


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """The ``group.*`` broker configs (Kafka's ``GroupConfig``/``GroupCoordinatorConfig``)."""

    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    initial_rebalance_delay_ms: int = 3000
    max_size: int = 2**31 - 1
    new_member_join_timeout_ms: int = NEW_MEMBER_JOIN_TIMEOUT_MS

    @classmethod
    def from_kafka_config(cls, config: Any) -> GroupConfig:
        return cls(
            min_session_timeout_ms=config.get_int("group.min.session.timeout.ms"),
            max_session_timeout_ms=config.get_int("group.max.session.timeout.ms"),
            initial_rebalance_delay_ms=config.get_int("group.initial.rebalance.delay.ms"),
            max_size=config.get_int("group.max.size"),
        )


@dataclass(frozen=True, slots=True)
class MemberSummary:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupSummary:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: tuple[MemberSummary, ...]


class GroupCoordinator:
    def __init__(self, config: GroupConfig, components: Mapping[str, Any] | None = None) -> None:
        self.config = config
        self._components: Mapping[str, Any] = components if components is not None else {}
        self.groups: dict[str, GroupMetadata] = {}
        self._loaded = False
        self._active = True
        self._tasks: set[asyncio.Task[Any]] = set()

    # --- lifecycle and persistence ---

    @property
    def manager(self) -> Any:
        return self._components.get("group_metadata_manager")

    def startup(self) -> None:
        """Load the stored groups now (``KafkaServer.startup``, once every component exists)."""
        self._ensure_loaded()

    def _ensure_loaded(self) -> None:
        """Rebuild the groups ``__consumer_offsets`` holds, once, before serving (Kafka's
        ``onElection`` → ``loadGroupsForPartition``): groups with members come back Stable."""
        manager = self.manager
        if self._loaded or manager is None:
            return
        self._loaded = True
        for group_id, value in manager.load().items():
            self.groups[group_id] = self._group_from_value(group_id, value)
        for group_id in manager.group_ids_with_offsets():
            self.groups.setdefault(group_id, GroupMetadata(group_id))

    def _group_from_value(self, group_id: str, value: Any) -> GroupMetadata:
        group = GroupMetadata(group_id, GroupState.STABLE if value.members else GroupState.EMPTY)
        group.protocol_type = value.protocol_type
        group.generation_id = value.generation
        group.protocol_name = value.protocol
        group.current_state_timestamp = value.current_state_timestamp
        for m in value.members:
            member = MemberMetadata(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout,
                m.session_timeout,
                value.protocol_type,
                [(value.protocol or "", m.subscription)],
                m.assignment,
            )
            group.add(member)
            self._schedule_heartbeat(group, member)
        group.leader_id = value.leader
        group.compute_subscribed_topics()
        return group

    def _value(self, group: GroupMetadata, assignment: Mapping[str, bytes]) -> GroupMetadataValue:
        protocol = group.protocol_name
        return GroupMetadataValue(
            protocol_type=group.protocol_type or "",
            generation=group.generation_id,
            protocol=protocol,
            leader=group.leader_id if group.members else None,
            current_state_timestamp=group.current_state_timestamp or 0,
            members=tuple(
                MemberMetadataValue(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout=m.rebalance_timeout_ms,
                    session_timeout=m.session_timeout_ms,
                    subscription=m.metadata(protocol) if protocol is not None else b"",
                    assignment=assignment.get(m.member_id, b""),
                )
                for m in group
            ),
        )

    async def _store_group(self, group: GroupMetadata, assignment: Mapping[str, bytes]) -> int:
        manager = self.manager
        if manager is None:
            return NONE
        try:
            return int(await manager.store_group(group.group_id, self._value(group, assignment)))
        except Exception:
            log.exception("Storing group %s failed", group.group_id)
            return int(_E.unknown_server_error)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def shutdown(self) -> None:
        """Answer every parked join/sync with NOT_COORDINATOR and stop every timer (idempotent)."""
        self._active = False
        for group in self.groups.values():
            self._cancel_group_timers(group)
            for member in group:
                self._cancel_heartbeat(member)
                member.complete_join(JoinResult(int(_E.not_coordinator), member.member_id))
                member.complete_sync(SyncResult(int(_E.not_coordinator)))
        for task in self._tasks:
            task.cancel()

    def _cancel_group_timers(self, group: GroupMetadata) -> None:
        if group.delayed_join is not None:
            group.delayed_join.cancel()
            group.delayed_join = None
        if group.sync_timer is not None:
            group.sync_timer.cancel()
            group.sync_timer = None
        for handle in group.pending_timers.values():
            handle.cancel()
        group.pending_timers.clear()

    def _validate(self, group_id: str | None, allow_empty: bool = False) -> int:
        """Kafka's ``validateGroupStatus``: an empty group id is only valid for some APIs."""
        if group_id is None or (not group_id and not allow_empty):
            return int(_E.invalid_group_id)
        if not self._active:
            return int(_E.coordinator_not_available)
        self._ensure_loaded()
        return NONE

    # --- JoinGroup ---

    async def handle_join_group(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        require_known_member_id: bool,
        support_skip_assignment: bool,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
    ) -> JoinResult:
        error = self._validate(group_id)
        if error:
            return JoinResult(error, member_id)
        if not self.config.min_session_timeout_ms <= session_timeout_ms <= self.config.max_session_timeout_ms:
            return JoinResult(int(_E.invalid_session_timeout), member_id)
        is_unknown = member_id == ""
        group = self.groups.get(group_id)
        if group is None:
            if not is_unknown:
                return JoinResult(int(_E.unknown_member_id), member_id)
            group = self.groups[group_id] = GroupMetadata(group_id)
        if not self._accept_joining_member(group, member_id):
            # Kafka removes the refused member (a pending one would hold the next rebalance back
            # until it timed out) and answers without a member id
            if member_id in group.pending_members:
                self._remove_pending_member(group, member_id)
            return JoinResult(int(_E.group_max_size_reached), "")
        args = (rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols)
        if group.is_state(GroupState.DEAD):
            # a concurrent DeleteGroups won; the client looks the coordinator up again
            return JoinResult(int(_E.coordinator_not_available), member_id)
        if not group.supports_protocols(protocol_type, protocols):
            # The group a failed first join created stays, Empty, until the offsets cleanup removes it
            # (cleanup_group_metadata), as Kafka's getOrMaybeCreateGroup leaves it.
            return JoinResult(int(_E.inconsistent_group_protocol), member_id)
        if is_unknown:
            outcome = self._new_member_join(
                group,
                group_instance_id,
                require_known_member_id,
                support_skip_assignment,
                client_id,
                client_host,
                *args,
            )
        else:
            outcome = self._current_member_join(
                group, member_id, group_instance_id, client_id, client_host, *args
            )
        if isinstance(outcome, JoinResult):
            return outcome
        # shield: a closed connection must not cancel the member's place in the rebalance
        return await asyncio.shield(outcome)

    def _accept_joining_member(self, group: GroupMetadata, member_id: str) -> bool:
        """``group.max.size`` (Kafka's ``acceptJoiningMember``)."""
        if group.state in (GroupState.EMPTY, GroupState.DEAD):
            return True
        if group.is_state(GroupState.PREPARING_REBALANCE):
            return (group.has(member_id) and group.get(member_id).is_awaiting_join) or (
                group.num_awaiting_join() < self.config.max_size
            )
        return group.has(member_id) or len(group) < self.config.max_size

    def _new_member_join(
        self,
        group: GroupMetadata,
        group_instance_id: str | None,
        require_known_member_id: bool,
        support_skip_assignment: bool,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
    ) -> JoinResult | asyncio.Future[JoinResult]:
        new_member_id = f"{group_instance_id or client_id}-{uuid.uuid4()}"
        if group_instance_id is not None:
            old_member_id = group.current_static_member_id(group_instance_id)
            if old_member_id is not None:
                return self._update_static_member_and_rebalance(
                    group,
                    old_member_id,
                    new_member_id,
                    group_instance_id,
                    support_skip_assignment,
                    rebalance_timeout_ms,
                    session_timeout_ms,
                    protocols,
                )
        elif require_known_member_id:
            # KIP-394: hand out the id first; the member is pending until it joins with it
            group.pending_members.add(new_member_id)
            self._schedule_pending_member(group, new_member_id, session_timeout_ms)
            return JoinResult(int(_E.member_id_required), new_member_id)
        member = MemberMetadata(
            new_member_id,
            group_instance_id,
            client_id,
            client_host,
            rebalance_timeout_ms,
            session_timeout_ms,
            protocol_type,
            protocols,
        )
        return self._add_member_and_rebalance(group, member)

    def _current_member_join(
        self,
        group: GroupMetadata,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
    ) -> JoinResult | asyncio.Future[JoinResult]:
        if member_id in group.pending_members:
            handle = group.pending_timers.pop(member_id, None)
            if handle is not None:
                handle.cancel()
            member = MemberMetadata(
                member_id,
                group_instance_id,
                client_id,
                client_host,
                rebalance_timeout_ms,
                session_timeout_ms,
                protocol_type,
                protocols,
            )
            return self._add_member_and_rebalance(group, member)
        if group.is_static_member_fenced(group_instance_id, member_id):
            return JoinResult(int(_E.fenced_instance_id), member_id)
        unknown_instance = (group_instance_id is not None
                            and group.current_static_member_id(group_instance_id) is None)
        if not group.has(member_id) or unknown_instance or group.is_state(GroupState.EMPTY):
            # a static member whose instance id is not known resets its member id and retries
            return JoinResult(int(_E.unknown_member_id), member_id)
        member = group.get(member_id)
        update = (rebalance_timeout_ms, session_timeout_ms, protocols)
        if group.is_state(GroupState.PREPARING_REBALANCE):
            return self._update_member_and_rebalance(group, member, *update)
        if group.is_state(GroupState.COMPLETING_REBALANCE) and member.matches(protocols):
            # a retry of a join that already completed: answer it again
            self._schedule_heartbeat(group, member)
            return self._join_result(group, member)
        if group.is_state(GroupState.STABLE) and not group.is_leader(member_id) and member.matches(protocols):
            # a follower's join that changes nothing needs no rebalance
            self._schedule_heartbeat(group, member)
            return self._join_result(group, member, with_members=False)
        return self._update_member_and_rebalance(group, member, *update)

    def _join_result(
        self, group: GroupMetadata, member: MemberMetadata, with_members: bool = True
    ) -> JoinResult:
        members: tuple[tuple[str, str | None, bytes], ...] = ()
        if with_members and group.is_leader(member.member_id) and group.protocol_name is not None:
            members = tuple(
                (m.member_id, m.group_instance_id, m.metadata(group.protocol_name)) for m in group
            )
        return JoinResult(
            NONE,
            member.member_id,
            group.generation_id,
            group.protocol_type,
            group.protocol_name,
            group.leader_id or "",
            members=members,
        )

    def _add_member_and_rebalance(
        self, group: GroupMetadata, member: MemberMetadata
    ) -> asyncio.Future[JoinResult]:
        member.is_new = True
        # Kafka 4's GroupMetadataManager: any rebalance out of Empty waits for more joiners (not only a
        # brand-new group's first one), so restarted members land in one generation.
        if group.is_state(GroupState.PREPARING_REBALANCE) and group.previous_state is GroupState.EMPTY:
            group.new_member_added = True
        member.awaiting_join = asyncio.get_running_loop().create_future()
        future = member.awaiting_join
        group.add(member)
        self._schedule_heartbeat(group, member, self.config.new_member_join_timeout_ms)
        self._maybe_prepare_rebalance(group, f"Adding new member {member.member_id}")
        self._check_join(group)
        return future

    def _update_member_and_rebalance(
        self,
        group: GroupMetadata,
        member: MemberMetadata,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocols: list[tuple[str, bytes]],
    ) -> asyncio.Future[JoinResult]:
        group.update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms)
        # a duplicate join replaces the earlier one, which must still get an answer
        member.complete_join(JoinResult(int(_E.rebalance_in_progress), member.member_id))
        member.awaiting_join = asyncio.get_running_loop().create_future()
        future = member.awaiting_join
        self._schedule_heartbeat(group, member)
        self._maybe_prepare_rebalance(group, f"Updating metadata for member {member.member_id}")
        self._check_join(group)
        return future

    def _update_static_member_and_rebalance(
        self,
        group: GroupMetadata,
        old_member_id: str,
        new_member_id: str,
        group_instance_id: str,
        support_skip_assignment: bool,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocols: list[tuple[str, bytes]],
    ) -> JoinResult | asyncio.Future[JoinResult]:
        """A static member came back with a new member id (Kafka's ``updateStaticMemberAndRebalance``):
        the old id is fenced; in a Stable group whose protocol stays the same, no rebalance."""
        current_leader = group.leader_id or ""
        old = group.get(old_member_id)
        old.complete_join(JoinResult(int(_E.fenced_instance_id), old_member_id))
        old.complete_sync(SyncResult(int(_E.fenced_instance_id)))
        self._cancel_heartbeat(old)
        old_settings = (old.rebalance_timeout_ms, old.session_timeout_ms, list(old.supported_protocols))
        member = group.replace_static_member(group_instance_id, old_member_id, new_member_id)
        group.update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms)
        self._schedule_heartbeat(group, member)
        if group.is_state(GroupState.STABLE) and group.select_protocol() == group.protocol_name:
            return asyncio.get_running_loop().create_task(
                self._persist_replaced_static_member(
                    group,
                    member,
                    old_member_id,
                    group_instance_id,
                    current_leader,
                    support_skip_assignment,
                    old_settings,
                )
            )
        member.awaiting_join = asyncio.get_running_loop().create_future()
        future = member.awaiting_join
        self._maybe_prepare_rebalance(group, f"Static member {group_instance_id} rejoined with new protocols")
        self._check_join(group)
        return future

    async def _persist_replaced_static_member(
        self,
        group: GroupMetadata,
        member: MemberMetadata,
        old_member_id: str,
        group_instance_id: str,
        current_leader: str,
        support_skip_assignment: bool,
        old_settings: tuple[int, int, list[tuple[str, bytes]]],
    ) -> JoinResult:
        new_member_id = member.member_id
        error = await self._store_group(group, {m.member_id: m.assignment for m in group})
        if error:
            if group.current_static_member_id(group_instance_id) == new_member_id:
                group.replace_static_member(group_instance_id, new_member_id, old_member_id)
                rebalance_timeout_ms, session_timeout_ms, protocols = old_settings
                group.update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms)
            return JoinResult(error, "")
        skip = support_skip_assignment and group.is_leader(new_member_id)
        result = self._join_result(group, member, with_members=skip)
        # Without KIP-814 a returning leader is told the old leader id, so it only syncs and keeps
        # the current assignment instead of computing a new one.
        return JoinResult(
            NONE,
            new_member_id,
            result.generation_id,
            result.protocol_type,
            result.protocol_name,
            group.leader_id or "" if skip else current_leader,
            skip,
            result.members,
        )

    # --- rebalance phases ---

    def _maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.is_state(GroupState.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, int(_E.rebalance_in_progress))
        if group.sync_timer is not None:
            group.sync_timer.cancel()
            group.sync_timer = None
        rebalance_timeout_ms = group.rebalance_timeout_ms()
        if group.is_state(GroupState.EMPTY):
            # the whole initial delay even past the rebalance timeout, as Kafka's InitialDelayedJoin
            delay = self.config.initial_rebalance_delay_ms
            delayed = DelayedJoin(initial=True, remaining_ms=max(rebalance_timeout_ms - delay, 0))
        else:
            delay = rebalance_timeout_ms
            delayed = DelayedJoin(initial=False, remaining_ms=0)
        group.transition_to(GroupState.PREPARING_REBALANCE)
        log.info(
            "Preparing to rebalance group %s in state PreparingRebalance with old generation %d (reason: %s)",
            group.group_id,
            group.generation_id,
            reason,
        )
        self._start_delayed_join(group, delayed, delay)

    def _start_delayed_join(self, group: GroupMetadata, delayed: DelayedJoin, delay_ms: int) -> None:
        if group.delayed_join is not None:
            group.delayed_join.cancel()
        group.delayed_join = delayed
        delayed.schedule(delay_ms, lambda: self._on_delayed_join_expired(group, delayed))

    def _on_delayed_join_expired(self, group: GroupMetadata, delayed: DelayedJoin) -> None:
        if group.delayed_join is not delayed:
            return
        delayed.handle = None
        if delayed.initial and group.new_member_added and delayed.remaining_ms > 0:
            # new members keep arriving: wait once more, within the rebalance timeout
            group.new_member_added = False
            delay = min(self.config.initial_rebalance_delay_ms, delayed.remaining_ms)
            again = DelayedJoin(initial=True, remaining_ms=max(delayed.remaining_ms - delay, 0))
            self._start_delayed_join(group, again, delay)
            return
        self._complete_join(group)

    def _check_join(self, group: GroupMetadata) -> None:
        """Kafka's ``checkAndComplete`` of the DelayedJoin: done early once every member rejoined."""
        delayed = group.delayed_join
        if (
            group.is_state(GroupState.PREPARING_REBALANCE)
            and delayed is not None
            and not delayed.initial
            and group.has_all_members_joined()
        ):
            self._complete_join(group)

    def _complete_join(self, group: GroupMetadata) -> None:
        """The join phase ends (Kafka's ``onCompleteJoin``)."""
        if group.delayed_join is not None:
            group.delayed_join.cancel()
            group.delayed_join = None
        if not group.is_state(GroupState.PREPARING_REBALANCE):
            return
        for member in group.not_yet_rejoined_members():
            if not member.is_static_member:  # static members keep their place until their session ends
                self._cancel_heartbeat(member)
                group.remove(member.member_id)
        if group.members and not any(m.is_awaiting_join for m in group):
            # only absent static members remain: wait again until their sessions expire
            log.info("Group %s could not complete rebalance because no members rejoined", group.group_id)
            self._start_delayed_join(
                group, DelayedJoin(initial=False, remaining_ms=0), group.rebalance_timeout_ms()
            )
            return
        if group.leader_id is None or not group.get(group.leader_id).is_awaiting_join:
            group.leader_id = (
                next(m.member_id for m in group if m.is_awaiting_join) if group.members else None
            )
        group.new_member_added = False
        group.init_next_generation()
        if group.is_state(GroupState.EMPTY):
            log.info("Group %s with generation %d is now empty", group.group_id, group.generation_id)
            self._spawn(self._store_empty_group(group))
            return
        log.info(
            "Stabilized group %s generation %d with %d members",
            group.group_id,
            group.generation_id,
            len(group),
        )
        for member in list(group):
            member.complete_join(self._join_result(group, member))
            member.is_new = False
            self._schedule_heartbeat(group, member)
        self._schedule_pending_sync(group)

    async def _store_empty_group(self, group: GroupMetadata) -> None:
        error = await self._store_group(group, {})
        if error:
            log.warning("Failed to write empty metadata for group %s: error %d", group.group_id, error)

    def _schedule_pending_sync(self, group: GroupMetadata) -> None:
        """Members that do not sync within the rebalance timeout are dropped (Kafka's pending sync)."""
        if group.sync_timer is not None:
            group.sync_timer.cancel()
        generation = group.generation_id
        group.sync_timer = timer.call_later(
            group.rebalance_timeout_ms() / 1000, lambda: self._on_pending_sync_expired(group, generation)
        )

    def _on_pending_sync_expired(self, group: GroupMetadata, generation: int) -> None:
        group.sync_timer = None
        if generation != group.generation_id or group.state not in (
            GroupState.COMPLETING_REBALANCE,
            GroupState.STABLE,
        ):
            return
        missing = [group.get(m) for m in sorted(group.pending_sync_members) if group.has(m)]
        if not missing:
            return
        for member in missing:
            log.info("Removing member %s of group %s: no SyncGroup in time", member.member_id, group.group_id)
            self._remove_member(group, member)
        self._maybe_prepare_rebalance(group, "Removing members that did not sync")

    def _reset_and_propagate_assignment_error(self, group: GroupMetadata, error: int) -> None:
        for member in group:
            member.assignment = b""
            member.complete_sync(SyncResult(error))

    def _set_and_propagate_assignment(self, group: GroupMetadata, assignment: Mapping[str, bytes]) -> None:
        for member in group:
            member.assignment = assignment.get(member.member_id, b"")
            if member.complete_sync(
                SyncResult(NONE, member.assignment, group.protocol_type, group.protocol_name)
            ):
                self._schedule_heartbeat(group, member)

    # --- SyncGroup ---

    async def handle_sync_group(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: Iterable[tuple[str, bytes]],
    ) -> SyncResult:
        error = self._validate(group_id)
        if error:
            return SyncResult(error)
        group = self.groups.get(group_id)
        if group is None:
            return SyncResult(int(_E.unknown_member_id))
        error = self._check_member(group, member_id, group_instance_id, generation_id)
        if error:
            return SyncResult(error)
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol_name
        ):
            return SyncResult(int(_E.inconsistent_group_protocol))
        if group.is_state(GroupState.PREPARING_REBALANCE):
            return SyncResult(int(_E.rebalance_in_progress))
        member = group.get(member_id)
        group.pending_sync_members.discard(member_id)
        self._schedule_heartbeat(group, member)
        if group.is_state(GroupState.STABLE):
            return SyncResult(NONE, member.assignment, group.protocol_type, group.protocol_name)
        # CompletingRebalance
        member.complete_sync(SyncResult(int(_E.rebalance_in_progress)))
        member.awaiting_sync = asyncio.get_running_loop().create_future()
        future = member.awaiting_sync
        if group.is_leader(member_id):
            given = dict(assignments)
            assignment = {m.member_id: given.get(m.member_id, b"") for m in group}
            generation = group.generation_id
            error = await self._store_group(group, assignment)
            if group.is_state(GroupState.COMPLETING_REBALANCE) and group.generation_id == generation:
                if error:
                    self._reset_and_propagate_assignment_error(group, error)
                    self._maybe_prepare_rebalance(group, f"Error {error} when storing the group assignment")
                else:
                    self._set_and_propagate_assignment(group, assignment)
                    group.transition_to(GroupState.STABLE)
        return await asyncio.shield(future)

    def _check_member(
        self, group: GroupMetadata, member_id: str, group_instance_id: str | None, generation_id: int
    ) -> int:
        """The checks SyncGroup and Heartbeat share, in Kafka's order."""
        if group.is_state(GroupState.DEAD):
            return int(_E.coordinator_not_available)
        error = self._validate_current_member(group, member_id, group_instance_id)
        if error:
            return error
        if generation_id != group.generation_id:
            return int(_E.illegal_generation)
        if group.is_state(GroupState.EMPTY):
            return int(_E.unknown_member_id)
        return NONE

    # --- Heartbeat ---

    def handle_heartbeat(
        self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int
    ) -> int:
        error = self._validate(group_id)
        if error:
            return error
        group = self.groups.get(group_id)
        if group is None:
            return int(_E.unknown_member_id)
        error = self._check_member(group, member_id, group_instance_id, generation_id)
        if error:
            return error
        self._schedule_heartbeat(group, group.get(member_id))
        if group.is_state(GroupState.PREPARING_REBALANCE):
            return int(_E.rebalance_in_progress)
        return NONE

    # --- LeaveGroup ---

    def handle_leave_group(
        self, group_id: str, leaving: Iterable[tuple[str, str | None]]
    ) -> tuple[int, list[int]]:
        """(top-level error, one error per leaving (member id, group instance id))."""
        leaving = list(leaving)
        error = self._validate(group_id)
        if error:
            return error, []
        group = self.groups.get(group_id)
        if group is None:
            return NONE, [int(_E.unknown_member_id)] * len(leaving)
        if group.is_state(GroupState.DEAD):
            return int(_E.coordinator_not_available), []
        errors = []
        for member_id, group_instance_id in leaving:
            errors.append(self._leave_one(group, member_id, group_instance_id))
        return NONE, errors

    def _leave_one(self, group: GroupMetadata, member_id: str, group_instance_id: str | None) -> int:
        if group_instance_id is not None:
            current = group.current_static_member_id(group_instance_id)
            if current is None:
                return int(_E.unknown_member_id)
            if member_id and member_id != current:
                return int(_E.fenced_instance_id)
            member_id = current
        elif member_id in group.pending_members:
            self._remove_pending_member(group, member_id)
            return NONE
        if not group.has(member_id):
            return int(_E.unknown_member_id)
        log.info("Member %s has left group %s through explicit LeaveGroup", member_id, group.group_id)
        self._remove_member_and_update_group(group, group.get(member_id))
        return NONE

    def _remove_member(self, group: GroupMetadata, member: MemberMetadata) -> None:
        member.complete_join(JoinResult(int(_E.unknown_member_id), ""))
        member.complete_sync(SyncResult(int(_E.unknown_member_id)))
        self._cancel_heartbeat(member)
        group.remove(member.member_id)

    def _remove_member_and_update_group(self, group: GroupMetadata, member: MemberMetadata) -> None:
        self._remove_member(group, member)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, f"Removing member {member.member_id}")
        elif group.is_state(GroupState.PREPARING_REBALANCE):
            self._check_join(group)

    def _remove_pending_member(self, group: GroupMetadata, member_id: str) -> None:
        group.pending_members.discard(member_id)
        handle = group.pending_timers.pop(member_id, None)
        if handle is not None:
            handle.cancel()
        self._check_join(group)

    # --- session timers ---

    def _schedule_heartbeat(self, group: GroupMetadata, member: MemberMetadata,
                            timeout_ms: int | None = None) -> None:
        """(Re)start the member's session timer (Kafka's ``completeAndScheduleNextHeartbeatExpiration``),
        or a timer of ``timeout_ms``."""
        self._cancel_heartbeat(member)
        if not self._active:
            return
        timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms
        member.heartbeat_timer = timer.call_later(
            timeout / 1000, lambda: self._on_heartbeat_expired(group, member)
        )

    @staticmethod
    def _cancel_heartbeat(member: MemberMetadata) -> None:
        if member.heartbeat_timer is not None:
            member.heartbeat_timer.cancel()
            member.heartbeat_timer = None

    def _on_heartbeat_expired(self, group: GroupMetadata, member: MemberMetadata) -> None:
        member.heartbeat_timer = None
        if group.members.get(member.member_id) is not member:
            return
        if (member.is_awaiting_join or member.is_awaiting_sync) and not member.is_new:
            # a member parked in a rebalance is alive; the rebalance's own timers bound it -- except
            # a new one whose first join outlived NEW_MEMBER_JOIN_TIMEOUT_MS (Kafka's
            # hasSatisfiedHeartbeat): it goes, answered UNKNOWN_MEMBER_ID, and may join again
            self._schedule_heartbeat(group, member)
            return
        log.info(
            "Member %s in group %s has failed, removing it from the group (session timeout %d ms)",
            member.member_id,
            group.group_id,
            member.session_timeout_ms,
        )
        self._remove_member_and_update_group(group, member)

    def _schedule_pending_member(self, group: GroupMetadata, member_id: str, session_timeout_ms: int) -> None:
        def expire() -> None:
            group.pending_timers.pop(member_id, None)
            if member_id in group.pending_members:
                self._remove_pending_member(group, member_id)

        group.pending_timers[member_id] = timer.call_later(
            session_timeout_ms / 1000, expire
        )

    # --- OffsetCommit support (called by the offsets handlers) ---

    def validate_offset_commit(
        self, group_id: str, member_id: str, generation_id: int, group_instance_id: str | None,
        api_version: int = 0,
    ) -> int:
        """May this member commit offsets for this group now? (Kafka's ``validateOffsetCommit``.)
        A commit with generation -1 and no member id is a standalone commit: fine for an Empty or
        unknown group (which is then created Empty). A valid member's commit counts as a heartbeat."""
        error = self._validate(group_id, allow_empty=True)
        if error:
            return error
        group = self.groups.get(group_id)
        if group is None:
            if generation_id < 0:
                self.groups[group_id] = GroupMetadata(group_id)
                self.groups[group_id].offsets_committed = True
                return NONE
            # a member's commit to a group that does not exist: OffsetCommit v9+ says so
            return int(_E.group_id_not_found if api_version >= 9 else _E.illegal_generation)
        error = self._validate_commit_member(group, member_id, generation_id, group_instance_id)
        if error == NONE:
            group.offsets_committed = True
            if group.has(member_id):
                self._schedule_heartbeat(group, group.get(member_id))
        return error

    def validate_txn_offset_commit(
        self, group_id: str, member_id: str, generation_id: int, group_instance_id: str | None
    ) -> int:
        """May a transactional producer commit offsets for this group (Kafka's ``handleTxnCommitOffsets``
        and ``validateOffsetCommit`` with ``isTransactional``)? An unknown group is created Empty. The
        member and generation are checked when the producer names them (KIP-447: a consumer's group
        metadata sent along with the offsets) or the group has a generation; a rebalance in progress
        does not refuse them."""
        error = self._validate(group_id)
        if error:
            return error
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = GroupMetadata(group_id)
        error = self._validate_commit_member(group, member_id, generation_id, group_instance_id,
                                             transactional=True)
        if error == NONE:
            group.offsets_committed = True
        return error

    @staticmethod
    def _validate_current_member(group: GroupMetadata, member_id: str, group_instance_id: str | None) -> int:
        """Kafka's ``validateCurrentMember``: a static member's instance id must be known and mapped
        to this member id (else UNKNOWN_MEMBER_ID, or FENCED_INSTANCE_ID for another id); a dynamic
        member must be in the group."""
        if group_instance_id is not None:
            current = group.current_static_member_id(group_instance_id)
            if current is None:
                return int(_E.unknown_member_id)
            return NONE if current == member_id else int(_E.fenced_instance_id)
        return NONE if group.has(member_id) else int(_E.unknown_member_id)

    @classmethod
    def _validate_commit_member(
        cls, group: GroupMetadata, member_id: str, generation_id: int, group_instance_id: str | None,
        transactional: bool = False,
    ) -> int:
        """Kafka's ``validateOffsetCommit``; a plain commit is also refused while the group completes
        a rebalance (the assignment it would commit against is not out yet)."""
        if group.is_state(GroupState.DEAD):
            return int(_E.coordinator_not_available)
        if generation_id < 0 and group.is_state(GroupState.EMPTY):
            return NONE
        if generation_id >= 0 or member_id or group_instance_id is not None:
            error = cls._validate_current_member(group, member_id, group_instance_id)
            if error:
                return error
            if generation_id != group.generation_id:
                return int(_E.illegal_generation)
        elif not transactional and not group.is_state(GroupState.EMPTY):
            return int(_E.unknown_member_id)
        if not transactional and group.is_state(GroupState.COMPLETING_REBALANCE):
            return int(_E.rebalance_in_progress)
        return NONE

    def group_state(self, group_id: str) -> str | None:
        """Kafka's state name of the group, None when unknown."""
        self._ensure_loaded()
        group = self.groups.get(group_id)
        return None if group is None else group.state.value

    def subscribed_topics(self, group_id: str) -> frozenset[str] | None:
        """The topics a ``consumer`` group's members subscribe to (None: unknown or not readable)."""
        self._ensure_loaded()
        group = self.groups.get(group_id)
        return None if group is None else group.subscribed_topics()

    async def cleanup_group_metadata(self) -> int:
        """Kafka's ``cleanupGroupMetadata``, run every ``offsets.retention.check.interval.ms``: expired
        offsets become tombstones, then every Empty group left without offsets turns Dead and is
        forgotten, with a tombstone for its stored metadata. Returns how many offsets expired."""
        manager = self.manager
        if manager is None:
            return 0
        self._ensure_loaded()
        removed = int(await manager.cleanup_expired_offsets(self.group_state, self.subscribed_topics))
        for group_id, group in list(self.groups.items()):
            if not group.is_state(GroupState.EMPTY) or manager.has_offsets(group_id):
                continue
            log.info("Group %s transitioned to Dead in generation %d", group_id, group.generation_id)
            group.transition_to(GroupState.DEAD)
            self._cancel_group_timers(group)
            del self.groups[group_id]
            # a group that only ever stored offsets (generation 0) has no metadata record to delete
            if group.generation_id > 0 or manager.has_group(group_id):
                await manager.delete_group(group_id)
        return removed

    # --- DescribeGroups / ListGroups / DeleteGroups ---

    def describe_group(self, group_id: str) -> tuple[int, GroupSummary | None]:
        error = self._validate(group_id, allow_empty=True)
        if error:
            return error, None
        group = self.groups.get(group_id)
        if group is None or group.is_state(GroupState.DEAD):
            return NONE, None
        stable = group.is_state(GroupState.STABLE) and group.protocol_name is not None
        protocol = group.protocol_name if stable and group.protocol_name is not None else ""
        members = tuple(
            MemberSummary(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.metadata(protocol) if stable else b"",
                m.assignment if stable else b"",
            )
            for m in group
        )
        return NONE, GroupSummary(group_id, group.state.value, group.protocol_type or "", protocol, members)

    def list_groups(self) -> tuple[int, list[tuple[str, str, str]]]:
        """(error, [(group id, protocol type, state)]) of every live group."""
        if not self._active:
            return int(_E.coordinator_not_available), []
        self._ensure_loaded()
        listed = [
            (g.group_id, g.protocol_type or "", g.state.value)
            for g in self.groups.values()
            if not g.is_state(GroupState.DEAD)
        ]
        manager = self.manager
        if manager is not None:
            listed += [
                (group_id, "", GroupState.EMPTY.value)
                for group_id in sorted(manager.group_ids_with_offsets())
                if group_id not in self.groups
            ]
        return NONE, listed

    async def handle_delete_groups(self, group_ids: Iterable[str]) -> list[tuple[str, int]]:
        results = []
        # one result per group, however often it is named (Kafka's KafkaApis deduplicates)
        for group_id in dict.fromkeys(group_ids):
            results.append((group_id, await self._delete_group(group_id)))
        return results

    async def _delete_group(self, group_id: str) -> int:
        error = self._validate(group_id, allow_empty=True)
        if error:
            return error
        group = self.groups.get(group_id)
        manager = self.manager
        if group is None:
            if manager is not None and manager.has_offsets(group_id):
                return int(await manager.delete_group(group_id))
            return int(_E.group_id_not_found)
        if group.is_state(GroupState.DEAD):
            return int(_E.group_id_not_found)
        if not group.is_state(GroupState.EMPTY):
            return int(_E.non_empty_group)
        group.transition_to(GroupState.DEAD)
        self._cancel_group_timers(group)
        del self.groups[group_id]
        if manager is not None:
            return int(await manager.delete_group(group_id))
        return NONE
