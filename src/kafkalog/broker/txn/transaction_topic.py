"""``__transaction_state``, the transaction coordinator's topic: its name and the configs of Kafka's
``TransactionStateManager.transactionTopicConfigs``, with ``transaction.state.log.num.partitions``
partitions (never ``num.partitions``; see ``broker/internal_topic.py``)."""

from __future__ import annotations

__all__ = ["TRANSACTION_STATE_TOPIC_NAME", "transaction_topic_configs"]

TRANSACTION_STATE_TOPIC_NAME = "__transaction_state"


def transaction_topic_configs(segment_bytes: int) -> dict[str, str]:
    return {
        "cleanup.policy": "compact",
        "compression.type": "uncompressed",  # the coordinator writes it uncompressed
        "segment.bytes": str(segment_bytes),
        "unclean.leader.election.enable": "false",
    }
