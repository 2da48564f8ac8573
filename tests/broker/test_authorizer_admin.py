"""Authorization of the admin APIs with ``StandardAuthorizer``, as Kafka 4 has it (``KafkaApis``, and
``ControllerApis`` for what a broker forwards to its controller): topics created, deleted and grown,
configs described and altered, the cluster-wide APIs (log dirs, leader elections, reassignments,
config resources, SCRAM users) and DescribeCluster's authorized operations. Real admin clients
logged in over SASL as alice and bob, and raw requests for the exact codes and messages."""

from __future__ import annotations

import datetime
import os
import uuid
from typing import Any

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from kafka import KafkaAdminClient
from kafka import errors as kafka_errors
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType as KpConfigResourceType
from kafka.admin import NewPartitions as KpNewPartitions
from kio.schema.errors import ErrorCode as E

from kafkalog.broker.acl import AclOperation
from kafkalog.broker.embedded import Broker
from kafkalog.broker.features import METADATA_VERSION_LEVEL
from kafkalog.protocol.api_keys import ApiKey
from tests.broker import _raw
from tests.broker._authz import (
    ALICE,
    BOB,
    PREFIXED,
    TIMEOUT_S,
    C,
    Op,
    T,
    acl,
    authorizing_broker,
    call,
    confluent_config,
    grant,
    has_topic,
    kafka_python_config,
    nested,
    req,
    topic_id,
)

TIMEOUT = datetime.timedelta(seconds=TIMEOUT_S)
# Config resource types (Kafka's ConfigResource.Type ids).
TOPIC_CONFIGS, BROKER_CONFIGS, LOGGER_CONFIGS = 2, 4, 8
SET = 0  # IncrementalAlterConfigs' operation


@pytest.fixture
def broker(tmp_path):
    with authorizing_broker(tmp_path / "data", **{"num.partitions": "1"}) as running:
        admin = AdminClient(confluent_config(running, "admin"))  # a super user: needs no ACL
        for future in admin.create_topics([NewTopic(t, 1) for t in ("t", "u")]).values():
            future.result(TIMEOUT_S)
        yield running


def node(broker: Broker) -> str:
    return str(broker.server.apis.node_id)


def partitions(broker: Broker, topic: str) -> int:
    return len(broker.server.log_manager.partitions(topic))


def ck_error(future: Any) -> Any:
    """The KafkaError a confluent-kafka future fails with."""
    with pytest.raises(ck.KafkaException) as failure:
        future.result(TIMEOUT_S)
    return failure.value.args[0]


def kp_admin(broker: Broker, user: str) -> KafkaAdminClient:
    return KafkaAdminClient(request_timeout_ms=TIMEOUT_S * 1000, **kafka_python_config(broker, user))


# -- topics ----------------------------------------------------------------------------------------


def create_req(*names: str, validate_only: bool = False, version: int = 7) -> Any:
    topics = tuple(
        nested(
            ApiKey.CREATE_TOPICS,
            version,
            "CreatableTopic",
            name=n,
            num_partitions=1,
            replication_factor=-1,
            assignments=(),
            configs=(),
        )
        for n in names
    )
    return req(ApiKey.CREATE_TOPICS, version, topics=topics, timeout=TIMEOUT, validate_only=validate_only)


