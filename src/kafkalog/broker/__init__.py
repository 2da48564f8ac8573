"""A single-node, Kafka-wire broker over kafkalog's storage engine (docs/BROKER.md).

``Broker`` runs one in a background thread (tests, embedding); ``kafkalog serve`` runs one in the
foreground. The layers follow Kafka's: ``socket_server`` (network) -> ``kafka_apis`` (dispatch to
``handlers/<api>.py``) -> ``replica_manager`` (append / fetch with long-poll) -> ``storage``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kafkalog.broker.config import KafkaConfig
    from kafkalog.broker.embedded import Broker

__all__ = ["Broker", "KafkaConfig"]


def __getattr__(name: str) -> Any:
    # Lazy: importing kafkalog.broker for one name must not pull in the whole server.
    if name == "Broker":
        from kafkalog.broker.embedded import Broker

        return Broker
    if name == "KafkaConfig":
        from kafkalog.broker.config import KafkaConfig

        return KafkaConfig
    raise AttributeError(name)
