"""The transaction coordinator (Kafka's ``kafka.coordinator.transaction``): transactional producers'
state in ``__transaction_state`` and the COMMIT/ABORT markers it writes to the partitions."""