def test_creating_a_topic_needs_create_on_the_cluster_or_on_the_topic(broker):
    ck_alice = AdminClient(confluent_config(broker, "alice"))
    assert ck_error(ck_alice.create_topics([NewTopic("a1", 1)])["a1"]).code() == (
        ck.KafkaError.TOPIC_AUTHORIZATION_FAILED
    )
    # An existing topic looks no different; the refused come after the rest, the metadata log's name
    # is refused whoever asks, and nothing was created.
    (response,) = call(broker, "alice", create_req("t", "a1", "__cluster_metadata"))
    assert [(r.name, r.error_code, r.error_message) for r in response.topics] == [
        (
            "__cluster_metadata",
            E.invalid_request,
            "Creation of internal topic __cluster_metadata is prohibited.",
        ),
        ("t", E.topic_authorization_failed, "Authorization failed."),
        ("a1", E.topic_authorization_failed, "Authorization failed."),
    ]
    assert not has_topic(broker, "a1")
    # The PLAINTEXT listener's clients are User:ANONYMOUS, who has no ACL either.
    with _raw.connect(f"127.0.0.1:{broker.server.bound_ports['PLAINTEXT']}") as sock:
        (anonymous,) = _raw.request(sock, create_req("a1")).topics
    assert anonymous.error_code == E.topic_authorization_failed

    grant(broker, acl(C, "kafka-cluster", ALICE, Op.CREATE))
    assert ck_alice.create_topics([NewTopic("a1", 1)])["a1"].result(TIMEOUT_S) is None

    # bob may create the topics named bob-*: with kafka-python, and the others are refused.
    grant(broker, acl(T, "bob-", BOB, Op.CREATE, pattern=PREFIXED))
    kp_bob = kp_admin(broker, "bob")
    try:
        kp_bob.create_topics({"bob-1": {"num_partitions": 2, "replication_factor": 1}})
        with pytest.raises(kafka_errors.TopicAuthorizationFailedError):
            kp_bob.create_topics({"other": {"num_partitions": 1}})
    finally:
        kp_bob.close()
    assert partitions(broker, "bob-1") == 2
    assert not has_topic(broker, "other")


def test_a_created_topics_configs_come_back_with_describe_configs_only(broker):
    grant(broker, acl(T, "bob-", BOB, Op.CREATE, pattern=PREFIXED))
    (hidden,) = call(broker, "bob", create_req("bob-1")).pop().topics
    assert (hidden.error_code, hidden.topic_config_error_code) == (E.none, E.topic_authorization_failed)
    assert (hidden.num_partitions, hidden.replication_factor, hidden.configs) == (-1, -1, ())
    assert hidden.topic_id == topic_id(broker, "bob-1")  # created all the same

    grant(broker, acl(T, "bob-", BOB, Op.DESCRIBE_CONFIGS, pattern=PREFIXED))
    for validate_only in (True, False):
        (shown,) = call(broker, "bob", create_req("bob-2", validate_only=validate_only)).pop().topics
        assert (shown.error_code, shown.topic_config_error_code) == (E.none, E.none)
        assert (shown.num_partitions, shown.replication_factor) == (1, 1)
        assert "retention.ms" in {c.name for c in shown.configs}


def delete_req(*names: str) -> Any:
    return req(ApiKey.DELETE_TOPICS, 5, topic_names=names, timeout=TIMEOUT)


def delete_by_id_req(*ids: uuid.UUID) -> Any:
    states = tuple(nested(ApiKey.DELETE_TOPICS, 6, "DeleteTopicState", name=None, topic_id=i) for i in ids)
    return req(ApiKey.DELETE_TOPICS, 6, topics=states, timeout=TIMEOUT)


def deleted(response: Any) -> list[tuple[Any, int]]:
    return [(r.name, r.error_code) for r in response.responses]


def test_deleting_a_topic_needs_delete_and_does_not_reveal_what_exists(broker):
    t_id, u_id = topic_id(broker, "t"), topic_id(broker, "u")
    # Without DESCRIBE, an existing topic and a missing one get the same answer.
    (response,) = call(broker, "alice", delete_req("t", "nope"))
    assert deleted(response) == [("t", E.topic_authorization_failed), ("nope", E.topic_authorization_failed)]
    assert {r.error_message for r in response.responses} == {"Topic authorization failed."}
    grant(broker, acl(T, "nope", ALICE, Op.DESCRIBE), acl(T, "t", ALICE, Op.DESCRIBE))
    (response,) = call(broker, "alice", delete_req("t", "nope"))
    assert deleted(response) == [("t", E.topic_authorization_failed), ("nope", E.unknown_topic_or_partition)]
    # By id: the id is no secret, the name is shown only to whom may describe the topic.
    (response,) = call(broker, "alice", delete_by_id_req(t_id, u_id, uuid.uuid4()))
    assert deleted(response) == [
        ("t", E.topic_authorization_failed),
        (None, E.topic_authorization_failed),
        (None, E.unknown_topic_id),
    ]
    assert has_topic(broker, "t") and has_topic(broker, "u")

    ck_alice = AdminClient(confluent_config(broker, "alice"))
    refused = ck_error(ck_alice.delete_topics(["u"], operation_timeout=TIMEOUT_S)["u"])
    assert refused.code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED
    grant(broker, acl(T, "t", ALICE, Op.DELETE))
    kp_alice = kp_admin(broker, "alice")
    try:
        kp_alice.delete_topics(["t"])
        with pytest.raises(kafka_errors.TopicAuthorizationFailedError):
            kp_alice.delete_topics(["u"])
    finally:
        kp_alice.close()
    assert not has_topic(broker, "t")

    # DELETE on the cluster covers every topic, by name or id.
    grant(broker, acl(C, "kafka-cluster", BOB, Op.DELETE))
    (by_id, by_name) = call(broker, "bob", delete_by_id_req(u_id), delete_req("nope"))
    assert deleted(by_id) == [("u", E.none)]
    assert deleted(by_name) == [("nope", E.unknown_topic_or_partition)]


