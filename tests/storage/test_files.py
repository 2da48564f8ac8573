"""``files``: deleting and renaming a segment file, and the errors every storage class reports through it.

The tests run as root in CI, where file modes deny nothing, so permission errors are injected."""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kafkalog.errors import KafkaStorageError
from kafkalog.storage import files
from kafkalog.storage.file_records import FileRecords
from kafkalog.storage.files import delete_file_if_exists, replace_file
from kafkalog.storage.index import OffsetIndex, TimeIndex
from kafkalog.storage.log_segment import LazyIndex, LogSegment
from kafkalog.storage.txn_index import AbortedTxn, TransactionIndex


def _denied(*args: object) -> None:
    raise PermissionError(errno.EACCES, "Permission denied")


@pytest.fixture
def deny_unlink(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Path, "unlink", _denied)


@pytest.fixture
def deny_replace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(files.os, "replace", _denied)


# --- delete_file_if_exists ------------------------------------------------------------------------


def test_delete_existing_file(tmp_path: Path) -> None:
    path = tmp_path / "0.index"
    path.write_bytes(b"x")
    assert delete_file_if_exists(path, "offset index") is True
    assert not path.exists()


def test_delete_missing_file_or_directory_is_false(tmp_path: Path) -> None:
    assert delete_file_if_exists(tmp_path / "0.index", "offset index") is False
    assert delete_file_if_exists(tmp_path / "gone" / "0.index", "offset index") is False


def test_delete_permission_error_names_the_file(tmp_path: Path, deny_unlink: None) -> None:
    path = tmp_path / "0.timeindex"
    with pytest.raises(KafkaStorageError) as info:
        delete_file_if_exists(path, "time index")
    assert str(info.value) == f"Cannot delete time index {path}: [Errno 13] Permission denied"
    assert isinstance(info.value.__cause__, PermissionError)


def test_delete_other_os_error_without_a_kind(tmp_path: Path) -> None:
    path = tmp_path / "0.log"
    path.mkdir()  # unlink(2) of a directory: EISDIR, a real error that is not "missing"
    with pytest.raises(KafkaStorageError, match="^" + re.escape(f"Cannot delete {path}: ")) as info:
        delete_file_if_exists(path)
    assert isinstance(info.value.__cause__, IsADirectoryError)
    assert path.is_dir()


# --- replace_file ---------------------------------------------------------------------------------


def test_replace_moves_over_an_existing_target(tmp_path: Path) -> None:
    src, dst = tmp_path / "0.log", tmp_path / "0.log.deleted"
    src.write_bytes(b"new")
    dst.write_bytes(b"old")
    replace_file(src, dst, "log")
    assert not src.exists()
    assert dst.read_bytes() == b"new"


def test_replace_missing_source_is_an_error_by_default(tmp_path: Path) -> None:
    src, dst = tmp_path / "0.index", tmp_path / "0.index.deleted"
    with pytest.raises(KafkaStorageError) as info:
        replace_file(src, dst, "index")
    assert str(info.value).startswith(f"Cannot rename index {src} to {dst}: ")
    assert isinstance(info.value.__cause__, FileNotFoundError)


def test_replace_missing_source_with_missing_ok_moves_nothing(tmp_path: Path) -> None:
    src, dst = tmp_path / "0.txnindex", tmp_path / "0.txnindex.deleted"
    dst.write_bytes(b"keep")
    replace_file(src, dst, "transaction index", missing_ok=True)
    assert dst.read_bytes() == b"keep"
    replace_file(src, tmp_path / "gone" / "0.txnindex", "transaction index", missing_ok=True)


def test_replace_missing_target_directory_is_an_error_even_with_missing_ok(tmp_path: Path) -> None:
    src, dst = tmp_path / "0.index", tmp_path / "gone" / "0.index"
    src.write_bytes(b"x")
    with pytest.raises(KafkaStorageError, match="^" + re.escape(f"Cannot rename index {src} to {dst}: ")):
        replace_file(src, dst, "index", missing_ok=True)
    assert src.exists()


