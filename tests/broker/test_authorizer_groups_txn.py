"""Authorization of the consumer-group and transaction APIs (Kafka's ``KafkaApis`` handlers) with
``StandardAuthorizer``: real clients logged in over SASL as alice and bob, and raw requests for the
exact error codes — GROUP READ/DESCRIBE/DELETE, TRANSACTIONAL_ID WRITE/DESCRIBE, TOPIC
READ/WRITE/DESCRIBE, and the cluster's DESCRIBE, ALTER/CLUSTER_ACTION and IDEMPOTENT_WRITE."""

from __future__ import annotations

import datetime
import socket
from typing import Any

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka import errors as kafka_errors
from kafka.structs import OffsetAndMetadata
from kio.schema.errors import ErrorCode as E

from kafkalog.broker.acl import AclOperation
from kafkalog.broker.auth_helper import authorize_by_resource_type
from kafkalog.broker.embedded import Broker
from kafkalog.broker.request import RequestContext
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.protocol.headers import RequestHeader
from tests.broker import _raw
from tests.broker._authz import (
    ALICE,
    BOB,
    DENY,
    PREFIXED,
    SECOND,
    TIMEOUT_S,
    TX,
    C,
    G,
    Op,
    T,
    acl,
    authorizing_broker,
    call,
    confluent_config,
    grant,
    kafka_python_config,
    nested,
    req,
    sasl_socket,
)

SINGLE_PARTITIONS = {
    "num.partitions": "1",
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.num.partitions": "1",
}


@pytest.fixture
def broker(tmp_path):
    with authorizing_broker(tmp_path / "data", **SINGLE_PARTITIONS) as running:
        admin = AdminClient(confluent_config(running, "admin"))  # a super user: needs no ACL
        for future in admin.create_topics([NewTopic(t, 1) for t in ("t", "u")]).values():
            future.result(TIMEOUT_S)
        yield running


def commit_req(group: str, offsets: dict[tuple[str, int], int], version: int = 8) -> Any:
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), offset in offsets.items():
        by_topic.setdefault(topic, []).append(
            nested(
                ApiKey.OFFSET_COMMIT,
                version,
                "OffsetCommitRequestPartition",
                partition_index=partition,
                committed_offset=offset,
                committed_leader_epoch=-1,
                committed_metadata="",
            )
        )
    topics = tuple(
        nested(ApiKey.OFFSET_COMMIT, version, "OffsetCommitRequestTopic", name=t, partitions=tuple(ps))
        for t, ps in by_topic.items()
    )
    return req(
        ApiKey.OFFSET_COMMIT,
        version,
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        retention_time=datetime.timedelta(milliseconds=-1),  # v2-v4: the broker's retention
        topics=topics,
    )


def partition_errors(response: Any) -> dict[tuple[str, int], int]:
    return {
        (t.name, int(p.partition_index)): int(p.error_code) for t in response.topics for p in t.partitions
    }


def join_req(version: int, group: str) -> Any:
    protocol = nested(ApiKey.JOIN_GROUP, version, "JoinGroupRequestProtocol", name="range", metadata=b"m")
    return req(
        ApiKey.JOIN_GROUP,
        version,
        group_id=group,
        session_timeout=10 * SECOND,
        rebalance_timeout=10 * SECOND,
        member_id="",
        group_instance_id=None,
        protocol_type="consumer",
        protocols=(protocol,),
        reason=None,
    )


# -- consumer groups -------------------------------------------------------------------------------


