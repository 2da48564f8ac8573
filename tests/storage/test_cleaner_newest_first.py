"""The cleaner's overlapped round (``Cleaner._clean_newest_first``): the dirty range mapped newest
segment first on the helper while this thread cleans each group as soon as it and everything after
it are mapped, all swapped in once the pass is done. It must write the very files the offset-order
round writes; where it cannot take a range (a batch only the Python path reads, a map too small,
aborted transactions) it hands the round, unchanged, to the offset-order one -- the same files
again; an abort or an error on either thread stops both and leaves the log as it was."""

from __future__ import annotations

import importlib
import random
import shutil
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from kafkalog.clock import MockTime
from kafkalog.records import CompressionType, MemoryRecords, SimpleRecord
from kafkalog.records.control import EndTransactionMarker
from kafkalog.records.types import ControlRecordType, Header
from kafkalog.records.validator import AppendOrigin
from kafkalog.storage.cleaner import offset_map as offset_map_module
from kafkalog.storage.cleaner.cleaner import Cleaner, LogCleaningAbortedError
from kafkalog.storage.cleaner.cleaner_stats import CleanerStats
from kafkalog.storage.cleaner.key_hash import KeyHash
from kafkalog.storage.cleaner.log_cleaner_manager import LogCleanerManager
from kafkalog.storage.cleaner.offset_map import OffsetMap, WalkStop
from kafkalog.storage.log import Log
from kafkalog.tools.verify import verify_data_dir
from tests.storage._cleaning import all_records, clean
from tests.storage.conftest import config

compact = importlib.import_module("kafkalog.records._compact")
map_pass = importlib.import_module("kafkalog.storage.cleaner._map_pass")

SECRET = bytes(range(16))
RETENTION_MS = 5_000
IO_BUFFER = 64 * 1024  # the map pass's buffer: big enough to be shared with the helper
PROPS = {"cleanup_policy": "compact", "segment_bytes": 4000, "delete_retention_ms": RETENTION_MS}

Row = tuple[int, bytes | None, bytes | None, int, tuple[Header, ...]]


@pytest.fixture(autouse=True)
def c_module(monkeypatch: pytest.MonkeyPatch) -> None:
    """The C walks and the C map pass in use, even under KAFKALOG_PURE_PYTHON=1."""
    from kafkalog.storage.cleaner import key_hash

    monkeypatch.setattr(key_hash, "compact_native", compact)
    monkeypatch.setattr(offset_map_module, "compact_native", compact)
    monkeypatch.setattr(offset_map_module, "map_pass", map_pass)


_NEWEST_FIRST = Cleaner._clean_newest_first
_REPLACE_SEGMENTS = Log.replace_segments


