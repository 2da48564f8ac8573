"""GroupCoordinator on a real asyncio loop, without sockets: rebalances, timers, static members,
offset-commit validation and persistence through a fake GroupMetadataManager."""

from __future__ import annotations

import asyncio
from typing import Any

from kio.schema.errors import ErrorCode as E

from kafkalog.broker.group.group_coordinator import GroupConfig, GroupCoordinator
from kafkalog.protocol.group_metadata_records import GroupMetadataValue, MemberMetadataValue

PROTO = [("range", b"sub-range"), ("roundrobin", b"sub-rr")]
FAST = GroupConfig(min_session_timeout_ms=10, max_session_timeout_ms=60000, initial_rebalance_delay_ms=0)


def run(coro: Any, timeout: float = 10.0) -> Any:
    return asyncio.run(asyncio.wait_for(coro, timeout))


async def join(
    c: GroupCoordinator,
    member_id: str = "",
    group: str = "g",
    *,
    instance: str | None = None,
    protocols: list[tuple[str, bytes]] = PROTO,
    session_ms: int = 5000,
    rebalance_ms: int = 5000,
    protocol_type: str = "consumer",
    v4: bool = True,
    client_id: str = "cli",
) -> Any:
    return await c.handle_join_group(
        group,
        member_id,
        instance,
        v4,
        False,
        client_id,
        "/127.0.0.1",
        rebalance_ms,
        session_ms,
        protocol_type,
        protocols,
    )


async def join_new(c: GroupCoordinator, **kw: Any) -> Any:
    """A v4+ member's two-step join."""
    first = await join(c, **kw)
    if first.error != E.member_id_required:
        return first
    return await join(c, first.member_id, **kw)


async def sync(
    c: GroupCoordinator, r: Any, assignment: dict[str, bytes] | None = None, group: str = "g"
) -> Any:
    return await c.handle_sync_group(
        group, r.generation_id, r.member_id, None, None, None, list((assignment or {}).items())
    )


def test_single_member_join_sync_heartbeat_leave():
    async def main():
        c = GroupCoordinator(FAST)
        first = await join(c)
        assert first.error == E.member_id_required and first.member_id.startswith("cli-")
        r = await join(c, first.member_id)
        assert (r.error, r.generation_id, r.protocol_name, r.leader_id) == (0, 1, "range", r.member_id)
        assert r.members == ((r.member_id, None, b"sub-range"),)
        assert c.group_state("g") == "CompletingRebalance"
        s = await sync(c, r, {r.member_id: b"A"})
        assert (s.error, s.assignment, s.protocol_name) == (0, b"A", "range")
        assert c.group_state("g") == "Stable"
        assert c.handle_heartbeat("g", r.member_id, None, 1) == 0
        assert c.handle_heartbeat("g", r.member_id, None, 7) == E.illegal_generation
        assert c.handle_heartbeat("g", "nobody", None, 1) == E.unknown_member_id
        assert c.handle_heartbeat("nogroup", "x", None, 1) == E.unknown_member_id
        assert c.handle_heartbeat("", "x", None, 1) == E.invalid_group_id
        assert c.handle_leave_group("g", [(r.member_id, None)]) == (0, [0])
        await asyncio.sleep(0.05)
        assert c.group_state("g") == "Empty"
        assert c.groups["g"].generation_id == 2
        assert c.handle_heartbeat("g", r.member_id, None, 1) == E.unknown_member_id

    run(main())


