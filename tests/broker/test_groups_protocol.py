"""Group APIs over the wire, request by request (kio-encoded raw requests): every version the broker
advertises, and the error codes real clients react to."""

from __future__ import annotations

import datetime
import threading
from typing import Any

import pytest
from kio.schema.errors import ErrorCode as E

from kafkalog.broker.request import build, nested_type
from kafkalog.protocol.api_keys import ApiKey
from tests.broker import _raw

pytestmark = pytest.mark.kafkalog_broker_config(
    {
        "group.initial.rebalance.delay.ms": 0,
        "group.min.session.timeout.ms": 100,
        "offsets.topic.num.partitions": 1,
    }
)

SECOND = datetime.timedelta(seconds=1)


def req(api_key: int, version: int, **fields: Any) -> Any:
    cls, _ = _raw.request_class(api_key, version)
    return build(cls, **fields)


def join_req(
    version: int, group: str = "g", member_id: str = "", instance: str | None = None, **kw: Any
) -> Any:
    cls, _ = _raw.request_class(ApiKey.JOIN_GROUP, version)
    proto = nested_type(cls, "JoinGroupRequestProtocol")
    fields = dict(
        group_id=group,
        session_timeout=10 * SECOND,
        rebalance_timeout=10 * SECOND,
        member_id=member_id,
        group_instance_id=instance,
        protocol_type="consumer",
        protocols=(proto(name="range", metadata=b"meta-" + group.encode()),),
        reason=None,
    )
    fields.update(kw)
    return build(cls, **fields)


def sync_req(
    version: int, r: Any, group: str = "g", assignments: dict[str, bytes] | None = None, **kw: Any
) -> Any:
    cls, _ = _raw.request_class(ApiKey.SYNC_GROUP, version)
    item = nested_type(cls, "SyncGroupRequestAssignment")
    fields = dict(
        group_id=group,
        generation_id=r.generation_id,
        member_id=r.member_id,
        group_instance_id=None,
        protocol_type="consumer",
        protocol_name="range",
        assignments=tuple(item(member_id=m, assignment=a) for m, a in (assignments or {}).items()),
    )
    fields.update(kw)
    return build(cls, **fields)


def heartbeat(sock, version: int, group: str, generation: int, member_id: str) -> int:
    body = req(
        ApiKey.HEARTBEAT,
        version,
        group_id=group,
        generation_id=generation,
        member_id=member_id,
        group_instance_id=None,
    )
    return _raw.request(sock, body).error_code


def full_join(sock, version: int, group: str) -> Any:
    r = _raw.request(sock, join_req(version, group))
    if r.error_code == E.member_id_required:
        r = _raw.request(sock, join_req(version, group, r.member_id))
    assert r.error_code == E.none
    return r


@pytest.mark.parametrize("version", range(7))
def test_find_coordinator_answers_this_node(kafkalog_broker, version):
    host, port = kafkalog_broker.bootstrap_servers.rsplit(":", 1)
    with _raw.connect(kafkalog_broker.bootstrap_servers) as sock:
        if version >= 4:
            r = _raw.request(
                sock, req(ApiKey.FIND_COORDINATOR, version, key_type=0, coordinator_keys=("a", "b"))
            )
            assert [(c.key, c.node_id, c.host, c.port, c.error_code) for c in r.coordinators] == [
                (k, 1, host, int(port), E.none) for k in ("a", "b")
            ]
            r = _raw.request(
                sock, req(ApiKey.FIND_COORDINATOR, version, key_type=1, coordinator_keys=("tx",))
            )
            assert [(c.key, c.node_id, c.error_code) for c in r.coordinators] == [("tx", 1, E.none)]
        else:
            r = _raw.request(sock, req(ApiKey.FIND_COORDINATOR, version, key="grp", key_type=0))
            assert (r.error_code, r.node_id, r.host, r.port) == (E.none, 1, host, int(port))


