"""Every API key the codec knows (Kafka's ``ApiKeys``): its name, the versions the codec can parse
(``kio``'s generated schemas, Kafka 4's ranges) and its first flexible version.

Which of these the broker *serves*, and at which versions, is decided where each handler registers
(``kafkalog.broker.handlers``); ApiVersions advertises exactly that. The first flexible version
decides the header versions: request header v2 and response header v1 from it on (ApiVersions
answers with header v0 whatever its version, so that an old client can read the error).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["API_KEYS", "ApiKey", "ApiSpec", "api_spec", "request_header_version", "response_header_version"]


@dataclass(frozen=True, slots=True)
class ApiSpec:
    key: int
    name: str
    min_version: int  # the lowest version the codec parses
    max_version: int  # the highest
    first_flexible: int | None  # None: never flexible

    def is_flexible(self, version: int) -> bool:
        return self.first_flexible is not None and version >= self.first_flexible


class ApiKey:
    """Kafka's API key numbers, as constants (Kafka's enum names)."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    ALTER_REPLICA_LOG_DIRS = 34
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    DESCRIBE_QUORUM = 55
    UPDATE_FEATURES = 57
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    GET_TELEMETRY_SUBSCRIPTIONS = 71
    PUSH_TELEMETRY = 72
    LIST_CONFIG_RESOURCES = 74
    DESCRIBE_TOPIC_PARTITIONS = 75


# (key, name, codec min, codec max, first flexible) — Kafka 4's ranges, as kio 0.6.5 generates them;
# tests/broker/test_protocol_api_keys.py checks every row against kio's schemas.
_ROWS: tuple[tuple[int, str, int, int, int | None], ...] = (
    (0, "Produce", 3, 13, 9),
    (1, "Fetch", 4, 18, 12),
    (2, "ListOffsets", 1, 11, 6),
    (3, "Metadata", 0, 13, 9),
    (8, "OffsetCommit", 2, 10, 8),
    (9, "OffsetFetch", 1, 10, 6),
    (10, "FindCoordinator", 0, 6, 3),
    (11, "JoinGroup", 0, 9, 6),
    (12, "Heartbeat", 0, 4, 4),
    (13, "LeaveGroup", 0, 5, 4),
    (14, "SyncGroup", 0, 5, 4),
    (15, "DescribeGroups", 0, 6, 5),
    (16, "ListGroups", 0, 5, 3),
    (17, "SaslHandshake", 0, 1, None),
    (18, "ApiVersions", 0, 4, 3),
    (19, "CreateTopics", 2, 7, 5),
    (20, "DeleteTopics", 1, 6, 4),
    (21, "DeleteRecords", 0, 2, 2),
    (22, "InitProducerId", 0, 6, 2),
    (23, "OffsetForLeaderEpoch", 2, 4, 4),
    (24, "AddPartitionsToTxn", 0, 5, 3),
    (25, "AddOffsetsToTxn", 0, 4, 3),
    (26, "EndTxn", 0, 5, 3),
    (27, "WriteTxnMarkers", 1, 2, 1),
    (28, "TxnOffsetCommit", 0, 5, 3),
    (29, "DescribeAcls", 1, 3, 2),
    (30, "CreateAcls", 1, 3, 2),
    (31, "DeleteAcls", 1, 3, 2),
    (32, "DescribeConfigs", 1, 4, 4),
    (33, "AlterConfigs", 0, 2, 2),
    (34, "AlterReplicaLogDirs", 1, 2, 2),
    (35, "DescribeLogDirs", 1, 5, 2),
    (36, "SaslAuthenticate", 0, 2, 2),
    (37, "CreatePartitions", 0, 3, 2),
    (42, "DeleteGroups", 0, 2, 2),
    (43, "ElectLeaders", 0, 2, 2),
    (44, "IncrementalAlterConfigs", 0, 1, 1),
    (45, "AlterPartitionReassignments", 0, 1, 0),
    (46, "ListPartitionReassignments", 0, 0, 0),
    (47, "OffsetDelete", 0, 0, None),
    (50, "DescribeUserScramCredentials", 0, 0, 0),
    (51, "AlterUserScramCredentials", 0, 0, 0),
    (55, "DescribeQuorum", 0, 2, 0),
    (57, "UpdateFeatures", 0, 2, 0),
    (60, "DescribeCluster", 0, 2, 0),
    (61, "DescribeProducers", 0, 0, 0),
    (65, "DescribeTransactions", 0, 0, 0),
    (66, "ListTransactions", 0, 2, 0),
    (68, "ConsumerGroupHeartbeat", 0, 1, 0),
    (69, "ConsumerGroupDescribe", 0, 1, 0),
    (71, "GetTelemetrySubscriptions", 0, 0, 0),
    (72, "PushTelemetry", 0, 0, 0),
    (74, "ListConfigResources", 0, 1, 0),
    (75, "DescribeTopicPartitions", 0, 0, 0),
)

API_KEYS: dict[int, ApiSpec] = {row[0]: ApiSpec(*row) for row in _ROWS}


def api_spec(api_key: int) -> ApiSpec | None:
    return API_KEYS.get(api_key)


def request_header_version(api_key: int, api_version: int) -> int:
    """2 for flexible versions (tagged fields after client_id), else 1."""
    spec = API_KEYS.get(api_key)
    return 2 if spec is not None and spec.is_flexible(api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    """1 for flexible versions (a tagged-field byte), else 0; ApiVersions always 0 (KIP-511)."""
    if api_key == ApiKey.API_VERSIONS:
        return 0
    spec = API_KEYS.get(api_key)
    return 1 if spec is not None and spec.is_flexible(api_version) else 0