def test_join_errors():
    async def main():
        c = GroupCoordinator(FAST)
        assert (await join(c, session_ms=5)).error == E.invalid_session_timeout
        assert (await join(c, session_ms=70000)).error == E.invalid_session_timeout
        assert (await join(c, "someone")).error == E.unknown_member_id  # unknown group with a member id
        assert (await join(c, group="")).error == E.invalid_group_id
        assert (await join(c, protocols=[])).error == E.inconsistent_group_protocol
        # the group the failed first join created stays, Empty, until the offsets cleanup (as Kafka's
        # getOrMaybeCreateGroup leaves it); a join naming a member of an unknown group creates none
        assert c.list_groups() == (0, [("g", "", "Empty")])
        r = await join_new(c)
        await sync(c, r, {r.member_id: b"x"})
        other = await join(c, protocol_type="connect")
        assert other.error == E.inconsistent_group_protocol
        other = await join(c, protocols=[("sticky", b"")])
        assert other.error == E.inconsistent_group_protocol
        assert (await join(c, "stranger")).error == E.unknown_member_id
        # v0-v3: no MEMBER_ID_REQUIRED round trip, but a rebalance the stable member must join
        task = asyncio.ensure_future(join(c, v4=False))
        await asyncio.sleep(0.05)
        assert c.group_state("g") == "PreparingRebalance"
        assert c.handle_heartbeat("g", r.member_id, None, 1) == E.rebalance_in_progress
        assert (await sync(c, r)).error == E.rebalance_in_progress
        again = await join(c, r.member_id)
        new = await task
        assert again.generation_id == new.generation_id == 2
        assert again.leader_id == r.member_id and len(again.members) == 2 and new.members == ()

    run(main())


def test_protocol_selection_by_votes_and_group_max_size():
    async def main():
        c = GroupCoordinator(GroupConfig(10, 60000, 0, max_size=3))
        prefs = [
            [("range", b"1"), ("roundrobin", b"1")],
            [("roundrobin", b"2"), ("range", b"2")],
            [("roundrobin", b"3"), ("sticky", b"3"), ("range", b"3")],
        ]
        ids = [(await join(c, protocols=p)).member_id for p in prefs]
        results = await asyncio.gather(*(join(c, i, protocols=p) for i, p in zip(ids, prefs, strict=True)))
        assert {r.protocol_name for r in results} == {"roundrobin"}
        leader = next(r for r in results if r.members)
        assert dict((m, md) for m, _, md in leader.members) == {ids[0]: b"1", ids[1]: b"2", ids[2]: b"3"}
        await asyncio.gather(*(sync(c, r) for r in results))
        assert (await join_new(c)).error == E.group_max_size_reached

    run(main())


def test_session_timeout_evicts_and_rebalances():
    async def main():
        c = GroupCoordinator(FAST)
        a = await join_new(c, session_ms=200)
        b_first = await join(c, session_ms=200)
        b_task = asyncio.ensure_future(join(c, b_first.member_id, session_ms=200))
        await asyncio.sleep(0.02)
        a2 = await join(c, a.member_id, session_ms=200)
        b = await b_task
        await asyncio.gather(sync(c, a2, {a.member_id: b"A", b.member_id: b"B"}), sync(c, b))
        # only a heartbeats; b's session ends
        for _ in range(8):
            await asyncio.sleep(0.05)
            c.handle_heartbeat("g", a.member_id, None, a2.generation_id)
        assert not c.groups["g"].has(b.member_id)
        assert c.handle_heartbeat("g", a.member_id, None, a2.generation_id) == E.rebalance_in_progress
        r = await join(c, a.member_id, session_ms=200)
        assert r.generation_id == 3 and [m for m, _, _ in r.members] == [a.member_id]

    run(main())


def test_rebalance_timeout_drops_members_that_do_not_rejoin():
    async def main():
        c = GroupCoordinator(FAST)
        a = await join_new(c, rebalance_ms=300, session_ms=5000)
        await sync(c, a)
        loop = asyncio.get_running_loop()
        start = loop.time()
        b = await join_new(c, rebalance_ms=300, session_ms=5000)  # a never rejoins
        assert 0.25 < loop.time() - start < 2
        assert b.error == 0 and b.generation_id == 2 and b.leader_id == b.member_id
        assert [m for m, _, _ in b.members] == [b.member_id]
        assert c.handle_heartbeat("g", a.member_id, None, a.generation_id) == E.unknown_member_id

    run(main())


def test_pending_sync_timeout_removes_members_that_never_sync():
    async def main():
        c = GroupCoordinator(FAST)
        a = await join_new(c, rebalance_ms=300, session_ms=5000)
        assert c.group_state("g") == "CompletingRebalance"
        await asyncio.sleep(0.5)  # a never syncs
        assert not c.groups["g"].has(a.member_id)
        assert c.group_state("g") == "Empty"

    run(main())