def test_replace_permission_error_names_both_files(tmp_path: Path, deny_replace: None) -> None:
    src, dst = tmp_path / "0.log", tmp_path / "0.log.swap"
    src.write_bytes(b"x")
    for missing_ok in (False, True):
        with pytest.raises(KafkaStorageError) as info:
            replace_file(src, dst, missing_ok=missing_ok)
        assert str(info.value) == f"Cannot rename {src} to {dst}: [Errno 13] Permission denied"
        assert isinstance(info.value.__cause__, PermissionError)


# --- the storage classes keep their messages and follow the new name when the move fails --------

Opener = Callable[[Path], Any]

CLASSES: dict[str, tuple[str, str, Opener]] = {
    "log": ("00.log", "", lambda p: FileRecords.open(p, file_already_exists=False)),
    "offset-index": ("00.index", "offset index ", lambda p: OffsetIndex(p, 0, 1024)),
    "time-index": ("00.timeindex", "time index ", lambda p: TimeIndex(p, 0, 1200)),
    "txn-index": ("00.txnindex", "transaction index ", lambda p: _txn_index_with_entry(p)),
    "lazy-index": ("00.index", "index ", lambda p: LazyIndex.for_offset(p, 0, 1024)),
}


def _txn_index_with_entry(path: Path) -> TransactionIndex:
    index = TransactionIndex(path, 0)
    index.append(AbortedTxn(1, 0, 5, 5))
    return index


@pytest.mark.parametrize("kind", list(CLASSES))
def test_rename_failure_message_and_new_path(tmp_path: Path, kind: str, deny_replace: None) -> None:
    name, what, opener = CLASSES[kind]
    path, target = tmp_path / name, tmp_path / (name + ".deleted")
    obj = opener(path)
    try:
        with pytest.raises(KafkaStorageError) as info:
            obj.rename_to(target)
        assert str(info.value) == f"Cannot rename {what}{path} to {target}: [Errno 13] Permission denied"
        assert obj.path == target  # Kafka's behaviour: the name changes even though the file did not move
    finally:
        # An index's close() trims its file, which is not at the new name: drop the map only.
        getattr(obj, "close_handler", obj.close)()


@pytest.mark.parametrize("kind", list(CLASSES))
def test_delete_failure_message(tmp_path: Path, kind: str, deny_unlink: None) -> None:
    name, what, opener = CLASSES[kind]
    path = tmp_path / name
    obj = opener(path)
    with pytest.raises(KafkaStorageError) as info:
        obj.delete_if_exists()
    assert str(info.value) == f"Cannot delete {what}{path}: [Errno 13] Permission denied"
    obj.close()


@pytest.mark.parametrize("kind", list(CLASSES))
def test_delete_then_delete_again(tmp_path: Path, kind: str) -> None:
    name, _, opener = CLASSES[kind]
    path = tmp_path / name
    obj = opener(path)
    expect_file = kind != "lazy-index"  # a lazy index not yet used never created its file
    assert obj.delete_if_exists() is expect_file
    assert obj.delete_if_exists() is False
    assert not path.exists()


def test_unused_lazy_index_and_missing_txn_index_rename_by_name_only(tmp_path: Path) -> None:
    lazy = LazyIndex.for_time(tmp_path / "00.timeindex", 0, 1200)
    txn = TransactionIndex(tmp_path / "00.txnindex", 0)
    for obj, target in ((lazy, tmp_path / "00.timeindex.deleted"), (txn, tmp_path / "00.txnindex.deleted")):
        obj.rename_to(target)
        assert obj.path == target
        assert not target.exists()


def test_delete_files_if_exist_reports_the_bare_path(tmp_path: Path, deny_unlink: None) -> None:
    first = tmp_path / "00000000000000000000.index"
    with pytest.raises(KafkaStorageError, match="^" + re.escape(f"Cannot delete {first}: ")):
        LogSegment.delete_files_if_exist(tmp_path, 0)


def test_delete_files_if_exist_skips_missing_files(tmp_path: Path) -> None:
    (tmp_path / "00000000000000000000.log").write_bytes(b"")
    LogSegment.delete_files_if_exist(tmp_path, 0)
    assert os.listdir(tmp_path) == []
