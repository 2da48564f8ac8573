"""Finding a data directory's topic-partitions read-only, by the rules LogManager loads with."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkalog.errors import KafkaStorageError
from kafkalog.storage.log_manager import LogManager
from kafkalog.storage.partition_dirs import METADATA_TOPIC, list_topic_partitions, scan_partition_dirs


def test_list_topic_partitions_sees_what_a_read_only_log_manager_loads(tmp_path: Path) -> None:
    with LogManager(tmp_path) as lm:
        lm.create_topic("orders", 3)
        lm.create_topic("a.b_c-d", 1)
    (tmp_path / "orders-3").mkdir()  # a partition a writer is still creating: no segment yet
    (tmp_path / "orders-7.0123456789abcdef0123456789abcdef-delete").mkdir()
    (tmp_path / "orders-8.0123456789abcdef0123456789abcdef-future").mkdir()
    (tmp_path / f"{METADATA_TOPIC}-0").mkdir()
    (tmp_path / "not-a-dir-0").write_text("a file is not a partition")
    before = sorted(p.name for p in tmp_path.iterdir())

    assert list_topic_partitions(tmp_path) == {"a.b_c-d": [0], "orders": [0, 1, 2]}
    assert list_topic_partitions(tmp_path, readable_only=False) == {"a.b_c-d": [0], "orders": [0, 1, 2, 3]}
    with LogManager(tmp_path, read_only=True) as lm:
        assert {t: lm.partitions(t) for t in lm.topics()} == list_topic_partitions(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing created or deleted
    kinds = {entry.path.name: entry.is_topic_partition for entry in scan_partition_dirs(tmp_path)}
    assert kinds[f"{METADATA_TOPIC}-0"] is False and kinds["orders-3"] is True


@pytest.mark.parametrize("name", ["scratch", "orders-x", "orders-1.abc-moved"])
def test_foreign_directories_are_storage_errors(tmp_path: Path, name: str) -> None:
    (tmp_path / name).mkdir()
    with pytest.raises(KafkaStorageError, match=name):
        list_topic_partitions(tmp_path)