def test_follower_sync_waits_for_leader_and_leader_failure_is_bounded():
    async def main():
        c = GroupCoordinator(FAST)
        ids = [(await join(c)).member_id for _ in range(2)]
        r1, r2 = await asyncio.gather(join(c, ids[0]), join(c, ids[1]))
        leader, follower = (r1, r2) if r1.members else (r2, r1)
        follower_sync = asyncio.ensure_future(sync(c, follower))
        await asyncio.sleep(0.05)
        assert not follower_sync.done()
        s = await sync(c, leader, {leader.member_id: b"L", follower.member_id: b"F"})
        assert s.assignment == b"L" and (await follower_sync).assignment == b"F"
        # a new join during CompletingRebalance answers parked syncs with REBALANCE_IN_PROGRESS
        third = await join(c)
        t = asyncio.ensure_future(join(c, third.member_id))
        await asyncio.sleep(0.02)
        j1, j2 = await asyncio.gather(join(c, leader.member_id), join(c, follower.member_id))
        j3 = await t
        follower_j = next(j for j in (j1, j2, j3) if not j.members)
        parked = asyncio.ensure_future(sync(c, follower_j))
        await asyncio.sleep(0.02)
        c.handle_leave_group("g", [(j3.member_id, None)])
        assert (await parked).error == E.rebalance_in_progress

    run(main())


def test_static_member_rejoins_without_rebalance_and_old_id_is_fenced():
    async def main():
        c = GroupCoordinator(FAST)
        a = await join(c, instance="i-a", session_ms=3000)
        assert a.error == 0 and a.member_id.startswith("i-a-")  # static members need no member id round trip
        await sync(c, a, {a.member_id: b"A"})
        generation = c.groups["g"].generation_id
        again = await join(c, instance="i-a", session_ms=3000)
        assert again.error == 0 and again.member_id != a.member_id
        assert again.generation_id == generation and c.group_state("g") == "Stable"
        assert again.leader_id == a.member_id  # the old id: the returning leader just syncs
        s = await c.handle_sync_group("g", generation, again.member_id, "i-a", None, None, [])
        assert (s.error, s.assignment) == (0, b"A")
        assert c.handle_heartbeat("g", a.member_id, "i-a", generation) == E.fenced_instance_id
        assert c.validate_offset_commit("g", a.member_id, generation, "i-a") == E.fenced_instance_id
        assert c.validate_offset_commit("g", again.member_id, generation, "i-a") == 0
        # changed protocols: a rebalance after all
        changed = await join(c, instance="i-a", protocols=[("roundrobin", b"new")])
        assert changed.error == 0 and changed.generation_id == generation + 1
        # LeaveGroup v3+ by instance id
        assert c.handle_leave_group("g", [("", "i-a"), ("", "i-missing")]) == (
            0,
            [0, E.unknown_member_id],
        )

    run(main())


def test_static_member_absent_from_join_is_kept_until_session_expiry():
    async def main():
        c = GroupCoordinator(FAST)
        s = await join(c, instance="static", session_ms=400, rebalance_ms=100)
        await sync(c, s)
        d = await join_new(c, session_ms=5000, rebalance_ms=100)  # s never rejoins
        assert d.generation_id == 2 and len(d.members) == 2
        assert c.groups["g"].has(s.member_id)
        await sync(c, d)
        for _ in range(10):
            await asyncio.sleep(0.05)
            c.handle_heartbeat("g", d.member_id, None, 2)
        assert not c.groups["g"].has(s.member_id)  # its session ended

    run(main())


def test_validate_offset_commit_rules():
    async def main():
        c = GroupCoordinator(FAST)
        assert c.validate_offset_commit("simple", "", -1, None) == 0
        assert c.group_state("simple") == "Empty"
        assert c.validate_offset_commit("unknown", "m", 3, None) == E.illegal_generation
        r = await join_new(c)
        assert c.validate_offset_commit("g", r.member_id, 1, None) == E.rebalance_in_progress
        await sync(c, r)
        assert c.validate_offset_commit("g", r.member_id, 1, None) == 0
        assert c.validate_offset_commit("g", r.member_id, 0, None) == E.illegal_generation
        assert c.validate_offset_commit("g", "ghost", 1, None) == E.unknown_member_id
        assert c.validate_offset_commit("g", "", -1, None) == E.unknown_member_id
        assert c.validate_offset_commit("g", "x", 1, "no-such-instance") == E.unknown_member_id

    run(main())