class _Rounds:
    """Counts the rounds the overlapped path took, and those it handed back."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, enabled: bool = True) -> None:
        self.taken = 0
        self.handed_back = 0
        original = _NEWEST_FIRST
        rounds = self

        def spy(self: Cleaner, *args: object) -> int | None:
            if not enabled:
                return None
            end: int | None = original(self, *args)  # type: ignore[arg-type]
            if end is None:
                rounds.handed_back += 1
            else:
                rounds.taken += 1
            return end

        monkeypatch.setattr(Cleaner, "_clean_newest_first", spy)


def _append(log: Log, rng: random.Random, keys: int, *, producer: int | None = None,
            codec: CompressionType = CompressionType.NONE, sequences: dict[int, int] | None = None) -> None:
    now = log.time.milliseconds()
    n = rng.randrange(1, 8)
    records = [SimpleRecord(None if rng.random() < 0.1 else rng.randbytes(rng.randrange(0, 24)),
                            b"k%d" % rng.randrange(keys), now - rng.randrange(0, 3),
                            rng.choice([(), (Header("h", b"v"),)])) for _ in range(n)]
    if producer is None:
        log.append_as_leader(MemoryRecords.with_records(2, codec, records))
        return
    assert sequences is not None
    seq = sequences.get(producer, 0)
    log.append_as_leader(MemoryRecords.with_records(2, codec, records, producer_id=producer, producer_epoch=0,
                                                    base_sequence=seq))
    sequences[producer] = seq + n


def _build(directory: Path, seed: int, *, batches: int = 300, keys: int = 40,
           producers: bool = False) -> None:
    """A compacted log of plain batches (tombstones, headers, optionally idempotent producers) over
    many segments, rolled so that all of it is cleanable."""
    time = MockTime()
    log = Log.open(directory, config(**PROPS), time=time)
    rng = random.Random(seed)
    sequences: dict[int, int] = {}
    for _ in range(batches):
        _append(log, rng, keys, producer=rng.randrange(1, 4) if producers and rng.random() < 0.3 else None,
                sequences=sequences)
        time.sleep(rng.randrange(0, 50))
    log.roll()
    log.close()


def _open(directory: Path, time: MockTime) -> Log:
    return Log.open(directory, config(**PROPS), time=time)


def _clean_all(log: Log, memory: int = 24 * 1000,
               check_done: Callable[[str], None] = lambda name: None) -> CleanerStats:
    """Clean until nothing is dirty (one Cleaner, as a cleaner thread has)."""
    offset_map = OffsetMap(memory, key_hash=KeyHash.create(SECRET, siphash=True))
    return clean(log, offset_map=offset_map, io_buffer_size=IO_BUFFER, check_done=check_done)[1]


def _files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


def _rows(log: Log) -> list[Row]:
    return [(r.offset, r.key, r.value, r.timestamp, tuple(r.headers)) for r in all_records(log)]


def _removed(stats: CleanerStats) -> dict[str, int]:
    return {name: getattr(stats, name) for name in (
        "superseded_removed", "tombstones_removed", "invalid_removed", "aborted_removed", "markers_removed")}


def _run(template: Path, directory: Path, monkeypatch: pytest.MonkeyPatch, *, newest_first: bool,
         more: int = 0, memory: int = 24 * 1000) -> tuple[_Rounds, CleanerStats]:
    """Copy the template, clean it, then (``more``) append and roll more batches and clean again,
    then once more after the delete horizons passed."""
    rounds = _Rounds(monkeypatch, newest_first)
    shutil.copytree(template, directory)
    time = MockTime(1_000_000)
    log = _open(directory, time)
    try:
        stats = _clean_all(log, memory)
        if more:
            rng = random.Random(more)
            for _ in range(more):
                _append(log, rng, 40)
            log.roll()
            stats.add(_clean_all(log, memory))
        time.sleep(RETENTION_MS + 1)
        tp = (log.topic, log.partition)
        LogCleanerManager(log.dir.parent, lambda: {tp: log}, time=time).update_checkpoints(update=(tp, 0))
        stats.add(_clean_all(log, memory))
    finally:
        log.close()
    return rounds, stats


@pytest.mark.parametrize(("seed", "producers", "more"), [
    (1, False, 0),
    (2, True, 0),    # idempotent producers: their last batches stay, whatever their records
    (3, False, 60),  # a second round over a clean part and a new dirty range
    (4, True, 60),
])
def test_the_overlapped_round_writes_the_files_the_offset_order_round_writes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int, producers: bool, more: int) -> None:
    template = tmp_path / "template" / "t-0"
    _build(template, seed, producers=producers)
    results = []
    for newest_first in (True, False):
        directory = tmp_path / str(newest_first) / "t-0"
        rounds, stats = _run(template, directory, monkeypatch, newest_first=newest_first, more=more)
        assert verify_data_dir(directory.parent).ok
        results.append((rounds, stats, _files(directory)))
    (rounds, nf_stats, nf_files), (_, oo_stats, oo_files) = results
    assert rounds.taken >= 2 and rounds.handed_back == 0  # every round overlapped
    assert _removed(nf_stats) == _removed(oo_stats)
    assert nf_stats.superseded_removed > 0 and nf_stats.tombstones_removed > 0
    assert nf_stats.segments_after < nf_stats.segments_before
    assert nf_files.keys() == oo_files.keys()
    for name in nf_files:
        assert nf_files[name] == oo_files[name], name


def test_the_latest_offset_bits_kept_newest_first_are_those_a_scan_of_the_table_gives(tmp_path: Path) -> None:
    template = tmp_path / "t-0"
    _build(template, 7, batches=400, keys=25)
    log = _open(template, MockTime())
    try:
        segments = log.segments.values()[:-1]  # the active one is empty
        start, end = segments[0].base_offset, log.segments.active_segment.base_offset
        offset_map = OffsetMap(24 * 200, key_hash=KeyHash.create(SECRET, siphash=True))
        assert offset_map.begin_newest_first(start, end)
        buffer = bytearray(4 * 1024)
        for segment in reversed(segments):
            fd, base = segment.log.local_descriptor()  # type: ignore[misc]
            position = 0
            while position < segment.log.size_in_bytes:  # windows of 1 KiB: often cut inside a batch
                cuts = Cleaner._cuts(segment, position, 1024)
                walk = offset_map.put_windows(fd, base, cuts, buffer, 1024, start, 10**9, newest=True)
                assert walk.stop is WalkStop.END and walk.consumed > 0
                position += walk.consumed
        kept = bytes(offset_map._latest_bits)
        scanned = bytearray(len(kept))
        compact.offset_map_index_latest(offset_map._table, start, scanned)
        assert kept == bytes(scanned)
        # ... and they mark each key's last record: what a plain dict over the records says.
        latest: dict[bytes, int] = {}
        for record in all_records(log):
            if record.key is not None:
                latest[record.key] = record.offset
        marked = {i + start for i in range(len(kept) * 8) if kept[i >> 3] >> (i & 7) & 1}
        assert marked == set(latest.values())
        assert offset_map.latest_offset == end - 1 and offset_map.size == len(latest)
    finally:
        log.close()


def _insert_batch(directory: Path, make: object) -> Path:
    """A template whose middle holds one batch the overlapped round cannot take (``make(log, now)``)."""
    time = MockTime()
    log = Log.open(directory, config(**PROPS), time=time)
    rng = random.Random(11)
    for i in range(300):
        if i == 120:
            make(log, time.milliseconds())  # type: ignore[operator]
        _append(log, rng, 40)
        time.sleep(rng.randrange(0, 50))
    log.roll()
    log.close()
    return directory


def _gzip(log: Log, now: int) -> None:
    log.append_as_leader(MemoryRecords.with_records(2, CompressionType.GZIP, [
        SimpleRecord(b"zipped", b"k%d" % i, now) for i in range(5)]))


def _aborted(log: Log, now: int) -> None:
    log.append_as_leader(MemoryRecords.with_records(2, CompressionType.NONE, [
        SimpleRecord(b"aborted", b"k1", now)], producer_id=77, producer_epoch=0, base_sequence=0,
        is_transactional=True))
    log.append_as_leader(MemoryRecords.with_end_transaction_marker(
        0, now, 0, 77, 0, EndTransactionMarker(ControlRecordType.ABORT, 0)), origin=AppendOrigin.COORDINATOR)


@pytest.mark.parametrize(("make", "memory"), [
    (_gzip, 24 * 1000),   # found by the C walk: newer groups are cleaned by then
    (_aborted, 24 * 1000),  # known before the pass starts
    (None, 24 * 30),      # 40 keys in a map of 27: the map fills
])
def test_what_the_overlapped_round_cannot_take_goes_to_the_offset_order_round_unchanged(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, make: object, memory: int) -> None:
    template = tmp_path / "template" / "t-0"
    if make is None:
        _build(template, 11)
    else:
        _insert_batch(template, make)
    results = []
    for newest_first in (True, False):
        swaps: list[int] = []

        def counted(self: Log, new: list[object], old: list[object], swaps: list[int] = swaps) -> object:
            swaps.append(len(new))
            return _REPLACE_SEGMENTS(self, new, old)  # type: ignore[arg-type]

        monkeypatch.setattr(Log, "replace_segments", counted)
        directory = tmp_path / str(newest_first) / "t-0"
        rounds, stats = _run(template, directory, monkeypatch, newest_first=newest_first, memory=memory)
        assert verify_data_dir(directory.parent).ok
        results.append((rounds, stats, _files(directory), swaps))
    (rounds, nf_stats, nf_files, nf_swaps), (_, oo_stats, oo_files, oo_swaps) = results
    assert rounds.handed_back >= 1
    # Nothing went in before the round was handed back: as many groups swapped in (how many
    # at a time depends on how the helper's swaps keep up)
    assert sum(nf_swaps) == sum(oo_swaps)
    assert _removed(nf_stats) == _removed(oo_stats) and nf_stats.records_removed > 0
    assert nf_files.keys() == oo_files.keys()
    for name in nf_files:
        assert nf_files[name] == oo_files[name], name


@pytest.mark.parametrize("where", ["map pass", "cleaning"])
def test_an_abort_or_error_on_either_thread_stops_both_and_loses_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    directory = tmp_path / "t-0"
    _build(directory, 5, batches=400)
    time = MockTime(1_000_000)
    log = _open(directory, time)
    before = _rows(log)
    calls = {"n": 0}

    def check_done(name: str) -> None:
        if threading.current_thread() is not threading.main_thread():
            calls["n"] += 1
            if calls["n"] == 6:  # the map pass's sixth segment
                raise LogCleaningAbortedError(f"Cleaning of {name} aborted")

    failing = {"n": 0}
    clean_segments = Cleaner.clean_segments

    def failing_clean(self: Cleaner, *args: object, **kwargs: object) -> object:
        failing["n"] += 1
        if failing["n"] == 3:
            raise OSError("No space left on device")
        return clean_segments(self, *args, **kwargs)  # type: ignore[arg-type]

    def counting_clean(self: Cleaner, *args: object, **kwargs: object) -> object:
        failing["n"] += 1
        return clean_segments(self, *args, **kwargs)  # type: ignore[arg-type]

    if where == "cleaning":
        monkeypatch.setattr(Cleaner, "clean_segments", failing_clean)
    else:
        monkeypatch.setattr(Cleaner, "clean_segments", counting_clean)
    rounds = _Rounds(monkeypatch)
    expected = LogCleaningAbortedError if where == "map pass" else OSError
    try:
        with pytest.raises(expected):
            _clean_all(log, check_done=check_done if where == "map pass" else lambda name: None)
        assert rounds.taken == 0
        assert not [p for p in directory.iterdir() if p.suffix in (".cleaned", ".swap")]
        assert not [t for t in threading.enumerate() if "cleaner" in t.name and "helper" in t.name]
        after = _rows(log)
        cleaned_before_the_stop = failing["n"] >= 2
    finally:
        log.close()
    assert verify_data_dir(directory.parent).ok
    assert cleaned_before_the_stop  # groups were cleaned (and dropped) before the round stopped
    assert after == before  # nothing was swapped in
    reopened = _open(directory, MockTime())
    try:
        assert _rows(reopened) == after
    finally:
        reopened.close()


@pytest.mark.parametrize("native", [True, False])
def test_the_offset_map_is_zeroed_in_place_and_only_when_used(monkeypatch: pytest.MonkeyPatch,
                                                              native: bool) -> None:
    if not native:
        monkeypatch.setattr(offset_map_module, "compact_native", None)
        monkeypatch.setattr(offset_map_module, "_ZERO_STEP", 1000)  # several steps, the last one short
    offset_map = OffsetMap(24 * 1000, key_hash=KeyHash.create(SECRET, siphash=native))
    assert not any(offset_map._table)
    for i in range(900):
        offset_map.put(b"k%d" % i, i)
    assert offset_map.get(b"k5") == 5 and any(offset_map._table)
    offset_map.clear()
    assert offset_map.get(b"k5") == -1 and not any(offset_map._table) and offset_map.size == 0
    zeroed: list[object] = []
    monkeypatch.setattr(offset_map_module, "_zero", zeroed.append)
    offset_map.clear()  # nothing was put since: nothing to zero
    assert zeroed == []