def test_growing_a_topic_needs_alter_on_it(broker):
    ck_alice = AdminClient(confluent_config(broker, "alice"))
    refused = ck_error(ck_alice.create_partitions([NewPartitions("t", 2)])["t"])
    assert refused.code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED
    grant(broker, acl(T, "t", ALICE, Op.ALTER))
    topics = tuple(
        nested(ApiKey.CREATE_PARTITIONS, 3, "CreatePartitionsTopic", name=n, count=3, assignments=None)
        for n in ("t", "u", "nope")
    )
    (response,) = call(
        broker, "alice", req(ApiKey.CREATE_PARTITIONS, 3, topics=topics, timeout=TIMEOUT, validate_only=False)
    )
    # The refused first, without a message, whether the topic exists or not.
    assert [(r.name, r.error_code, r.error_message) for r in response.results] == [
        ("u", E.topic_authorization_failed, None),
        ("nope", E.topic_authorization_failed, None),
        ("t", E.none, None),
    ]
    assert partitions(broker, "t") == 3
    kp_alice = kp_admin(broker, "alice")
    try:
        kp_alice.create_partitions({"t": KpNewPartitions(4)})
        with pytest.raises(kafka_errors.TopicAuthorizationFailedError):
            kp_alice.create_partitions({"u": KpNewPartitions(4)})
    finally:
        kp_alice.close()
    assert partitions(broker, "t") == 4
    assert partitions(broker, "u") == 1


# -- configs ---------------------------------------------------------------------------------------


def describe_configs_req(*resources: tuple[int, str]) -> Any:
    wanted = tuple(
        nested(
            ApiKey.DESCRIBE_CONFIGS,
            4,
            "DescribeConfigsResource",
            resource_type=kind,
            resource_name=name,
            configuration_keys=None,
        )
        for kind, name in resources
    )
    return req(
        ApiKey.DESCRIBE_CONFIGS, 4, resources=wanted, include_synonyms=False, include_documentation=False
    )


def described(response: Any) -> list[tuple[int, str, int, str | None, bool]]:
    """(type, name, error, message, has configs) per resource, in the response's order."""
    return [
        (r.resource_type, r.resource_name, r.error_code, r.error_message, bool(r.configs))
        for r in response.results
    ]