@pytest.mark.parametrize("version", range(10))
def test_join_sync_heartbeat_leave_every_join_version(kafkalog_broker, version):
    group = f"g{version}"
    sync_v, hb_v, leave_v = min(version, 5), min(version, 4), min(version, 5)
    with _raw.connect(kafkalog_broker.bootstrap_servers) as sock:
        first = _raw.request(sock, join_req(version, group))
        if version >= 4:
            assert first.error_code == E.member_id_required and first.member_id.startswith("raw-")
        r = full_join(sock, version, group) if version >= 4 else first
        assert (r.generation_id, r.leader, r.protocol_name) == (1, r.member_id, "range")
        assert [(m.member_id, m.metadata) for m in r.members] == [(r.member_id, b"meta-" + group.encode())]
        s = _raw.request(sock, sync_req(sync_v, r, group, {r.member_id: b"ASSIGNMENT"}))
        assert (s.error_code, s.assignment) == (E.none, b"ASSIGNMENT")
        assert heartbeat(sock, hb_v, group, r.generation_id, r.member_id) == E.none
        assert heartbeat(sock, hb_v, group, r.generation_id + 1, r.member_id) == E.illegal_generation
        assert heartbeat(sock, hb_v, group, r.generation_id, "nobody") == E.unknown_member_id
        if leave_v >= 3:
            ident = nested_type(_raw.request_class(ApiKey.LEAVE_GROUP, leave_v)[0], "MemberIdentity")
            body = req(
                ApiKey.LEAVE_GROUP,
                leave_v,
                group_id=group,
                members=(
                    build(ident, member_id=r.member_id, group_instance_id=None, reason=None),
                    build(ident, member_id="ghost", group_instance_id=None, reason=None),
                ),
            )
            resp = _raw.request(sock, body)
            assert resp.error_code == E.none
            assert [(m.member_id, m.error_code) for m in resp.members] == [
                (r.member_id, E.none),
                ("ghost", E.unknown_member_id),
            ]
        else:
            body = req(ApiKey.LEAVE_GROUP, leave_v, group_id=group, member_id=r.member_id)
            assert _raw.request(sock, body).error_code == E.none
            assert _raw.request(sock, body).error_code == E.unknown_member_id
        assert heartbeat(sock, hb_v, group, r.generation_id, r.member_id) == E.unknown_member_id


def test_join_errors_on_the_wire(kafkalog_broker):
    with _raw.connect(kafkalog_broker.bootstrap_servers) as sock:
        assert _raw.request(sock, join_req(5, "e", session_timeout=SECOND / 100)).error_code == (
            E.invalid_session_timeout
        )
        assert _raw.request(sock, join_req(5, "")).error_code == E.invalid_group_id
        assert _raw.request(sock, join_req(5, "e", "made-up")).error_code == E.unknown_member_id
        r = full_join(sock, 5, "e")
        _raw.request(sock, sync_req(3, r, "e"))
        other = join_req(5, "e", protocol_type="connect")
        assert _raw.request(sock, other).error_code == E.inconsistent_group_protocol
        s = _raw.request(sock, sync_req(5, r, "e", protocol_name="roundrobin"))
        assert s.error_code == E.inconsistent_group_protocol
        s = _raw.request(sock, sync_req(5, r, "e", generation_id=9))
        assert s.error_code == E.illegal_generation


def test_second_member_triggers_rebalance_and_leader_gets_all_metadata(kafkalog_broker):
    bootstrap = kafkalog_broker.bootstrap_servers
    with _raw.connect(bootstrap) as a, _raw.connect(bootstrap) as b:
        ra = full_join(a, 7, "two")
        _raw.request(a, sync_req(5, ra, "two", {ra.member_id: b"all"}))
        first_b = _raw.request(b, join_req(7, "two"))
        results: dict[str, Any] = {}
        t = threading.Thread(
            target=lambda: results.setdefault("b", _raw.request(b, join_req(7, "two", first_b.member_id)))
        )
        t.start()
        for _ in range(100):  # until b's join has started the rebalance
            code = heartbeat(a, 4, "two", ra.generation_id, ra.member_id)
            if code == E.rebalance_in_progress:
                break
        assert code == E.rebalance_in_progress
        ra2 = _raw.request(a, join_req(7, "two", ra.member_id))
        t.join(10)
        rb = results["b"]
        assert ra2.generation_id == rb.generation_id == 2
        assert ra2.leader == rb.leader == ra.member_id
        assert (
            sorted(m.member_id for m in ra2.members) == sorted([ra.member_id, rb.member_id])
            and rb.members == ()
        )
        t = threading.Thread(target=lambda: results.setdefault("sb", _raw.request(b, sync_req(5, rb, "two"))))
        t.start()
        sa = _raw.request(a, sync_req(5, ra2, "two", {ra.member_id: b"A", rb.member_id: b"B"}))
        t.join(10)
        assert (sa.assignment, results["sb"].assignment) == (b"A", b"B")


