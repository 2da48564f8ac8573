"""The ``authorized_operations`` bit fields of Metadata, DescribeCluster and DescribeGroups.

A client may ask which ACL operations it holds on a topic, a group or the cluster. kafkalog has no
authorizer, and a Kafka broker without one answers with every operation its ACLs support for that
kind of resource (``AuthHelper.authorizedOperations`` with no authorizer: ``AclEntry``'s supported
operations) as a 32-bit field whose bit *n* stands for the operation with code *n*
(``Utils.to32BitField``). When not asked, the field keeps the schema's default, ``Integer.MIN_VALUE``.
"""

from __future__ import annotations

# AclOperation codes (org.apache.kafka.common.acl.AclOperation).
READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 3, 4, 5, 6, 7, 8
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 9, 10, 11, 12

NOT_REQUESTED = -(2**31)


def _bit_field(*operations: int) -> int:
    return sum(1 << op for op in set(operations))


TOPIC_OPERATIONS = _bit_field(READ, WRITE, CREATE, DESCRIBE, DELETE, ALTER, DESCRIBE_CONFIGS, ALTER_CONFIGS)
GROUP_OPERATIONS = _bit_field(READ, DESCRIBE, DELETE, DESCRIBE_CONFIGS, ALTER_CONFIGS)
CLUSTER_OPERATIONS = _bit_field(
    CREATE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, ALTER, DESCRIBE
)


def authorized_operations(requested: bool, operations: int) -> int:
    """The field's value: every supported operation if the request asked, else the default."""
    return operations if requested else NOT_REQUESTED