def test_describing_configs_needs_describe_configs_on_the_topic_or_the_cluster(broker):
    me = node(broker)
    everything = [
        (BROKER_CONFIGS, me),
        (TOPIC_CONFIGS, "t"),
        (LOGGER_CONFIGS, me),
        (TOPIC_CONFIGS, "u"),
        (TOPIC_CONFIGS, "nope"),
    ]
    (response,) = call(broker, "alice", describe_configs_req(*everything))
    cluster_denied = (E.cluster_authorization_failed, "Cluster authorization failed.", False)
    topic_denied = (E.topic_authorization_failed, "Topic authorization failed.", False)
    assert described(response) == [
        (BROKER_CONFIGS, me, *cluster_denied),
        (TOPIC_CONFIGS, "t", *topic_denied),
        (LOGGER_CONFIGS, me, *cluster_denied),
        (TOPIC_CONFIGS, "u", *topic_denied),
        (TOPIC_CONFIGS, "nope", *topic_denied),
    ]
    # ALTER_CONFIGS implies DESCRIBE_CONFIGS; the described come before the refused.
    grant(
        broker,
        acl(T, "t", ALICE, Op.DESCRIBE_CONFIGS),
        acl(T, "u", ALICE, Op.ALTER_CONFIGS),
        acl(T, "nope", ALICE, Op.DESCRIBE_CONFIGS),
    )
    (response,) = call(broker, "alice", describe_configs_req(*everything))
    assert described(response) == [
        (TOPIC_CONFIGS, "t", E.none, None, True),
        (TOPIC_CONFIGS, "u", E.none, None, True),
        (TOPIC_CONFIGS, "nope", E.unknown_topic_or_partition, None, False),
        (BROKER_CONFIGS, me, *cluster_denied),
        (LOGGER_CONFIGS, me, *cluster_denied),
    ]

    ck_alice = AdminClient(confluent_config(broker, "alice"))
    futures = ck_alice.describe_configs([ConfigResource("topic", "t"), ConfigResource("broker", me)])
    by_name = {resource.name: future for resource, future in futures.items()}
    assert "retention.ms" in by_name["t"].result(TIMEOUT_S)
    assert ck_error(by_name[me]).code() == ck.KafkaError.CLUSTER_AUTHORIZATION_FAILED

    grant(broker, acl(C, "kafka-cluster", ALICE, Op.DESCRIBE_CONFIGS))
    kp_alice = kp_admin(broker, "alice")
    try:
        configs = kp_alice.describe_configs(
            [KpConfigResource(KpConfigResourceType.BROKER, me)], config_filter="all"
        )
        assert "num.partitions" in configs["broker"][me]
    finally:
        kp_alice.close()
    (response,) = call(broker, "alice", describe_configs_req((LOGGER_CONFIGS, me)))
    assert described(response) == [(LOGGER_CONFIGS, me, E.none, None, True)]


def incremental_req(*resources: tuple[int, str, str, str], version: int = 1) -> Any:
    """One (type, name, config, value) SET per resource."""
    altered = tuple(
        nested(
            ApiKey.INCREMENTAL_ALTER_CONFIGS,
            version,
            "AlterConfigsResource",
            resource_type=kind,
            resource_name=name,
            configs=(
                nested(
                    ApiKey.INCREMENTAL_ALTER_CONFIGS,
                    version,
                    "AlterableConfig",
                    name=config,
                    config_operation=SET,
                    value=value,
                ),
            ),
        )
        for kind, name, config, value in resources
    )
    return req(ApiKey.INCREMENTAL_ALTER_CONFIGS, version, resources=altered, validate_only=False)


def legacy_alter_req(*resources: tuple[int, str, str, str]) -> Any:
    altered = tuple(
        nested(
            ApiKey.ALTER_CONFIGS,
            2,
            "AlterConfigsResource",
            resource_type=kind,
            resource_name=name,
            configs=(nested(ApiKey.ALTER_CONFIGS, 2, "AlterableConfig", name=config, value=value),),
        )
        for kind, name, config, value in resources
    )
    return req(ApiKey.ALTER_CONFIGS, 2, resources=altered, validate_only=False)


def altered(response: Any) -> list[tuple[int, str, int, str | None]]:
    return [(r.resource_type, r.resource_name, r.error_code, r.error_message) for r in response.responses]