def test_describe_list_delete_on_the_wire(kafkalog_broker):
    with _raw.connect(kafkalog_broker.bootstrap_servers) as sock:
        r = full_join(sock, 5, "d")
        _raw.request(sock, sync_req(3, r, "d", {r.member_id: b"asg"}))
        for version in range(7):
            resp = _raw.request(
                sock,
                req(
                    ApiKey.DESCRIBE_GROUPS,
                    version,
                    groups=("d", "missing"),
                    include_authorized_operations=False,
                ),
            )
            d, missing = resp.groups
            assert (d.error_code, d.group_state, d.protocol_type, d.protocol_data) == (
                0,
                "Stable",
                "consumer",
                "range",
            )
            (m,) = d.members
            assert (m.member_id, m.client_id, m.client_host, m.member_metadata, m.member_assignment) == (
                r.member_id,
                "raw",
                "/127.0.0.1",
                b"meta-d",
                b"asg",
            )
            expected = E.group_id_not_found if version >= 6 else E.none
            assert (missing.error_code, missing.group_state) == (expected, "Dead")
        for version in range(6):
            resp = _raw.request(sock, req(ApiKey.LIST_GROUPS, version, states_filter=(), types_filter=()))
            assert [(g.group_id, g.protocol_type) for g in resp.groups] == [("d", "consumer")]
            if version >= 4:
                assert resp.groups[0].group_state == "Stable"
                stable = _raw.request(
                    sock, req(ApiKey.LIST_GROUPS, version, states_filter=("stable",), types_filter=())
                )
                empty = _raw.request(
                    sock, req(ApiKey.LIST_GROUPS, version, states_filter=("Empty",), types_filter=())
                )
                assert (len(stable.groups), len(empty.groups)) == (1, 0)
            if version >= 5:
                assert resp.groups[0].group_type == "classic"
                other = _raw.request(
                    sock, req(ApiKey.LIST_GROUPS, version, states_filter=(), types_filter=("consumer",))
                )
                assert other.groups == ()
        delete = req(ApiKey.DELETE_GROUPS, 2, groups_names=("d", "missing"))
        assert [(x.group_id, x.error_code) for x in _raw.request(sock, delete).results] == [
            ("d", E.non_empty_group),
            ("missing", E.group_id_not_found),
        ]
        _raw.request(sock, req(ApiKey.LEAVE_GROUP, 0, group_id="d", member_id=r.member_id))
        for version in range(3):
            body = req(ApiKey.DELETE_GROUPS, version, groups_names=("d",))
            expected = E.none if version == 0 else E.group_id_not_found
            assert _raw.request(sock, body).results[0].error_code == expected


def test_group_survives_a_broker_restart(tmp_path):
    """The assignment stored in __consumer_offsets brings the group back Stable with its member."""
    from kafkalog.broker.embedded import Broker

    configs = {
        "group.initial.rebalance.delay.ms": 0,
        "group.min.session.timeout.ms": 100,
        "offsets.topic.num.partitions": 1,  # fewer partition directories: a faster restart
    }
    with Broker(tmp_path / "data", configs=configs) as broker, _raw.connect(broker.bootstrap_servers) as sock:
        r = full_join(sock, 5, "kept")
        assert _raw.request(sock, sync_req(3, r, "kept", {r.member_id: b"mine"})).error_code == E.none
    with Broker(tmp_path / "data", configs=configs) as broker, _raw.connect(broker.bootstrap_servers) as sock:
        body = req(ApiKey.DESCRIBE_GROUPS, 5, groups=("kept",), include_authorized_operations=False)
        (group,) = _raw.request(sock, body).groups
        assert (group.group_state, group.protocol_data) == ("Stable", "range")
        assert [(m.member_id, m.member_assignment) for m in group.members] == [(r.member_id, b"mine")]
        assert heartbeat(sock, 4, "kept", r.generation_id, r.member_id) == E.none
        s = _raw.request(sock, sync_req(5, r, "kept"))
        assert (s.error_code, s.assignment) == (E.none, b"mine")


def _subscription(topics: list[str]) -> bytes:
    from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription

    return ConsumerProtocolSubscription(version=0, topics=topics, user_data=None).encode(version=0)


def _offset_delete(sock, group: str, topic: str) -> tuple[int, list[int]]:
    cls, mod = _raw.request_class(ApiKey.OFFSET_DELETE, 0)
    body = cls(group_id=group, topics=(mod.OffsetDeleteRequestTopic(
        name=topic, partitions=(mod.OffsetDeleteRequestPartition(partition_index=0),)),))
    response = _raw.request(sock, body)
    return response.error_code, [p.error_code for t in response.topics for p in t.partitions]