def test_a_consumer_needs_read_on_its_group(broker):
    grant(broker, acl(T, "t", ALICE, Op.READ), acl(G, "g", ALICE, Op.DESCRIBE))
    producer = KafkaProducer(max_block_ms=10000, **kafka_python_config(broker, "admin"))
    producer.send("t", b"hello", partition=0).get(TIMEOUT_S)
    producer.close(TIMEOUT_S)

    def consume(user: str, group: str) -> list[bytes]:
        consumer = KafkaConsumer(
            "t",
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            consumer_timeout_ms=10000,
            **kafka_python_config(broker, user),
        )
        try:
            got: list[bytes] = []
            for _ in range(20):  # bounded: each poll waits at most 500 ms
                got += [r.value for rs in consumer.poll(500).values() for r in rs]
                if got:
                    consumer.commit()
                    return got
            return got
        finally:
            consumer.close()

    # DESCRIBE finds the coordinator; joining needs READ
    with pytest.raises(kafka_errors.GroupAuthorizationFailedError):
        consume("alice", "g")
    grant(broker, acl(T, "t", BOB, Op.READ))
    with pytest.raises(kafka_errors.GroupAuthorizationFailedError):
        consume("bob", "g")  # no ACL on the group: FindCoordinator already refuses
    grant(broker, acl(G, "g", ALICE, Op.READ))
    assert consume("alice", "g") == [b"hello"]
    assert consume("admin", "admins-group") == [b"hello"]  # a super user needs no ACL


def test_membership_apis_answer_group_authorization_failed(broker):
    grant(broker, acl(G, "g", BOB, Op.DESCRIBE))  # DESCRIBE is not READ
    heartbeat = req(ApiKey.HEARTBEAT, 4, group_id="g", generation_id=1, member_id="m", group_instance_id=None)
    sync = req(
        ApiKey.SYNC_GROUP,
        5,
        group_id="g",
        generation_id=1,
        member_id="m",
        group_instance_id=None,
        protocol_type="consumer",
        protocol_name="range",
        assignments=(),
    )
    leave_v0 = req(ApiKey.LEAVE_GROUP, 0, group_id="g", member_id="m")
    member = nested(
        ApiKey.LEAVE_GROUP, 5, "MemberIdentity", member_id="m", group_instance_id=None, reason=None
    )
    leave_v5 = req(ApiKey.LEAVE_GROUP, 5, group_id="g", members=(member,))
    responses = call(broker, "bob", join_req(9, "g"), join_req(5, "g"), join_req(0, "g"), sync, heartbeat)
    for response in responses:
        assert response.error_code == E.group_authorization_failed
    join9, join5 = responses[0], responses[1]
    assert (join9.generation_id, join9.member_id, join9.leader, join9.protocol_name) == (-1, "", "", None)
    assert join5.protocol_name == "" and join5.members == ()
    assert responses[3].assignment == b""
    left = call(broker, "bob", leave_v0, leave_v5)
    assert [r.error_code for r in left] == [E.group_authorization_failed] * 2
    assert left[1].members == ()

    # SyncGroup v5 without its mandatory protocol type: that is answered before authorization
    no_type = req(
        ApiKey.SYNC_GROUP,
        5,
        group_id="g",
        generation_id=1,
        member_id="m",
        group_instance_id=None,
        protocol_type=None,
        protocol_name="range",
        assignments=(),
    )
    assert call(broker, "bob", no_type)[0].error_code == E.inconsistent_group_protocol

    # with READ the coordinator answers: a new member id to join with
    grant(broker, acl(G, "g", BOB, Op.READ))
    assert call(broker, "bob", join_req(5, "g"))[0].error_code == E.member_id_required


