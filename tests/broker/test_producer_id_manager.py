"""InitProducerId's id allocation: blocks recorded in the data directory before use, so that no id
is handed out twice across restarts, and a damaged file is an error, not a reset to 0."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkalog.broker.producer_id_manager import BLOCK_SIZE, PRODUCER_ID_FILE, ProducerIdManager
from kafkalog.errors import KafkaStorageError


def test_ids_are_never_reused_across_restarts(tmp_path: Path) -> None:
    first = ProducerIdManager(tmp_path)
    ids = [first.generate_producer_id() for _ in range(3)]
    assert ids == [0, 1, 2]
    assert (tmp_path / PRODUCER_ID_FILE).read_text() == f"{BLOCK_SIZE}\n"  # the block, before any id of it
    second = ProducerIdManager(tmp_path)  # a restart: the rest of the block is skipped, not reused
    assert second.generate_producer_id() == BLOCK_SIZE
    assert [p.name for p in tmp_path.iterdir()] == [PRODUCER_ID_FILE]  # no temporary file left behind


def test_a_damaged_file_is_reported(tmp_path: Path) -> None:
    (tmp_path / PRODUCER_ID_FILE).write_text("not a number\n")
    with pytest.raises(KafkaStorageError, match="does not hold a producer id"):
        ProducerIdManager(tmp_path)
