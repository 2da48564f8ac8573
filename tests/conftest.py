"""Shared fixtures: where the shared golden material lives (``../shared/golden`` beside the repo, or
``$KAFKALOG_GOLDEN_DIR``). Without it the run stops at once with one line, instead of erroring in
every test that needs it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
GOLDEN_ENV = "KAFKALOG_GOLDEN_DIR"
GOLDEN_DIR = Path(os.environ.get(GOLDEN_ENV) or REPO_ROOT.parent / "shared" / "golden")
KAFKA_GOLDEN_DIR = GOLDEN_DIR / "kafka_java_generated"


def pytest_sessionstart(session: pytest.Session) -> None:
    if not KAFKA_GOLDEN_DIR.is_dir():
        raise pytest.UsageError(
            f"golden data not found at {GOLDEN_DIR} (expected ../shared/golden beside the repository; "
            f"set {GOLDEN_ENV} to its location)"
        )


@pytest.fixture(scope="session")
def golden_dir() -> Path:
    return GOLDEN_DIR


@pytest.fixture(scope="session")
def kafka_golden_dir(golden_dir: Path) -> Path:
    return KAFKA_GOLDEN_DIR


@pytest.fixture(scope="session")
def s3():
    """moto's S3 server on 127.0.0.1 for the whole run (see tests/s3server.py)."""
    from tests.s3server import MotoServer

    with MotoServer() as server:
        yield server