def test_offset_commit_needs_read_on_the_group_then_on_each_topic(broker):
    grant(broker, acl(G, "g", ALICE, Op.READ), acl(T, "t", ALICE, Op.READ), acl(T, "u", ALICE, Op.DESCRIBE))
    offsets = {("t", 0): 5, ("u", 0): 6, ("ghost", 0): 7}
    # a topic not READ-able is refused before it is looked for: no hint that "ghost" does not exist
    (committed,) = call(broker, "alice", commit_req("g", offsets))
    assert partition_errors(committed) == {
        ("t", 0): E.none,
        ("u", 0): E.topic_authorization_failed,
        ("ghost", 0): E.topic_authorization_failed,
    }
    (refused,) = call(broker, "bob", commit_req("g", offsets, version=2))
    assert set(partition_errors(refused).values()) == {E.group_authorization_failed}

    # kafka-python's consumer reports the refused topic
    consumer = KafkaConsumer(group_id="g", enable_auto_commit=False, **kafka_python_config(broker, "alice"))
    try:
        with pytest.raises(kafka_errors.TopicAuthorizationFailedError):
            consumer.commit({TopicPartition("u", 0): OffsetAndMetadata(1, "", -1)})
        consumer.commit({TopicPartition("t", 0): OffsetAndMetadata(9, "", -1)})
        assert consumer.committed(TopicPartition("t", 0)) == 9
    finally:
        consumer.close()


def test_offset_fetch_shows_only_describable_groups_and_topics(broker):
    call(broker, "admin", commit_req("g", {("t", 0): 3, ("u", 0): 4}), commit_req("other", {("t", 0): 1}))
    grant(broker, acl(G, "g", ALICE, Op.DESCRIBE), acl(T, "t", ALICE, Op.DESCRIBE))

    def group(name: str, topics: list[str] | None) -> Any:
        return nested(
            ApiKey.OFFSET_FETCH,
            8,
            "OffsetFetchRequestGroup",
            group_id=name,
            topics=None
            if topics is None
            else tuple(
                nested(ApiKey.OFFSET_FETCH, 8, "OffsetFetchRequestTopics", name=t, partition_indexes=(0,))
                for t in topics
            ),
        )

    fetch_v8 = req(
        ApiKey.OFFSET_FETCH,
        8,
        groups=(group("g", None), group("g", ["u", "t"]), group("other", None)),
        require_stable=False,
    )
    every, asked, other = call(broker, "alice", fetch_v8)[0].groups
    # every partition: the topic alice may not describe is left out
    assert every.error_code == E.none
    assert [(t.name, [p.committed_offset for p in t.partitions]) for t in every.topics] == [("t", [3])]
    # asked for: the refused topic comes last, -1 with TOPIC_AUTHORIZATION_FAILED
    assert [(t.name, t.partitions[0].committed_offset, t.partitions[0].error_code) for t in asked.topics] == [
        ("t", 3, E.none),
        ("u", -1, E.topic_authorization_failed),
    ]
    assert (other.error_code, other.topics) == (E.group_authorization_failed, ())

    # before v8, one group: the group's error is the top-level one
    fetch_v5 = req(ApiKey.OFFSET_FETCH, 5, group_id="other", topics=None)
    (refused,) = call(broker, "alice", fetch_v5)
    assert (refused.error_code, refused.topics) == (E.group_authorization_failed, ())

    # kafka-python's admin (OffsetFetch of every partition) sees only what alice may describe
    admin = KafkaAdminClient(**kafka_python_config(broker, "alice"))
    try:
        offsets = admin.list_group_offsets({"g": None})["g"]
    finally:
        admin.close()
    assert {tp: o.offset for tp, o in offsets.items()} == {TopicPartition("t", 0): 3}


def test_list_groups_all_with_describe_on_the_cluster_else_the_describable(broker):
    call(broker, "admin", commit_req("g-a", {("t", 0): 1}), commit_req("g-b", {("t", 0): 2}))
    grant(broker, acl(G, "g-a", ALICE, Op.READ))  # READ implies DESCRIBE

    def listed(user: str) -> list[str]:
        (response,) = call(broker, user, req(ApiKey.LIST_GROUPS, 4, states_filter=()))
        assert response.error_code == E.none
        return sorted(g.group_id for g in response.groups)

    assert listed("alice") == ["g-a"]
    assert listed("bob") == []  # no error, just nothing to see
    assert listed("admin") == ["g-a", "g-b"]
    grant(broker, acl(C, "kafka-cluster", BOB, Op.DESCRIBE))
    assert listed("bob") == ["g-a", "g-b"]

    # confluent-kafka's admin lists the same
    alice = AdminClient(confluent_config(broker, "alice"))
    groups = alice.list_consumer_groups().result(TIMEOUT_S)
    assert [g.group_id for g in groups.valid] == ["g-a"]