def test_altering_configs_needs_alter_configs_on_the_topic_or_the_cluster(broker):
    me = node(broker)
    topic_denied = (E.topic_authorization_failed, "Topic authorization failed.")
    cluster_denied = (E.cluster_authorization_failed, "Cluster authorization failed.")
    asked = [
        (TOPIC_CONFIGS, "t", "retention.ms", "1000"),
        (TOPIC_CONFIGS, "nope", "retention.ms", "1000"),
        (BROKER_CONFIGS, me, "log.retention.ms", "1000"),
        # The broker refuses what cannot change before the controller authorizes anything.
        (BROKER_CONFIGS, "", "log.dirs", "/elsewhere"),
        (LOGGER_CONFIGS, me, "kafkalog.broker.handlers.create_topics", "INFO"),
    ]
    incremental, legacy = call(broker, "alice", incremental_req(*asked), legacy_alter_req(*asked))
    refusals = altered(incremental)
    assert refusals[:3] == [
        (TOPIC_CONFIGS, "t", *topic_denied),
        (TOPIC_CONFIGS, "nope", *topic_denied),
        (BROKER_CONFIGS, me, *cluster_denied),
    ]
    assert refusals[3][2] == E.invalid_request and "log.dirs" in refusals[3][3]
    # A log level is authorized by the broker, and the refusal's default message is dropped.
    assert refusals[4] == (LOGGER_CONFIGS, me, E.cluster_authorization_failed, None)
    # Legacy AlterConfigs knows no logger resource, authorized or not.
    assert altered(legacy)[4] == (LOGGER_CONFIGS, me, E.invalid_request, "Unknown resource type 8")
    assert altered(legacy)[:3] == refusals[:3]
    assert "retention.ms" not in broker.server.log_manager.topic_config("t").overridden_props()

    grant(broker, acl(T, "t", ALICE, Op.ALTER_CONFIGS))
    kp_alice = kp_admin(broker, "alice")
    try:
        kp_alice.alter_configs([KpConfigResource(KpConfigResourceType.TOPIC, "t", {"retention.ms": "2000"})])
    finally:
        kp_alice.close()
    assert broker.server.log_manager.topic_config("t").overridden_props()["retention.ms"] == "2000"
    ck_alice = AdminClient(confluent_config(broker, "alice"))
    change = [ConfigEntry("retention.ms", "3000", incremental_operation=AlterConfigOpType.SET)]
    (refused,) = ck_alice.incremental_alter_configs(
        [ConfigResource("topic", "u", incremental_configs=change)]
    ).values()
    assert ck_error(refused).code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED

    grant(broker, acl(C, "kafka-cluster", ALICE, Op.ALTER_CONFIGS))
    (incremental,) = call(broker, "alice", incremental_req(asked[2], asked[4]))
    assert altered(incremental) == [
        (BROKER_CONFIGS, me, E.none, None),
        (LOGGER_CONFIGS, me, E.none, None),
    ]
    assert broker.server.apis.config.dynamic_broker["log.retention.ms"] == "1000"


# -- cluster-wide APIs -----------------------------------------------------------------------------


def cluster_requests(broker: Broker) -> dict[str, Any]:
    """One request per API guarded by a cluster ACL, naming partition 0 of topic t."""
    path = os.path.abspath(broker.server.log_manager.data_dir)
    return {
        "log_dirs": req(
            ApiKey.DESCRIBE_LOG_DIRS,
            4,
            topics=(
                nested(ApiKey.DESCRIBE_LOG_DIRS, 4, "DescribableLogDirTopic", topic="t", partitions=(0,)),
            ),
        ),
        "alter_log_dirs": req(
            ApiKey.ALTER_REPLICA_LOG_DIRS,
            2,
            dirs=(
                nested(
                    ApiKey.ALTER_REPLICA_LOG_DIRS,
                    2,
                    "AlterReplicaLogDir",
                    path=path,
                    topics=(
                        nested(
                            ApiKey.ALTER_REPLICA_LOG_DIRS,
                            2,
                            "AlterReplicaLogDirTopic",
                            name="t",
                            partitions=(0,),
                        ),
                    ),
                ),
            ),
        ),
        "elect": req(
            ApiKey.ELECT_LEADERS,
            2,
            election_type=0,
            topic_partitions=(
                nested(ApiKey.ELECT_LEADERS, 2, "TopicPartitions", topic="t", partitions=(0,)),
            ),
            timeout=TIMEOUT,
        ),
        "reassign": req(
            ApiKey.ALTER_PARTITION_REASSIGNMENTS,
            0,
            timeout=TIMEOUT,
            topics=(
                nested(
                    ApiKey.ALTER_PARTITION_REASSIGNMENTS,
                    0,
                    "ReassignableTopic",
                    name="t",
                    partitions=(
                        nested(
                            ApiKey.ALTER_PARTITION_REASSIGNMENTS,
                            0,
                            "ReassignablePartition",
                            partition_index=0,
                            replicas=(broker.server.apis.node_id,),
                        ),
                    ),
                ),
            ),
        ),
        "list_reassignments": req(
            ApiKey.LIST_PARTITION_REASSIGNMENTS,
            0,
            timeout=TIMEOUT,
            topics=(
                nested(
                    ApiKey.LIST_PARTITION_REASSIGNMENTS,
                    0,
                    "ListPartitionReassignmentsTopics",
                    name="t",
                    partition_indexes=(0,),
                ),
            ),
        ),
        "config_resources": req(ApiKey.LIST_CONFIG_RESOURCES, 1, resource_types=()),
        "features": req(
            ApiKey.UPDATE_FEATURES,
            1,
            timeout=TIMEOUT,
            feature_updates=(
                nested(ApiKey.UPDATE_FEATURES, 1, "FeatureUpdateKey", feature="metadata.version",
                       max_version_level=METADATA_VERSION_LEVEL, upgrade_type=1),
            ),
            validate_only=False,
        ),
        "quorum": req(
            ApiKey.DESCRIBE_QUORUM,
            2,
            topics=(
                nested(
                    ApiKey.DESCRIBE_QUORUM,
                    2,
                    "TopicData",
                    topic_name="__cluster_metadata",
                    partitions=(nested(ApiKey.DESCRIBE_QUORUM, 2, "PartitionData", partition_index=0),),
                ),
            ),
        ),
    }


