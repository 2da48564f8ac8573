"""Test helpers for projects that use kafkalog (the ``kafkalog_broker`` pytest fixture)."""