def test_delete_groups_and_offsets_need_delete_on_the_group(broker):
    call(broker, "admin", *(commit_req(g, {("t", 0): 1, ("u", 0): 1}) for g in ("mine", "theirs", "off")))
    grant(
        broker, acl(G, "mine", ALICE, Op.DELETE), acl(G, "off", ALICE, Op.DELETE), acl(T, "t", ALICE, Op.READ)
    )

    (deleted,) = call(
        broker, "alice", req(ApiKey.DELETE_GROUPS, 2, groups_names=("theirs", "mine", "theirs"))
    )
    # each group once: the deleted first, then the refused
    assert [(r.group_id, r.error_code) for r in deleted.results] == [
        ("mine", E.none),
        ("theirs", E.group_authorization_failed),
    ]

    def offset_delete(group: str) -> Any:
        topics = tuple(
            nested(
                ApiKey.OFFSET_DELETE,
                0,
                "OffsetDeleteRequestTopic",
                name=t,
                partitions=(
                    nested(ApiKey.OFFSET_DELETE, 0, "OffsetDeleteRequestPartition", partition_index=0),
                ),
            )
            for t in ("t", "u")
        )
        return req(ApiKey.OFFSET_DELETE, 0, group_id=group, topics=topics)

    refused, done = call(broker, "alice", offset_delete("theirs"), offset_delete("off"))
    assert (refused.error_code, refused.topics) == (E.group_authorization_failed, ())
    assert done.error_code == E.none
    assert partition_errors(done) == {("t", 0): E.none, ("u", 0): E.topic_authorization_failed}

    # confluent-kafka's admin gets the same refusal
    alice = AdminClient(confluent_config(broker, "alice"))
    with pytest.raises(ck.KafkaException) as denied:
        alice.delete_consumer_groups(["theirs"])["theirs"].result(TIMEOUT_S)
    assert denied.value.args[0].code() == ck.KafkaError.GROUP_AUTHORIZATION_FAILED


def test_find_coordinator_needs_describe_on_the_group_or_transactional_id(broker):
    grant(broker, acl(G, "g", ALICE, Op.DESCRIBE), acl(TX, "tx", ALICE, Op.WRITE))  # WRITE implies DESCRIBE
    port = broker.server.bound_ports["SASL_PLAINTEXT"]
    group_v3, txn_v3, txn_v0 = call(
        broker,
        "bob",
        req(ApiKey.FIND_COORDINATOR, 3, key="g", key_type=0),
        req(ApiKey.FIND_COORDINATOR, 3, key="tx", key_type=1),
        req(ApiKey.FIND_COORDINATOR, 0, key="g"),
    )
    assert (group_v3.error_code, group_v3.error_message) == (
        E.group_authorization_failed,
        "Group authorization failed.",
    )
    assert (group_v3.node_id, group_v3.host, group_v3.port) == (-1, "", -1)
    assert (txn_v3.error_code, txn_v3.error_message) == (
        E.transactional_id_authorization_failed,
        "Transactional Id authorization failed.",
    )
    assert txn_v0.error_code == E.group_authorization_failed
    # a refused transactional id creates no __transaction_state
    assert not broker.server.log_manager.has_topic("__transaction_state")

    groups, txns = call(
        broker,
        "alice",
        req(ApiKey.FIND_COORDINATOR, 4, key_type=0, coordinator_keys=("g", "h")),
        req(ApiKey.FIND_COORDINATOR, 4, key_type=1, coordinator_keys=("nope", "tx")),
    )
    answers = [(c.key, c.error_code, c.port) for c in (*groups.coordinators, *txns.coordinators)]
    assert answers == [
        ("g", E.none, port),
        ("h", E.group_authorization_failed, -1),
        ("nope", E.transactional_id_authorization_failed, -1),
        ("tx", E.none, port),
    ]
    assert all(c.error_message is None for c in groups.coordinators if c.error_code)