def test_offset_commit_to_an_unknown_group_by_version():
    c = GroupCoordinator(FAST)
    assert c.validate_offset_commit("nope", "m-1", 3, None, 8) == E.illegal_generation
    assert c.validate_offset_commit("nope", "m-1", 3, None, 9) == E.group_id_not_found
    assert c.validate_offset_commit("nope", "", -1, None, 9) == E.none  # standalone: creates it



def test_describe_list_delete():
    async def main():
        c = GroupCoordinator(FAST)
        r = await join_new(c, client_id="me")
        await sync(c, r, {r.member_id: b"assigned"})
        c.validate_offset_commit("simple", "", -1, None)
        _, summary = c.describe_group("g")
        assert (summary.state, summary.protocol_type, summary.protocol) == ("Stable", "consumer", "range")
        m = summary.members[0]
        assert (m.client_id, m.client_host, m.metadata, m.assignment) == (
            "me",
            "/127.0.0.1",
            b"sub-range",
            b"assigned",
        )
        assert c.describe_group("nope") == (0, None)
        assert sorted(c.list_groups()[1]) == [("g", "consumer", "Stable"), ("simple", "", "Empty")]
        results = dict(await c.handle_delete_groups(["g", "simple", "nope"]))
        assert results == {"g": E.non_empty_group, "simple": 0, "nope": E.group_id_not_found}
        c.handle_leave_group("g", [(r.member_id, None)])
        await asyncio.sleep(0.02)
        assert await c.handle_delete_groups(["g", "g"]) == [("g", 0)]  # one result per name
        assert c.list_groups() == (0, [])

    run(main())


def test_shutdown_answers_parked_joins():
    async def main():
        c = GroupCoordinator(FAST)
        r = await join_new(c)
        await sync(c, r)
        parked = asyncio.ensure_future(join_new(c))
        await asyncio.sleep(0.02)
        c.shutdown()
        assert (await parked).error == E.not_coordinator

    run(main())


# --- persistence through the GroupMetadataManager interface (a fake manager; the real one is tested
# in test_consumer_offsets.py and end to end by the client tests) ---


_MemberValue = MemberMetadataValue
_GroupValue = GroupMetadataValue


class FakeManager:
    def __init__(self, loaded: dict[str, Any] | None = None, offsets: set[str] | None = None) -> None:
        self.stored: list[tuple[str, Any]] = []
        self.deleted: list[str] = []
        self.loaded = loaded or {}
        self.offsets = offsets or set()
        self.fail_with = 0
        self.loads = 0

    async def store_group(self, group_id: str, value: Any) -> int:
        await asyncio.sleep(0)
        if self.fail_with:
            return self.fail_with
        self.stored.append((group_id, value))
        return 0

    async def delete_group(self, group_id: str) -> int:
        self.deleted.append(group_id)
        self.offsets.discard(group_id)
        return 0

    def load(self) -> dict[str, Any]:
        self.loads += 1
        return self.loaded

    def has_offsets(self, group_id: str) -> bool:
        return group_id in self.offsets

    def group_ids_with_offsets(self) -> set[str]:
        return set(self.offsets)


def test_assignment_is_stored_before_sync_answers():
    async def main():
        manager = FakeManager()
        c = GroupCoordinator(FAST, {"group_metadata_manager": manager})
        r = await join_new(c, instance="inst", client_id="cid")
        s = await sync(c, r, {r.member_id: b"ASSIGN"})
        assert s.error == 0
        group_id, value = manager.stored[-1]
        assert (group_id, value.protocol_type, value.generation, value.protocol, value.leader) == (
            "g",
            "consumer",
            1,
            "range",
            r.member_id,
        )
        (m,) = value.members
        assert (m.member_id, m.group_instance_id, m.client_id, m.subscription, m.assignment) == (
            r.member_id,
            "inst",
            "cid",
            b"sub-range",
            b"ASSIGN",
        )
        # a failed store fails the sync and restarts the rebalance
        manager.fail_with = int(E.not_coordinator)
        again = await join(c, r.member_id, instance="inst", protocols=[("range", b"changed")])
        assert (await sync(c, again, {r.member_id: b"x"})).error == E.not_coordinator
        assert c.group_state("g") == "PreparingRebalance"

    run(main())


