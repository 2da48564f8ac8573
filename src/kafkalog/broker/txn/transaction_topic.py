"""``__transaction_state``, the transaction coordinator's topic. kafkalog has no transaction
coordinator yet; the topic is only created, as Kafka's AutoTopicCreationManager creates it when a
client's Metadata request asks for it: ``transaction.state.log.num.partitions`` partitions with the
configs of Kafka's ``TransactionStateManager.transactionTopicConfigs``, never ``num.partitions``."""

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