# -- transactions ---------------------------------------------------------------------------------


def _txn_error(broker: Broker, user: str, transactional_id: str, topic: str) -> ck.KafkaError | None:
    """The error of a confluent-kafka transaction writing one record to ``topic``, or None."""
    producer = ck.Producer({**confluent_config(broker, user), "transactional.id": transactional_id})
    try:
        producer.init_transactions(TIMEOUT_S)
        producer.begin_transaction()
        producer.produce(topic, b"v", partition=0)
        producer.commit_transaction(TIMEOUT_S)
        return None
    except ck.KafkaException as e:  # a failed commit has purged what it held
        error: ck.KafkaError = e.args[0]
        return error


def test_transactional_producer_needs_write_on_its_transactional_id_and_topics(broker):
    grant(
        broker,
        acl(TX, "tx", ALICE, Op.DESCRIBE),  # finds its coordinator, but may not write
        acl(T, "t", ALICE, Op.WRITE),
        acl(T, "u", ALICE, Op.DESCRIBE),
    )
    denied = _txn_error(broker, "alice", "tx", "t")
    assert denied is not None and denied.code() == ck.KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert denied.fatal()

    grant(broker, acl(TX, "tx", ALICE, Op.WRITE))
    assert _txn_error(broker, "alice", "tx", "t") is None
    # a topic alice may describe but not write: AddPartitionsToTxn refuses it, the transaction aborts
    refused = _txn_error(broker, "alice", "tx", "u")
    assert refused is not None and refused.code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert refused.txn_requires_abort()
    assert _txn_error(broker, "admin", "admins-tx", "u") is None  # a super user needs no ACL


def _init_producer_id(sock: socket.socket, transactional_id: str | None) -> Any:
    return _raw.request(
        sock,
        req(
            ApiKey.INIT_PRODUCER_ID,
            4,
            transactional_id=transactional_id,
            transaction_timeout=60 * SECOND,
            producer_id=-1,
            producer_epoch=-1,
        ),
    )


