"""Helpers shared by the storage tests (import them: ``from tests.storage.conftest import T0, config``)."""

from __future__ import annotations

from kafkalog.storage.config import LogConfig

T0 = 1_700_000_000_000  # the base timestamp of the golden data (shared/golden/README.md)


def config(**props: object) -> LogConfig:
    """A ``LogConfig`` from Kafka's property names written with underscores: ``config(segment_bytes=100)``."""
    return LogConfig.from_props({k.replace("_", "."): str(v) for k, v in props.items()})
