"""Where handlers find the transaction coordinator: ``apis.components["transaction_coordinator"]``,
built when the broker starts from Kafka's ``transaction.*`` broker configs (registered as a component
on import, which every transaction handler does)."""

from __future__ import annotations

from typing import Any

from kafkalog.broker.group.manager_of import group_metadata_manager
from kafkalog.broker.handlers import component, register_component
from kafkalog.broker.txn.transaction_coordinator import TransactionCoordinator
from kafkalog.broker.txn.transaction_marker_writer import TransactionMarkerWriter
from kafkalog.broker.txn.transaction_state_manager import TransactionStateManager

__all__ = ["TRANSACTION_COORDINATOR", "transaction_coordinator"]

TRANSACTION_COORDINATOR = "transaction_coordinator"


def _build(apis: Any) -> TransactionCoordinator:
    config = apis.config
    replica_manager = apis.replica_manager

    def wake(topic: str, partition: int) -> None:
        replica_manager.wake(topic, partition)  # fetches parked on the partition see the new end

    def offsets_completed(producer_id: int, partition: int, commit: bool) -> None:
        group_metadata_manager(apis).complete_txn_offsets(producer_id, partition, commit)

    state_manager = TransactionStateManager(
        apis.log_manager,
        num_partitions=config.get_int("transaction.state.log.num.partitions"),
        segment_bytes=config.get_int("transaction.state.log.segment.bytes"),
        max_timeout_ms=config.get_int("transaction.max.timeout.ms"),
        id_expiration_ms=config.get_int("transactional.id.expiration.ms"),
        time=apis.log_manager.time,
        on_append=wake,
    )
    writer = TransactionMarkerWriter(apis.log_manager, on_append=wake, on_offsets_completed=offsets_completed)
    return TransactionCoordinator(state_manager, writer, apis.producer_id_manager, apis.log_manager.time)


register_component(TRANSACTION_COORDINATOR, _build)


def transaction_coordinator(apis: Any) -> TransactionCoordinator:
    """The broker's coordinator (built here if the ``KafkaApis`` was made without it, e.g. in a test)."""
    coordinator: TransactionCoordinator = component(apis, TRANSACTION_COORDINATOR)
    return coordinator