def test_groups_are_loaded_once_and_offsets_only_groups_listed():
    async def main():
        member = _MemberValue("m-1", None, "cid", "/10.0.0.1", 300000, 10000, b"sub", b"asg")
        loaded = {
            "stable": _GroupValue("consumer", 5, "range", "m-1", 1234, (member,)),
            "empty": _GroupValue("consumer", 2, None, None, 99, ()),
        }
        manager = FakeManager(loaded, offsets={"stable", "only-offsets"})
        c = GroupCoordinator(FAST, {"group_metadata_manager": manager})
        c.startup()
        assert c.group_state("stable") == "Stable" and c.group_state("empty") == "Empty"
        assert c.group_state("only-offsets") == "Empty"
        assert c.handle_heartbeat("stable", "m-1", None, 5) == 0
        _, summary = c.describe_group("stable")
        assert summary.members[0].assignment == b"asg" and summary.protocol == "range"
        s = await c.handle_sync_group("stable", 5, "m-1", None, None, None, [])
        assert s.assignment == b"asg"
        assert dict(await c.handle_delete_groups(["only-offsets"])) == {"only-offsets": 0}
        assert manager.deleted == ["only-offsets"]
        assert manager.loads == 1

    run(main())


def test_initial_delay_is_whole_and_extended_for_a_group_rejoining_from_empty():
    """Kafka's InitialDelayedJoin: a rebalance out of Empty waits the whole
    group.initial.rebalance.delay.ms (even past the rebalance timeout), and every joiner within
    it extends the wait -- also for a group that has had generations before, so members restarted
    together land in one generation."""
    config = GroupConfig(min_session_timeout_ms=10, max_session_timeout_ms=60000,
                         initial_rebalance_delay_ms=300)

    async def main():
        c = GroupCoordinator(config)
        loop = asyncio.get_running_loop()
        started = loop.time()
        a = await join_new(c, rebalance_ms=100)  # the delay (300 ms) outlasts the rebalance timeout
        assert loop.time() - started >= 0.28 and a.generation_id == 1
        await sync(c, a, {a.member_id: b"A"})
        assert c.handle_leave_group("g", [(a.member_id, None)])[0] == E.none
        await asyncio.sleep(0.3)  # the leave's rebalance ends with no member: Empty
        assert c.group_state("g") == "Empty"
        # three members restarted 200 ms apart: each extends the wait, one generation for all
        tasks = []
        for _ in range(3):
            tasks.append(asyncio.ensure_future(join_new(c, rebalance_ms=5000)))
            await asyncio.sleep(0.2)
        results = await asyncio.gather(*tasks)
        assert len({r.generation_id for r in results}) == 1
        leader = next(r for r in results if r.members)
        assert len(leader.members) == 3

    run(main())


def test_a_new_member_whose_join_waits_too_long_is_removed():
    """Kafka's NewMemberJoinTimeoutMs: a new member parked in a rebalance that outlasts it is removed
    and answered UNKNOWN_MEMBER_ID (it may join again); members that had joined before are not."""
    config = GroupConfig(min_session_timeout_ms=10, max_session_timeout_ms=60000,
                         initial_rebalance_delay_ms=0,
                         new_member_join_timeout_ms=200)

    async def main():
        c = GroupCoordinator(config)
        loop = asyncio.get_running_loop()
        a = await join_new(c, rebalance_ms=5000, session_ms=5000)
        await sync(c, a, {a.member_id: b"A"})
        first = await join(c, rebalance_ms=5000, session_ms=5000)
        assert first.error == E.member_id_required
        started = loop.time()
        # a's rejoin is awaited for up to its rebalance timeout; the newcomer's join times out first
        b = await join(c, first.member_id, rebalance_ms=5000, session_ms=5000)
        assert b.error == E.unknown_member_id and 0.15 <= loop.time() - started < 2
        assert first.member_id not in c.groups["g"].members and a.member_id in c.groups["g"].members
        assert c.group_state("g") == "PreparingRebalance"
        again = await join(c, a.member_id, rebalance_ms=5000, session_ms=5000)  # a rejoins: done
        assert again.error == 0 and again.members == ((a.member_id, None, b"sub-range"),)

    run(main())