def test_transaction_apis_answer_per_partition_in_kafkas_order(broker):
    grant(
        broker,
        acl(TX, "tx", ALICE, Op.WRITE),
        acl(T, "t", ALICE, Op.WRITE),
        acl(T, "t", ALICE, Op.READ),
        acl(G, "g", ALICE, Op.READ),
    )

    def add_partitions(transactional_id: str, producer: Any, topics: dict[str, tuple[int, ...]]) -> Any:
        return req(
            ApiKey.ADD_PARTITIONS_TO_TXN,
            3,
            v3_and_below_transactional_id=transactional_id,
            v3_and_below_producer_id=producer.producer_id,
            v3_and_below_producer_epoch=producer.producer_epoch,
            v3_and_below_topics=tuple(
                nested(ApiKey.ADD_PARTITIONS_TO_TXN, 3, "AddPartitionsToTxnTopic", name=t, partitions=ps)
                for t, ps in topics.items()
            ),
        )

    def txn_commit(transactional_id: str, group: str, producer: Any, topics: tuple[str, ...]) -> Any:
        return req(
            ApiKey.TXN_OFFSET_COMMIT,
            3,
            transactional_id=transactional_id,
            group_id=group,
            producer_id=producer.producer_id,
            producer_epoch=producer.producer_epoch,
            generation_id=-1,
            member_id="",
            group_instance_id=None,
            topics=tuple(
                nested(
                    ApiKey.TXN_OFFSET_COMMIT,
                    3,
                    "TxnOffsetCommitRequestTopic",
                    name=t,
                    partitions=(
                        nested(
                            ApiKey.TXN_OFFSET_COMMIT,
                            3,
                            "TxnOffsetCommitRequestPartition",
                            partition_index=0,
                            committed_offset=1,
                            committed_leader_epoch=-1,
                            committed_metadata="",
                        ),
                    ),
                )
                for t in topics
            ),
        )

    def add_offsets(transactional_id: str, group: str, producer: Any) -> Any:
        return req(
            ApiKey.ADD_OFFSETS_TO_TXN,
            3,
            transactional_id=transactional_id,
            producer_id=producer.producer_id,
            producer_epoch=producer.producer_epoch,
            group_id=group,
        )

    with sasl_socket(broker, "alice") as sock:
        refused = _init_producer_id(sock, "other")
        assert (refused.error_code, refused.producer_id, refused.producer_epoch) == (
            E.transactional_id_authorization_failed,
            -1,
            -1,
        )
        producer = _init_producer_id(sock, "tx")
        assert producer.error_code == E.none

        # AddPartitionsToTxn: the transactional id first, then each topic; one refusal fails all
        denied = _raw.request(sock, add_partitions("other", producer, {"t": (0,)}))
        assert partition_errors_v3(denied) == {("t", 0): E.transactional_id_authorization_failed}
        mixed = _raw.request(sock, add_partitions("tx", producer, {"t": (0,), "u": (0,), "ghost": (0,)}))
        assert partition_errors_v3(mixed) == {
            ("t", 0): E.operation_not_attempted,
            ("u", 0): E.topic_authorization_failed,
            ("ghost", 0): E.topic_authorization_failed,
        }
        assert partition_errors_v3(_raw.request(sock, add_partitions("tx", producer, {"t": (0,)}))) == {
            ("t", 0): E.none
        }

        # AddOffsetsToTxn: WRITE on the transactional id, then READ on the group
        assert _raw.request(sock, add_offsets("other", "g", producer)).error_code == (
            E.transactional_id_authorization_failed
        )
        assert _raw.request(sock, add_offsets("tx", "h", producer)).error_code == E.group_authorization_failed
        assert _raw.request(sock, add_offsets("tx", "g", producer)).error_code == E.none

        # TxnOffsetCommit: the transactional id, the group, then READ on each topic
        assert set(
            partition_errors(_raw.request(sock, txn_commit("other", "g", producer, ("t",)))).values()
        ) == {E.transactional_id_authorization_failed}
        assert set(
            partition_errors(_raw.request(sock, txn_commit("tx", "h", producer, ("t",)))).values()
        ) == {E.group_authorization_failed}
        assert partition_errors(_raw.request(sock, txn_commit("tx", "g", producer, ("t", "u")))) == {
            ("t", 0): E.none,
            ("u", 0): E.topic_authorization_failed,
        }

        # EndTxn: WRITE on the transactional id
        def end(transactional_id: str) -> Any:
            return req(
                ApiKey.END_TXN,
                3,
                transactional_id=transactional_id,
                producer_id=producer.producer_id,
                producer_epoch=producer.producer_epoch,
                committed=True,
            )

        assert _raw.request(sock, end("other")).error_code == E.transactional_id_authorization_failed
        assert _raw.request(sock, end("tx")).error_code == E.none


def partition_errors_v3(response: Any) -> dict[tuple[str, int], int]:
    return {
        (t.name, int(p.partition_index)): int(p.partition_error_code)
        for t in response.results_by_topic_v3_and_below
        for p in t.results_by_partition
    }