def _create_topic(sock, topic: str) -> None:
    cls, mod = _raw.request_class(ApiKey.CREATE_TOPICS, 5)
    _raw.request(sock, cls(topics=(mod.CreatableTopic(name=topic, num_partitions=1, replication_factor=-1,
                                                      assignments=(), configs=()),),
                           timeout=10 * SECOND, validate_only=False))


@pytest.mark.kafkalog_broker_config({"group.initial.rebalance.delay.ms": 0})
def test_offset_delete_takes_the_generations_subscriptions(kafkalog_broker):
    """Kafka's isSubscribedToTopic: the topics the members subscribed to when the generation
    started (a member joining since with other protocols changes nothing, and crashed the request
    before), and every topic when a consumer group's subscriptions cannot be read."""
    with _raw.connect(kafkalog_broker.bootstrap_servers) as sock:
        _create_topic(sock, "od-t")
        # a consumer group whose member metadata is not a subscription (b"meta-odx")
        r = full_join(sock, 5, "odx")
        assert _raw.request(sock, sync_req(3, r, "odx", {r.member_id: b""})).error_code == E.none
        assert _offset_delete(sock, "odx", "od-t") == (E.none, [E.group_subscribed_to_topic])
        # a Stable group on "range", and a member joining with "roundrobin" only
        cls, _ = _raw.request_class(ApiKey.JOIN_GROUP, 5)
        proto = nested_type(cls, "JoinGroupRequestProtocol")
        both = (proto(name="range", metadata=_subscription(["od-t"])),
                proto(name="roundrobin", metadata=_subscription(["od-t"])))
        a = _raw.request(sock, join_req(5, "od2", protocols=both))
        a = _raw.request(sock, join_req(5, "od2", a.member_id, protocols=both))
        assert (a.error_code, a.protocol_name) == (E.none, "range")
        assert _raw.request(sock, sync_req(3, a, "od2", {a.member_id: b""})).error_code == E.none
        rr_only = (proto(name="roundrobin", metadata=_subscription(["other"])),)
        answers: list[Any] = []

        def newcomer() -> None:
            with _raw.connect(kafkalog_broker.bootstrap_servers) as other:
                first = _raw.request(other, join_req(5, "od2", protocols=rr_only))
                answers.append(_raw.request(other, join_req(5, "od2", first.member_id, protocols=rr_only)))

        thread = threading.Thread(target=newcomer)
        thread.start()
        try:
            for _ in range(100):  # until the newcomer has put the group into a rebalance
                if kafkalog_broker.server.apis.components["group_coordinator"].group_state("od2") != "Stable":
                    break
                threading.Event().wait(0.02)
            assert _offset_delete(sock, "od2", "od-t") == (E.none, [E.group_subscribed_to_topic])
            assert _offset_delete(sock, "od2", "other") == (E.none, [E.unknown_topic_or_partition])
            rejoined = _raw.request(sock, join_req(5, "od2", a.member_id, protocols=both))
            assert (rejoined.error_code, rejoined.protocol_name) == (E.none, "roundrobin")
        finally:
            thread.join(15)
        assert answers and answers[0].error_code == E.none


@pytest.mark.kafkalog_broker_config({"group.initial.rebalance.delay.ms": 0, "offset.metadata.max.bytes": 100})
def test_offset_commit_checks_the_group_before_the_metadata_size(kafkalog_broker):
    """Kafka validates the member first and measures metadata afterwards, in Java chars."""
    with _raw.connect(kafkalog_broker.bootstrap_servers) as sock:
        _create_topic(sock, "oc-t")
        r = full_join(sock, 5, "ocg")
        assert _raw.request(sock, sync_req(3, r, "ocg", {r.member_id: b""})).error_code == E.none
        cls, mod = _raw.request_class(ApiKey.OFFSET_COMMIT, 8)

        def commit(generation: int, metadata: str) -> int:
            body = cls(group_id="ocg", generation_id_or_member_epoch=generation, member_id=r.member_id,
                       group_instance_id=None, topics=(mod.OffsetCommitRequestTopic(name="oc-t", partitions=(
                           mod.OffsetCommitRequestPartition(partition_index=0, committed_offset=1,
                                                            committed_leader_epoch=-1,
                                                            committed_metadata=metadata),)),))
            return _raw.request(sock, body).topics[0].partitions[0].error_code

        assert commit(r.generation_id + 5, "x" * 101) == E.illegal_generation
        assert commit(r.generation_id, "x" * 101) == E.offset_metadata_too_large
        assert commit(r.generation_id, "é" * 60) == E.none  # 60 chars, 120 UTF-8 bytes
        assert commit(r.generation_id, "\U0001f600" * 51) == E.offset_metadata_too_large  # 102 UTF-16 units
