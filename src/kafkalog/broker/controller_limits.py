"""The bound Kafka's KRaft controller puts on one admin request.

Every topic, partition and config a request creates is one metadata record, and the controller
refuses a request that would write more than ``MAX_RECORDS_PER_USER_OP`` (10,000) of them at once:
every topic of the request gets POLICY_VIOLATION ("Unable to perform excessively large batch
operation.") and nothing is created. kafkalog has no metadata log, but the same bound keeps one
CreateTopics or CreatePartitions request from asking for millions of partition directories (and
their file handles) in one go.
"""

from __future__ import annotations

MAX_RECORDS_PER_USER_OP = 10_000
EXCESSIVE_BATCH_MESSAGE = "Unable to perform excessively large batch operation."


def exceeds_user_op_limit(records: int) -> bool:
    return records > MAX_RECORDS_PER_USER_OP
