"""Shared fixtures: where the shared golden material lives (``../shared`` beside the repo)."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DIR = REPO_ROOT.parent / "shared"
GOLDEN_DIR = SHARED_DIR / "golden"
KAFKA_GOLDEN_DIR = GOLDEN_DIR / "kafka_java_generated"


@pytest.fixture(scope="session")
def golden_dir() -> Path:
    if not GOLDEN_DIR.is_dir():
        pytest.fail(f"golden data not found at {GOLDEN_DIR} (expected ../shared/golden beside the repo)")
    return GOLDEN_DIR


@pytest.fixture(scope="session")
def kafka_golden_dir(golden_dir: Path) -> Path:
    return golden_dir / "kafka_java_generated"


@pytest.fixture(scope="session")
def s3():
    """moto's S3 server on 127.0.0.1 for the whole run (see tests/s3server.py)."""
    from tests.s3server import MotoServer

    with MotoServer() as server:
        yield server