def test_internal_topics_are_never_added_by_add_partitions_to_txn(broker):
    with sasl_socket(broker, "admin") as sock:  # not even for a super user
        producer = _init_producer_id(sock, "admin-tx")
        topics = (
            nested(ApiKey.ADD_PARTITIONS_TO_TXN, 3, "AddPartitionsToTxnTopic", name="t", partitions=(0,)),
            nested(
                ApiKey.ADD_PARTITIONS_TO_TXN,
                3,
                "AddPartitionsToTxnTopic",
                name="__consumer_offsets",
                partitions=(0,),
            ),
        )
        response = _raw.request(
            sock,
            req(
                ApiKey.ADD_PARTITIONS_TO_TXN,
                3,
                v3_and_below_transactional_id="admin-tx",
                v3_and_below_producer_id=producer.producer_id,
                v3_and_below_producer_epoch=producer.producer_epoch,
                v3_and_below_topics=topics,
            ),
        )
    assert partition_errors_v3(response) == {
        ("t", 0): E.operation_not_attempted,
        ("__consumer_offsets", 0): E.topic_authorization_failed,
    }


def test_an_idempotent_producer_needs_idempotent_write_or_write_on_some_topic(broker):
    def init_error(user: str) -> int:
        with sasl_socket(broker, user) as sock:
            response = _init_producer_id(sock, None)
        assert (response.error_code == E.none) == (response.producer_id >= 0)
        return int(response.error_code)

    assert init_error("bob") == E.cluster_authorization_failed
    grant(broker, acl(T, "bob-", BOB, Op.WRITE, pattern=PREFIXED))  # any one topic will do
    assert init_error("bob") == E.none
    grant(broker, acl(T, "bob", BOB, Op.WRITE, DENY, pattern=PREFIXED))  # a DENY covering it all
    assert init_error("bob") == E.cluster_authorization_failed
    grant(broker, acl(C, "kafka-cluster", BOB, Op.IDEMPOTENT_WRITE))
    assert init_error("bob") == E.none
    assert init_error("admin") == E.none

    # confluent-kafka's idempotent producer: allowed by WRITE on the topic it writes
    grant(broker, acl(T, "t", ALICE, Op.WRITE))
    producer = ck.Producer({**confluent_config(broker, "alice"), "enable.idempotence": True})
    delivered: list[Any] = []
    producer.produce("t", b"once", partition=0, on_delivery=lambda error, _: delivered.append(error))
    assert producer.flush(TIMEOUT_S) == 0
    assert delivered == [None]


def _context(principal: str, host: str = "127.0.0.1") -> RequestContext:
    header = RequestHeader(ApiKey.INIT_PRODUCER_ID, 4, 1, "test", 2)
    return RequestContext(header, host, 50000, "conn", "SASL_PLAINTEXT", principal)


def test_authorize_by_resource_type_rules(broker):
    """Kafka's ``Authorizer.authorizeByResourceType``: some ALLOW for the operation on a name or
    prefix that no DENY covers."""
    apis = broker.server.apis

    def may(principal: str, operation: AclOperation = Op.WRITE, host: str = "127.0.0.1") -> bool:
        return authorize_by_resource_type(apis, _context(principal, host), operation, T)

    grant(
        broker,
        acl(T, "a", "User:c1", Op.WRITE),
        acl(T, "a", "User:c1", Op.WRITE, DENY),  # the same literal denied
        acl(T, "pre", "User:c2", Op.WRITE, pattern=PREFIXED),
        acl(T, "pre", "User:c2", Op.WRITE, DENY),  # a literal DENY does not cover a prefix
        acl(T, "x", "User:c3", Op.READ),  # READ is not WRITE
        acl(T, "x", "User:c4", Op.ALL, host="10.0.0.9"),  # ALL, from one host
        acl(T, "*", "User:c5", Op.WRITE),
        acl(T, "*", "User:c6", Op.WRITE),
        acl(T, "*", "User:c6", Op.WRITE, DENY),  # a wildcard DENY wins
        acl(T, "abc", "User:c7", Op.WRITE),
        acl(T, "ab", "User:c7", Op.WRITE, DENY, pattern=PREFIXED),  # a prefix of "abc" denied
        acl(T, "everyone", "User:*", Op.DELETE),
    )
    assert not may("User:c1")
    assert may("User:c2")
    assert not may("User:c3") and may("User:c3", Op.READ)
    assert may("User:c4", host="10.0.0.9") and not may("User:c4")
    assert may("User:c5")
    assert not may("User:c6")
    assert not may("User:c7")
    assert may("User:c1", Op.DELETE)  # by the ACL for every principal
    assert may("User:admin")  # a super user


