"""Helpers shared by the storage tests (import them: ``from tests.storage.conftest import T0, config``)
and the ``expected`` fixture: Kafka's answers for the golden data (``expected.json``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kafkalog.storage.config import LogConfig

T0 = 1_700_000_000_000  # the base timestamp of the golden data (shared/golden/README.md)


def config(**props: object) -> LogConfig:
    """A ``LogConfig`` from Kafka's property names written with underscores: ``config(segment_bytes=100)``."""
    return LogConfig.from_props({k.replace("_", "."): str(v) for k, v in props.items()})


@pytest.fixture(scope="module")
def expected(kafka_golden_dir: Path) -> dict[str, Any]:
    return json.loads((kafka_golden_dir / "expected.json").read_text())
