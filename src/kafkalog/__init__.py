"""kafkalog: Apache Kafka log storage in Python."""
