"""TransactionIndex and AbortedTxn: Kafka's TransactionIndexTest behaviours and the golden file."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkalog.errors import CorruptIndexError, InvalidOffsetError
from kafkalog.storage.txn_index import ABORTED_TXN_SIZE, AbortedTxn, TransactionIndex, TxnIndexSearchResult

TXNS = [
    AbortedTxn(0, 0, 10, 11),
    AbortedTxn(1, 5, 15, 13),
    AbortedTxn(2, 18, 35, 25),
    AbortedTxn(3, 32, 50, 40),
]


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "00000000000000000000.txnindex"


@pytest.fixture
def index(path: Path) -> Iterator[TransactionIndex]:
    idx = TransactionIndex(path, 0)
    yield idx
    idx.close()


def _fill(index: TransactionIndex, txns: list[AbortedTxn]) -> None:
    for txn in txns:
        index.append(txn)


def test_aborted_txn_serde() -> None:
    txn = AbortedTxn(983493, 137, 299, 200)
    assert txn.version == AbortedTxn.CURRENT_VERSION == 0
    raw = txn.to_bytes()
    assert len(raw) == ABORTED_TXN_SIZE == 34
    assert raw == bytes.fromhex(
        "0000" "00000000000f01c5" "0000000000000089" "000000000000012b" "00000000000000c8")
    assert AbortedTxn.from_bytes(raw) == txn
    assert AbortedTxn.from_bytes(b"xx" + raw, 2) == txn


def test_file_is_created_lazily(path: Path) -> None:
    index = TransactionIndex(path, 0)
    assert not path.exists()
    assert index.all_aborted_txns() == []
    assert index.is_empty()
    # None of these creates the file; an index without a file passes its sanity check.
    for operation in (index.reset, index.flush, index.sanity_check, lambda: index.truncate_to(0)):
        operation()
        assert not path.exists()
    assert index.all_aborted_txns() == [] and index.is_empty()
    index.append(AbortedTxn(0, 0, 10, 2))
    assert path.stat().st_size == ABORTED_TXN_SIZE
    assert not index.is_empty()
    index.close()


def test_reopen_and_append(index: TransactionIndex, path: Path) -> None:
    _fill(index, TXNS)
    index.close()
    reopened = TransactionIndex(path, 0)
    another = AbortedTxn(3, 50, 60, 55)
    reopened.append(another)
    assert reopened.all_aborted_txns() == [*TXNS, another]
    reopened.close()


def test_sanity_check(index: TransactionIndex, path: Path) -> None:
    _fill(index, TXNS)
    index.sanity_check()
    index.close()
    with TransactionIndex(path, 100) as shifted, pytest.raises(
            CorruptIndexError, match=r"0000000000\.txnindex is less than start offset 100"):
        shifted.sanity_check()


def test_last_offset_must_increase(index: TransactionIndex) -> None:
    index.append(AbortedTxn(1, 5, 15, 13))
    with pytest.raises(InvalidOffsetError, match="must increase"):
        index.append(AbortedTxn(0, 0, 15, 11))
    with pytest.raises(InvalidOffsetError):
        index.append(AbortedTxn(0, 0, 10, 11))
    assert index.all_aborted_txns() == [AbortedTxn(1, 5, 15, 13)]


def test_collect_aborted_transactions(index: TransactionIndex) -> None:
    _fill(index, TXNS)
    assert index.collect_aborted_txns(0, 100) == TxnIndexSearchResult(TXNS, False)
    assert index.collect_aborted_txns(0, 32) == TxnIndexSearchResult(TXNS[:3], True)
    assert index.collect_aborted_txns(0, 35) == TxnIndexSearchResult(TXNS, True)
    assert index.collect_aborted_txns(10, 35) == TxnIndexSearchResult(TXNS, True)
    assert index.collect_aborted_txns(11, 35) == TxnIndexSearchResult(TXNS[1:], True)
    txns, complete = index.collect_aborted_txns(20, 41)
    assert (txns, complete) == (TXNS[2:], False)


def test_truncate(index: TransactionIndex, path: Path) -> None:
    txns = [AbortedTxn(0, 0, 10, 2), AbortedTxn(1, 5, 15, 16), AbortedTxn(2, 18, 35, 25),
            AbortedTxn(3, 32, 50, 40)]
    _fill(index, txns)
    index.truncate_to(51)
    assert index.collect_aborted_txns(0, 100).aborted_transactions == txns
    index.truncate_to(50)
    assert index.collect_aborted_txns(0, 100).aborted_transactions == txns[:3]
    assert path.stat().st_size == 3 * ABORTED_TXN_SIZE
    # the order check restarts from the new last entry
    index.append(AbortedTxn(4, 40, 45, 41))
    with pytest.raises(InvalidOffsetError):
        index.append(AbortedTxn(5, 40, 45, 41))
    index.truncate_to(12)
    assert index.all_aborted_txns() == txns[:1]
    index.reset()
    assert index.collect_aborted_txns(0, 100).aborted_transactions == []
    assert path.stat().st_size == 0
    index.append(AbortedTxn(0, 0, 1, 0))  # reset forgets the last offset


def test_rename_and_append(index: TransactionIndex, tmp_path: Path) -> None:
    index.append(AbortedTxn(0, 0, 10, 2))
    renamed = tmp_path / "renamed.txnindex"
    index.rename_to(renamed)
    assert index.path == renamed
    index.append(AbortedTxn(1, 5, 15, 16))
    txns = index.collect_aborted_txns(0, 100).aborted_transactions
    assert [t.first_offset for t in txns] == [0, 5]
    assert renamed.stat().st_size == 2 * ABORTED_TXN_SIZE


def test_rename_of_missing_file_only_moves_the_name(path: Path, tmp_path: Path) -> None:
    index = TransactionIndex(path, 0)
    target = tmp_path / "x.txnindex.deleted"
    index.rename_to(target)
    assert index.path == target and not target.exists()


def test_update_parent_dir(index: TransactionIndex, tmp_path: Path) -> None:
    parent = tmp_path / "parent"
    parent.mkdir()
    index.update_parent_dir(parent)
    assert index.path.parent == parent


def test_flush_and_delete(index: TransactionIndex, path: Path) -> None:
    index.flush()
    index.append(AbortedTxn(0, 0, 10, 2))
    index.flush()
    assert path.stat().st_size > 0
    assert index.delete_if_exists() is True
    assert not path.exists()
    assert index.delete_if_exists() is False
    assert index.all_aborted_txns() == []


def test_append_and_collect_after_close(index: TransactionIndex) -> None:
    index.close()
    index.append(AbortedTxn(0, 0, 10, 2))
    index.close()
    index.append(AbortedTxn(1, 5, 15, 16))
    index.close()
    assert [t.first_offset for t in index.collect_aborted_txns(0, 100).aborted_transactions] == [0, 5]


def test_partial_trailing_entry_is_ignored(index: TransactionIndex, path: Path) -> None:
    _fill(index, TXNS[:2])
    index.close()
    with path.open("ab") as f:
        f.write(b"\x00" * 20)
    with TransactionIndex(path, 0) as reopened:
        assert reopened.all_aborted_txns() == TXNS[:2]
        reopened.sanity_check()


def test_version_is_read_as_one_byte(path: Path) -> None:
    body = AbortedTxn(7, 1, 2, 3).to_bytes()[2:]
    # 00 01: Kafka reads only the high byte (0), so this entry is accepted as version 0
    path.write_bytes(b"\x00\x01" + body)
    with TransactionIndex(path, 0) as index:
        assert index.all_aborted_txns() == [AbortedTxn(7, 1, 2, 3)]
    # ff 00: the byte is signed (-1), not above the current version, so it is accepted too
    path.write_bytes(b"\xff\x00" + body)
    with TransactionIndex(path, 0) as index:
        assert index.all_aborted_txns() == [AbortedTxn(7, 1, 2, 3)]
    # 01 00: version 1 is unknown
    path.write_bytes(AbortedTxn(7, 1, 2, 3).to_bytes() + b"\x01\x00" + body)
    with TransactionIndex(path, 0) as index, pytest.raises(
            CorruptIndexError, match=r"version 1 .*0000000000\.txnindex at position 34"):
        index.all_aborted_txns()


def test_golden_s6_read(kafka_golden_dir: Path) -> None:
    golden = kafka_golden_dir / "s6_00000000000000000100.txnindex"
    with TransactionIndex(golden, 100) as index:
        txns = index.all_aborted_txns()
        index.sanity_check()
        assert txns == [AbortedTxn(4242, 105, 107, 100), AbortedTxn(99, 120, 130, 118)]
        assert index.collect_aborted_txns(100, 110) == TxnIndexSearchResult(txns[:1], True)  # lso 118
        assert index.collect_aborted_txns(100, 119) == TxnIndexSearchResult(txns[:1], False)
        assert index.collect_aborted_txns(108, 125) == TxnIndexSearchResult(txns[1:], False)
        assert index.collect_aborted_txns(108, 118) == TxnIndexSearchResult([], True)
        assert index.collect_aborted_txns(131, 200) == TxnIndexSearchResult([], False)
    with TransactionIndex(golden, 108) as later_start, pytest.raises(CorruptIndexError):
        later_start.sanity_check()


def test_golden_s6_rewrite_is_byte_identical(kafka_golden_dir: Path, tmp_path: Path) -> None:
    golden = kafka_golden_dir / "s6_00000000000000000100.txnindex"
    with TransactionIndex(golden, 100) as index:
        txns = index.all_aborted_txns()
    out = tmp_path / golden.name
    with TransactionIndex(out, 100) as rewritten:
        _fill(rewritten, txns)
    assert out.read_bytes() == golden.read_bytes()
    # and truncating a copy behaves like Kafka's: cut at the first entry ending at or after the offset
    copy = tmp_path / "copy.txnindex"
    shutil.copyfile(golden, copy)
    with TransactionIndex(copy, 100) as index:
        index.truncate_to(108)
        assert copy.read_bytes() == golden.read_bytes()[:ABORTED_TXN_SIZE]