def test_describe_and_list_transactions_show_only_what_may_be_described(broker):
    with sasl_socket(broker, "admin") as sock:  # an Ongoing transaction on t and u, and an idle one
        producer = _init_producer_id(sock, "tx-a")
        topics = tuple(
            nested(ApiKey.ADD_PARTITIONS_TO_TXN, 3, "AddPartitionsToTxnTopic", name=t, partitions=(0,))
            for t in ("t", "u")
        )
        added = _raw.request(
            sock,
            req(
                ApiKey.ADD_PARTITIONS_TO_TXN,
                3,
                v3_and_below_transactional_id="tx-a",
                v3_and_below_producer_id=producer.producer_id,
                v3_and_below_producer_epoch=producer.producer_epoch,
                v3_and_below_topics=topics,
            ),
        )
        assert set(partition_errors_v3(added).values()) == {E.none}
        assert _init_producer_id(sock, "tx-b").error_code == E.none
    grant(broker, acl(TX, "tx-a", ALICE, Op.DESCRIBE), acl(T, "t", ALICE, Op.DESCRIBE))

    described, listed = call(
        broker,
        "alice",
        req(ApiKey.DESCRIBE_TRANSACTIONS, 0, transactional_ids=("tx-a", "tx-b")),
        req(ApiKey.LIST_TRANSACTIONS, 1, state_filters=(), producer_id_filters=(), duration_filter=-1),
    )
    mine, theirs = described.transaction_states
    assert (mine.error_code, mine.transaction_state) == (E.none, "Ongoing")
    assert [(t.topic, t.partitions) for t in mine.topics] == [("t", (0,))]  # u is not describable
    assert (theirs.error_code, theirs.producer_id, theirs.topics) == (
        E.transactional_id_authorization_failed,
        0,
        (),
    )
    assert listed.error_code == E.none
    assert [s.transactional_id for s in listed.transaction_states] == ["tx-a"]
    (everything,) = call(
        broker,
        "admin",
        req(ApiKey.LIST_TRANSACTIONS, 1, state_filters=(), producer_id_filters=(), duration_filter=-1),
    )
    assert sorted(s.transactional_id for s in everything.transaction_states) == ["tx-a", "tx-b"]


def test_write_txn_markers_needs_alter_or_cluster_action_on_the_cluster(broker):
    def markers(user: str) -> list[int]:
        topic = nested(
            ApiKey.WRITE_TXN_MARKERS, 1, "WritableTxnMarkerTopic", name="ghost", partition_indexes=(0, 1)
        )
        marker = nested(
            ApiKey.WRITE_TXN_MARKERS,
            1,
            "WritableTxnMarker",
            producer_id=1000,
            producer_epoch=0,
            transaction_result=False,
            topics=(topic,),
            coordinator_epoch=0,
        )
        (response,) = call(broker, user, req(ApiKey.WRITE_TXN_MARKERS, 1, markers=(marker,)))
        return [int(p.error_code) for m in response.markers for t in m.topics for p in t.partitions]

    assert markers("alice") == [E.cluster_authorization_failed] * 2
    # past authorization the partitions are looked for: these do not exist
    assert markers("admin") == [E.unknown_topic_or_partition] * 2
    grant(broker, acl(C, "kafka-cluster", ALICE, Op.ALTER), acl(C, "kafka-cluster", BOB, Op.CLUSTER_ACTION))
    assert markers("alice") == [E.unknown_topic_or_partition] * 2
    assert markers("bob") == [E.unknown_topic_or_partition] * 2