def test_a_member_refused_for_the_group_size_does_not_hold_the_next_rebalance():
    """Kafka removes the member it refuses with GROUP_MAX_SIZE_REACHED (a pending one too) and
    answers without a member id: the next rebalance does not wait out its rebalance timeout."""
    async def main():
        c = GroupCoordinator(GroupConfig(10, 60000, 0, max_size=1))
        a_first = await join(c, rebalance_ms=8000)
        c_first = await join(c, rebalance_ms=8000)
        parked = asyncio.ensure_future(join(c, a_first.member_id, rebalance_ms=8000))
        await asyncio.sleep(0.05)
        refused = await join(c, c_first.member_id, rebalance_ms=8000)
        assert (refused.error, refused.member_id) == (E.group_max_size_reached, "")
        assert c_first.member_id not in c.groups["g"].pending_members
        a = await parked
        await sync(c, a, {a.member_id: b"A"})
        started = asyncio.get_running_loop().time()
        again = await join(c, a.member_id, rebalance_ms=8000)  # the leader's rejoin: a new generation
        assert again.generation_id == 2
        assert asyncio.get_running_loop().time() - started < 1.0

    run(main(), timeout=20)


def test_an_instance_id_not_mapped_to_a_member_is_an_unknown_member():
    """Kafka's validateCurrentMember: a group_instance_id must be known and mapped to the member id."""
    async def main():
        c = GroupCoordinator(FAST)
        r = await join_new(c)
        await sync(c, r, {r.member_id: b"A"})
        assert c.handle_heartbeat("g", r.member_id, "ghost", r.generation_id) == E.unknown_member_id
        s = await c.handle_sync_group("g", r.generation_id, r.member_id, "ghost", None, None, [])
        assert s.error == E.unknown_member_id
        j = await join(c, r.member_id, instance="ghost")
        assert j.error == E.unknown_member_id and c.groups["g"].generation_id == 1  # no rebalance
        assert c.validate_txn_offset_commit("g", r.member_id, r.generation_id, "ghost") == E.unknown_member_id
        assert c.validate_txn_offset_commit("g", r.member_id, r.generation_id, None) == 0

    run(main())


def test_transactional_commits_are_checked_as_kafkas_validate_offset_commit():
    async def main():
        c = GroupCoordinator(FAST)
        # generation -1 on an Empty (new) group: accepted whatever member id is named
        assert c.validate_txn_offset_commit("new1", "m1", -1, None) == 0
        # a generation named: the member must be current
        assert c.validate_txn_offset_commit("new2", "", 0, None) == E.unknown_member_id
        r = await join_new(c)
        await sync(c, r, {r.member_id: b"A"})
        # an anonymous transactional commit is not refused by a group with members (KIP-447's older
        # producers send no group metadata), unlike a plain commit
        assert c.validate_txn_offset_commit("g", "", -1, None) == 0
        assert c.validate_offset_commit("g", "", -1, None) == E.unknown_member_id

    run(main())


def test_a_parked_join_of_a_member_that_left_gets_no_member_id():
    async def main():
        c = GroupCoordinator(FAST)
        a = await join_new(c)
        await sync(c, a, {a.member_id: b"A"})
        b_first = await join(c)
        parked = asyncio.ensure_future(join(c, b_first.member_id))
        await asyncio.sleep(0.05)
        assert c.handle_leave_group("g", [(b_first.member_id, None)]) == (0, [0])
        left = await parked
        assert (left.error, left.member_id) == (E.unknown_member_id, "")

    run(main())