def errors_of(responses: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """Each API's response-level error (where it has one) and partition-level errors."""
    r = responses
    return {
        "log_dirs": (r["log_dirs"].error_code, len(r["log_dirs"].results)),
        "alter_log_dirs": tuple(p.error_code for t in r["alter_log_dirs"].results for p in t.partitions),
        "elect": (
            r["elect"].error_code,
            *(p.error_code for t in r["elect"].replica_election_results for p in t.partition_result),
        ),
        "reassign": (
            r["reassign"].error_code,
            *(p.error_code for t in r["reassign"].responses for p in t.partitions),
        ),
        "list_reassignments": (r["list_reassignments"].error_code,),
        "config_resources": (r["config_resources"].error_code,),
        "features": (r["features"].error_code, len(r["features"].results)),
        "quorum": (r["quorum"].error_code, len(r["quorum"].topics)),
    }


def test_the_cluster_wide_apis_need_their_cluster_acls(broker):
    requests = cluster_requests(broker)
    denied = E.cluster_authorization_failed
    responses = dict(zip(requests, call(broker, "alice", *requests.values()), strict=True))
    assert errors_of(responses) == {
        "log_dirs": (denied, 0),
        "alter_log_dirs": (denied,),
        "elect": (denied, denied),
        "reassign": (denied, denied),
        "list_reassignments": (denied,),
        "config_resources": (denied,),
        "features": (denied, 0),
        "quorum": (denied, 0),
    }
    why = "Request {} from User:alice is not authorized."
    assert responses["quorum"].error_message == why.format("DescribeQuorum")
    assert responses["features"].error_message == why.format("UpdateFeatures")
    (election,) = responses["elect"].replica_election_results
    assert election.partition_result[0].error_message == why.format("ElectLeaders")
    assert responses["reassign"].error_message == why.format("AlterPartitionReassignments")
    listed = responses["list_reassignments"]
    assert listed.error_message == why.format("ListPartitionReassignments")
    # The named partitions come back bare.
    assert [(t.name, [(p.partition_index, p.replicas) for p in t.partitions]) for t in listed.topics] == [
        ("t", [(0, ())])
    ]
    assert responses["config_resources"].config_resources == ()
    # v1-v2 of DescribeLogDirs have no error field: nothing is described.
    (old,) = call(broker, "alice", req(ApiKey.DESCRIBE_LOG_DIRS, 1, topics=None))
    assert old.results == ()

    # ALTER implies DESCRIBE: it opens all but ListConfigResources, which needs DESCRIBE_CONFIGS
    # (UpdateFeatures needs ALTER itself).
    grant(broker, acl(C, "kafka-cluster", ALICE, Op.ALTER))
    responses = dict(zip(requests, call(broker, "alice", *requests.values()), strict=True))
    assert errors_of(responses) == {
        "log_dirs": (E.none, 1),
        "alter_log_dirs": (E.none,),
        "elect": (E.none, E.election_not_needed),
        "reassign": (E.none, E.none),
        "list_reassignments": (E.none,),
        "config_resources": (denied,),
        "features": (E.none, 1),
        "quorum": (E.none, 1),
    }
    grant(broker, acl(C, "kafka-cluster", ALICE, Op.DESCRIBE_CONFIGS))
    (listed,) = call(broker, "alice", requests["config_resources"])
    assert listed.error_code == E.none and ("t", TOPIC_CONFIGS) in {
        (r.resource_name, r.resource_type) for r in listed.config_resources
    }


def test_the_cluster_wide_apis_through_the_admin_clients(broker):
    grant(broker, acl(C, "kafka-cluster", BOB, Op.DESCRIBE))
    # kafka-python lists the topics through Metadata first, which shows bob only what he may describe
    grant(broker, acl(T, "t", BOB, Op.DESCRIBE))
    kp_alice, kp_bob = kp_admin(broker, "alice"), kp_admin(broker, "bob")
    try:
        with pytest.raises(kafka_errors.ClusterAuthorizationFailedError):
            kp_alice.list_partition_reassignments()
        assert kp_bob.list_partition_reassignments() == {}
        (refused,) = kp_alice.describe_log_dirs()
        assert refused["log_dirs"] == [] or refused.get("error_code") == E.cluster_authorization_failed
        (log_dirs,) = kp_bob.describe_log_dirs()
        assert "t" in {t["name"] for d in log_dirs["log_dirs"] for t in d["topics"]}
        with pytest.raises(kafka_errors.ClusterAuthorizationFailedError):
            kp_bob.elect_leaders(0, {"t": [0]})  # DESCRIBE is not ALTER
    finally:
        kp_alice.close()
        kp_bob.close()
    ck_alice = AdminClient(confluent_config(broker, "alice"))
    elected = ck_alice.elect_leaders(ck.ElectionType.PREFERRED, [ck.TopicPartition("t", 0)])
    assert ck_error(elected).code() == ck.KafkaError.CLUSTER_AUTHORIZATION_FAILED


def scram_upsertion(user: str) -> Any:
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
    return UserScramCredentialUpsertion(user, info, f"{user}-pw".encode())


def test_the_scram_user_apis_need_describe_and_alter_on_the_cluster(broker):
    ck_alice = AdminClient(confluent_config(broker, "alice"))
    futures = ck_alice.alter_user_scram_credentials([scram_upsertion("carol"), scram_upsertion("dave")])
    assert {u: ck_error(f).code() for u, f in futures.items()} == {
        "carol": ck.KafkaError.CLUSTER_AUTHORIZATION_FAILED,
        "dave": ck.KafkaError.CLUSTER_AUTHORIZATION_FAILED,
    }
    # (Not confluent-kafka's describe: librdkafka 2.16 frees a string it does not own on this error.)
    kp_alice = kp_admin(broker, "alice")
    try:
        with pytest.raises(kafka_errors.ClusterAuthorizationFailedError):
            kp_alice.describe_user_scram_credentials()
    finally:
        kp_alice.close()
    users = tuple(
        nested(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, "UserName", name=n) for n in ("carol", "x")
    )
    deletion = nested(
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, "ScramCredentialDeletion", name="zed", mechanism=1
    )
    again = nested(
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, "ScramCredentialDeletion", name="carol", mechanism=2
    )
    describe, alter = call(
        broker,
        "alice",
        req(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, users=users),
        req(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, deletions=(deletion, again), upsertions=()),
    )
    denied = E.cluster_authorization_failed
    assert (describe.error_code, describe.error_message) == (denied, None)
    assert [(r.user, r.error_code, r.error_message) for r in describe.results] == [("", denied, None)] * 2
    # Each user once, in name order.
    why = "Request AlterUserScramCredentials from User:alice is not authorized."
    assert [(r.user, r.error_code, r.error_message) for r in alter.results] == [
        ("carol", denied, why),
        ("zed", denied, why),
    ]

    # DESCRIBE lets bob see the credentials, not change them; ALTER (which implies DESCRIBE) lets alice.
    grant(broker, acl(C, "kafka-cluster", BOB, Op.DESCRIBE), acl(C, "kafka-cluster", ALICE, Op.ALTER))
    ck_bob = AdminClient(confluent_config(broker, "bob"))
    (refused,) = ck_bob.alter_user_scram_credentials([scram_upsertion("carol")]).values()
    assert ck_error(refused).code() == ck.KafkaError.CLUSTER_AUTHORIZATION_FAILED
    for future in ck_alice.alter_user_scram_credentials([scram_upsertion("carol")]).values():
        assert future.result(TIMEOUT_S) is None
    for admin in (ck_alice, ck_bob):
        assert set(admin.describe_user_scram_credentials().result(TIMEOUT_S)) == {"carol"}


def test_the_super_user_needs_no_acl(broker):
    me = node(broker)
    requests = cluster_requests(broker)
    responses = dict(zip(requests, call(broker, "admin", *requests.values()), strict=True))
    assert errors_of(responses)["elect"] == (E.none, E.election_not_needed)
    assert errors_of(responses)["config_resources"] == (E.none,)
    (configs,) = call(broker, "admin", describe_configs_req((BROKER_CONFIGS, me), (TOPIC_CONFIGS, "t")))
    assert [r.error_code for r in configs.results] == [E.none, E.none]
    admin = AdminClient(confluent_config(broker, "admin"))
    assert admin.create_partitions([NewPartitions("u", 2)])["u"].result(TIMEOUT_S) is None
    for future in admin.alter_user_scram_credentials([scram_upsertion("carol")]).values():
        assert future.result(TIMEOUT_S) is None
    assert admin.delete_topics(["u"], operation_timeout=TIMEOUT_S)["u"].result(TIMEOUT_S) is None
    assert not has_topic(broker, "u")


# -- DescribeCluster -------------------------------------------------------------------------------


def cluster_operations(broker: Broker, user: str) -> int:
    (response,) = call(
        broker,
        user,
        req(ApiKey.DESCRIBE_CLUSTER, 1, include_cluster_authorized_operations=True, endpoint_type=1),
    )
    assert response.error_code == E.none and len(response.brokers) == 1  # describing needs no ACL
    return int(response.cluster_authorized_operations)


def bits(*operations: AclOperation) -> int:
    return sum(1 << op for op in operations)


def test_describe_cluster_shows_the_operations_to_whom_may_describe_the_cluster(broker):
    assert cluster_operations(broker, "alice") == 0
    (unasked,) = call(
        broker,
        "alice",
        req(ApiKey.DESCRIBE_CLUSTER, 1, include_cluster_authorized_operations=False, endpoint_type=1),
    )
    assert unasked.cluster_authorized_operations == -(2**31)
    # ALTER_CONFIGS alone (it implies DESCRIBE_CONFIGS, not DESCRIBE) shows nothing.
    grant(broker, acl(C, "kafka-cluster", ALICE, Op.ALTER_CONFIGS))
    assert cluster_operations(broker, "alice") == 0
    grant(broker, acl(C, "kafka-cluster", ALICE, Op.DESCRIBE))
    assert cluster_operations(broker, "alice") == bits(Op.DESCRIBE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS)
    # ALTER implies DESCRIBE.
    grant(broker, acl(C, "kafka-cluster", BOB, Op.ALTER))
    ck_bob = AdminClient(confluent_config(broker, "bob"))
    cluster = ck_bob.describe_cluster(include_authorized_operations=True).result(TIMEOUT_S)
    assert set(cluster.authorized_operations) == {ck.admin.AclOperation.ALTER, ck.admin.AclOperation.DESCRIBE}
    every = bits(
        Op.CREATE,
        Op.CLUSTER_ACTION,
        Op.DESCRIBE_CONFIGS,
        Op.ALTER_CONFIGS,
        Op.IDEMPOTENT_WRITE,
        Op.ALTER,
        Op.DESCRIBE,
    )
    assert cluster_operations(broker, "admin") == every
