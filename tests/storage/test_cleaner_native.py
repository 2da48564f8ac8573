"""The cleaner's C walks (``records/_compact.c``) against its Python path: the same cleaned files,
byte for byte, on logs mixing every kind of batch; and the C module's SipHash and CRC-32C against
their references."""

from __future__ import annotations

import importlib
import math
import os
import random
import shutil
from array import array
from collections.abc import Callable
from pathlib import Path

import crc32c
import pytest

from kafkalog.clock import MockTime
from kafkalog.errors import CorruptRecordError
from kafkalog.records import CompressionType, MemoryRecords, SimpleRecord
from kafkalog.records.control import EndTransactionMarker
from kafkalog.records.native import native
from kafkalog.records.types import ControlRecordType, Header
from kafkalog.records.validator import AppendOrigin
from kafkalog.storage.cleaner import cleaner as cleaner_module
from kafkalog.storage.cleaner import map_pass as map_pass_module
from kafkalog.storage.cleaner import offset_map as offset_map_module
from kafkalog.storage.cleaner.cleaner import Cleaner
from kafkalog.storage.cleaner.cleaner_stats import CleanerStats
from kafkalog.storage.cleaner.key_hash import KeyHash
from kafkalog.storage.cleaner.log_cleaner_manager import LogCleanerManager
from kafkalog.storage.cleaner.log_to_clean import LogToClean
from kafkalog.storage.cleaner.offset_map import OffsetMap, WalkStop
from kafkalog.storage.index import OffsetIndex
from kafkalog.storage.log import Log
from kafkalog.tools.verify import verify_data_dir
from tests.storage._cleaning import all_records, clean
from tests.storage.conftest import config

# The extension itself, even where KAFKALOG_PURE_PYTHON=1 keeps the library from using it.
compact = importlib.import_module("kafkalog.records._compact")

SECRET = bytes(range(16))
RETENTION_MS = 5_000


@pytest.fixture
def c_module(monkeypatch: pytest.MonkeyPatch) -> None:
    """The C module in use by the cleaner, even under KAFKALOG_PURE_PYTHON=1 (tests switch it off)."""
    from kafkalog.storage.cleaner import key_hash

    monkeypatch.setattr(key_hash, "compact_native", compact)
    monkeypatch.setattr(offset_map_module, "compact_native", compact)
    monkeypatch.setattr(offset_map_module, "map_pass",
                        importlib.import_module("kafkalog.storage.cleaner._map_pass"))


def _siphash(data: bytes, key: bytes, c: int, d: int, wide: bool) -> bytes:
    """SipHash-c-d written from the paper, in Python: checked below against the reference vectors of
    two variants, then used as the reference for the C module's SipHash-1-3-128."""
    mask = 2**64 - 1

    def rotl(x: int, b: int) -> int:
        return ((x << b) | (x >> (64 - b))) & mask

    k0, k1 = int.from_bytes(key[:8], "little"), int.from_bytes(key[8:], "little")
    v = [k0 ^ 0x736F6D6570736575, k1 ^ 0x646F72616E646F6D ^ (0xEE if wide else 0),
         k0 ^ 0x6C7967656E657261, k1 ^ 0x7465646279746573]

    def rounds(n: int) -> None:
        for _ in range(n):
            v[0] = (v[0] + v[1]) & mask; v[1] = rotl(v[1], 13) ^ v[0]; v[0] = rotl(v[0], 32)  # noqa: E702
            v[2] = (v[2] + v[3]) & mask; v[3] = rotl(v[3], 16) ^ v[2]  # noqa: E702
            v[0] = (v[0] + v[3]) & mask; v[3] = rotl(v[3], 21) ^ v[0]  # noqa: E702
            v[2] = (v[2] + v[1]) & mask; v[1] = rotl(v[1], 17) ^ v[2]; v[2] = rotl(v[2], 32)  # noqa: E702

    padded = data + bytes(7 - len(data) % 8) + bytes([len(data) & 0xFF])
    for i in range(0, len(padded), 8):
        m = int.from_bytes(padded[i:i + 8], "little")
        v[3] ^= m
        rounds(c)
        v[0] ^= m
    v[2] ^= 0xEE if wide else 0xFF
    rounds(d)
    out = (v[0] ^ v[1] ^ v[2] ^ v[3]).to_bytes(8, "little")
    if wide:
        v[1] ^= 0xDD
        rounds(d)
        out += (v[0] ^ v[1] ^ v[2] ^ v[3]).to_bytes(8, "little")
    return out


def test_siphash_gives_the_reference_vectors() -> None:
    # The Python SipHash above against the reference implementation's vectors (Aumasson &
    # Bernstein) over the messages 00..(n-1): SipHash-2-4-128 with the key 00..0f, and SipHash-1-3
    # (64-bit output) with the zero key.
    sip24_128 = {0: "a3817f04ba25a8e66df67214c7550293", 1: "da87c1d86b99af44347659119b22fc45",
                 15: "5493e99933b0a8117e08ec0f97cfc3d9"}
    for n, digest in sip24_128.items():
        assert _siphash(bytes(range(n)), SECRET, 2, 4, True).hex() == digest
    sip13_64 = {0: 0xD1FBA762150C532C, 1: 0x68A914128E01E473, 7: 0x2F098AB0C751325A,
                8: 0xEAD411E67EBE2EEA, 9: 0x75927F9D95124362, 16: 0x8972188433A5C5B7,
                63: 0x385D3E39E5F37359}
    for n, value in sip13_64.items():
        assert int.from_bytes(_siphash(bytes(range(n)), bytes(16), 1, 3, False), "little") == value
        assert compact.siphash13(bytes(range(n)), 0, 0, False) == (value, 0)
    # The C module's SipHash-1-3-128 (the offset map's hash) against the Python one.
    rng = random.Random(7)
    for n in [*range(34), 100, 1000]:
        data, key = rng.randbytes(n), rng.randbytes(16)
        k0, k1 = int.from_bytes(key[:8], "little"), int.from_bytes(key[8:], "little")
        first, second = compact.siphash13(data, k0, k1)
        assert first.to_bytes(8, "little") + second.to_bytes(8, "little") == _siphash(data, key, 1, 3, True)


def test_keys_hashed_eight_at_a_time_hash_as_one_at_a_time() -> None:
    """The map pass hashes keys eight at a time (AVX-512 lanes, where the CPU has them): lanes whose
    keys differ in length by whole blocks, empty keys, and a count that is not a multiple of eight
    give what the one-key SipHash gives."""
    rng = random.Random(8)
    for count in (1, 7, 8, 9, 64, 1001):
        keys = [rng.randbytes(rng.choice([0, 1, 7, 8, 9, 15, 16, 17, 40, rng.randrange(200)]))
                for _ in range(count)]
        k0, k1 = rng.getrandbits(64), rng.getrandbits(64)
        assert compact.siphash128_many(keys, k0, k1) == [compact.siphash13(key, k0, k1) for key in keys]


def test_key_hashes_depend_on_the_secret(c_module: None) -> None:
    for siphash in (True, False):
        a = KeyHash.create(SECRET, siphash=siphash)
        b = KeyHash.create(bytes(16), siphash=siphash)
        assert a.halves(b"key") == a.halves(b"key") != b.halves(b"key")
    assert KeyHash.create().secret != KeyHash.create().secret  # random per map
    assert "secret" not in repr(KeyHash.create(SECRET)) and SECRET.hex() not in repr(KeyHash.create(SECRET))


def test_crc32c_matches_the_reference_package() -> None:
    rng = random.Random(3)
    # Around the lengths where the SSE 4.2 path switches to three interleaved 512-byte streams.
    for n in [*range(40), 63, 64, 65, 1000, 1535, 1536, 1537, 1543, 3072, 3077, 4097, 4608, 65536]:
        data = rng.randbytes(n)
        assert compact.crc32c(data) == crc32c.crc32c(data)


# --- whole cleanings, C walks vs Python path ------------------------------------------------------

def _build(directory: Path, rng: random.Random, time: MockTime, **props: object) -> Log:
    """A compacted log of every kind of batch the cleaner meets, in random order."""
    log = Log.open(directory, config(cleanup_policy="compact", segment_bytes=3000, **props), time=time)
    keys = [b"k%d" % i for i in range(15)]
    headers_choices = [(), (Header("h", b"v"),), (Header("ключ", b"v"), Header("n", None))]
    sequences: dict[int, int] = {}
    open_txn: dict[int, bool] = {}
    for _ in range(120):
        kind = rng.choice(["plain", "plain", "plain", "big", "gzip", "idempotent", "txn", "end"])
        now = time.milliseconds()
        n = rng.randrange(1, 60) if kind == "big" else rng.randrange(1, 8)
        records = [SimpleRecord(None if rng.random() < 0.15 else rng.randbytes(rng.randrange(0, 30)),
                                rng.choice(keys), now - rng.randrange(0, 3), rng.choice(headers_choices))
                   for _ in range(n)]
        if kind in ("plain", "big", "gzip"):
            codec = CompressionType.GZIP if kind == "gzip" else CompressionType.NONE
            log.append_as_leader(MemoryRecords.with_records(2, codec, records))
        elif kind in ("idempotent", "txn"):
            pid = rng.randrange(1, 4) + (10 if kind == "txn" else 0)
            seq = sequences.get(pid, 0)
            if kind == "txn":
                open_txn[pid] = True
            log.append_as_leader(MemoryRecords.with_records(
                2, CompressionType.NONE, records, producer_id=pid, producer_epoch=0, base_sequence=seq,
                is_transactional=kind == "txn"))
            sequences[pid] = seq + n
        elif open_txn:
            pid = rng.choice(sorted(open_txn))
            del open_txn[pid]
            marker = EndTransactionMarker(rng.choice([ControlRecordType.COMMIT, ControlRecordType.ABORT]), 0)
            log.append_as_leader(MemoryRecords.with_end_transaction_marker(0, now, 0, pid, 0, marker),
                                 origin=AppendOrigin.COORDINATOR)
        time.sleep(rng.randrange(0, 400))
    for pid in sorted(open_txn):  # close what is open, so that everything becomes cleanable
        log.append_as_leader(MemoryRecords.with_end_transaction_marker(
            0, time.milliseconds(), 0, pid, 0, EndTransactionMarker(ControlRecordType.COMMIT, 0)),
            origin=AppendOrigin.COORDINATOR)
    log.roll()
    return log


def _clean_rounds(log: Log, memory: int, io_buffer_size: int, time: MockTime) -> CleanerStats:
    """Clean until nothing is dirty, then again after the delete horizons pass."""
    offset_map = OffsetMap(memory, key_hash=KeyHash.create(SECRET, siphash=True))
    tp = (log.topic, log.partition)
    manager = LogCleanerManager(log.dir.parent, lambda: {tp: log}, time=time)
    total = CleanerStats(time)
    for _ in range(2):
        total.add(clean(log, offset_map=offset_map, io_buffer_size=io_buffer_size)[1])
        time.sleep(RETENTION_MS + 1)
        manager.update_checkpoints(update=(tp, 0))  # clean everything again: the horizons have passed
    return total


def _files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


# split: the map pass on two threads, "c" reading in C (_map_pass.c), "py" with Python's thread pool
@pytest.mark.parametrize(("seed", "memory", "io_buffer", "timestamp_type", "latest_bits", "split"), [
    (1, 24 * 1000, 4096, "CreateTime", True, "c"),
    (1, 24 * 1000, 4096, "CreateTime", True, "py"),
    (1, 24 * 1000, 4096, "CreateTime", False, None),  # every record of the cleaning pass probes the map
    (2, 24 * 12, 4096, "CreateTime", True, "c"),      # several rounds: the map holds few keys
    (2, 24 * 12, 4096, "CreateTime", True, "py"),
    (2, 24 * 12, 4096, "CreateTime", False, None),
    (3, 24 * 1000, 1024, "LogAppendTime", True, "c"),  # batches outgrow the buffer (Python path)
    (4, 24 * 40, 64 * 1024, "CreateTime", True, None),
    (5, 24 * 30, 2048, "CreateTime", True, "c"),      # the map fills in the helper's half of a read
    (5, 24 * 30, 2048, "CreateTime", True, "py"),
])
def test_c_walks_and_python_path_write_the_same_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, c_module: None, seed: int, memory: int,
        io_buffer: int, timestamp_type: str, latest_bits: bool, split: str | None) -> None:
    """The C walks (with or without the map pass's latest-offset bits -- and so with or without
    batches dropped unread from its directory --, with or without a helper thread hashing every
    other window, in C or from Python's thread pool) clean into the very files the Python path
    writes."""
    monkeypatch.setattr(offset_map_module, "LATEST_BITS_MIN_PUTS_PER_SLOT", 0 if latest_bits else math.inf)
    monkeypatch.setattr(map_pass_module, "MIN_SPLIT_READ", 0 if split else 2**62)
    if split == "py":
        monkeypatch.setattr(offset_map_module, "map_pass", None)
    reader = _MapPassSpy(monkeypatch)
    py_windows = []
    put_windows_py = Cleaner._put_windows_py

    def counted(self: Cleaner, *args: object) -> object:
        py_windows.append(1)
        return put_windows_py(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(Cleaner, "_put_windows_py", counted)
    props = {"delete_retention_ms": RETENTION_MS, "message_timestamp_type": timestamp_type}
    template = tmp_path / "template" / "t-0"
    time = MockTime()
    _build(template, random.Random(seed), time, **props).close()
    results = []
    spy = _IndexSpy()
    for walks in (True, False):
        monkeypatch.setattr(offset_map_module, "compact_native", spy if walks else None)
        directory = tmp_path / ("c" if walks else "python") / "t-0"
        shutil.copytree(template, directory)
        clock = MockTime(time.milliseconds())
        log = Log.open(directory, config(cleanup_policy="compact", segment_bytes=3000, **props), time=clock)
        stats = _clean_rounds(log, memory, io_buffer, clock)
        log.close()
        assert verify_data_dir(directory.parent).ok
        results.append((_files(directory), _stats(stats)))
    (c_files, c_stats), (py_files, py_stats) = results
    assert (reader.calls > 0) == (split == "c")
    assert (len(py_windows) > 0) == (split == "py")
    if not latest_bits:
        assert spy.indexed == spy.skipped == 0
    elif memory >= 24 * 1000:  # a small map's rounds are too short to pay for the bits
        assert spy.indexed > 0
        assert spy.skipped > 0  # batches dropped from the map pass's directory alone
    # An overlapped round handed back to the offset-order one (at a batch for the Python path, the
    # map full) has read some of the range once more; everything else is counted alike.
    for name in ("map_bytes_read", "map_messages_read"):
        assert c_stats.pop(name) >= py_stats.pop(name)
    assert c_stats == py_stats
    assert c_stats["superseded_removed"] > 0 and c_stats["tombstones_removed"] > 0
    assert c_files.keys() == py_files.keys()
    for name in c_files:
        assert c_files[name] == py_files[name], name


def _shifted_positions(by: int) -> Callable[[OffsetIndex], array[int]]:
    original = OffsetIndex.positions

    def positions(index: OffsetIndex) -> array[int]:
        return array("i", (position + by for position in original(index)))
    return positions


@pytest.mark.parametrize("c_reader", [True, False])
def test_index_entries_that_are_not_batch_starts_only_slow_the_map_pass(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, c_module: None, c_reader: bool) -> None:
    """The two-thread map pass cuts each segment into windows where the offset index says batches
    start; where it is wrong (here: every entry it asks for 3 bytes off), a window's walk ends short
    of its end and the pass goes on from there: the same files as with a sound index."""
    monkeypatch.setattr(map_pass_module, "MIN_SPLIT_READ", 0)
    if not c_reader:
        monkeypatch.setattr(offset_map_module, "map_pass", None)
    props = {"cleanup_policy": "compact", "segment_bytes": 16 * 1024, "index_interval_bytes": 1}
    template = tmp_path / "template" / "t-0"
    rng = random.Random(21)
    time = MockTime()
    with Log.open(template, config(**props), time=time) as log:
        for _ in range(300):
            log.append_as_leader(MemoryRecords.with_records(2, CompressionType.NONE, [
                SimpleRecord(rng.randbytes(rng.randrange(0, 20)), b"k%d" % rng.randrange(30),
                             time.milliseconds()) for _ in range(rng.randrange(1, 6))]))
        log.roll()
    results, windows = [], []
    for shift in (0, 3):
        directory = tmp_path / f"shift-{shift}" / "t-0"
        shutil.copytree(template, directory)
        monkeypatch.setattr(OffsetIndex, "positions", _shifted_positions(shift))
        spy = _IndexSpy()
        monkeypatch.setattr(offset_map_module, "compact_native", spy)
        reader = _MapPassSpy(monkeypatch)
        with Log.open(directory, config(**props), time=MockTime(), had_clean_shutdown=True) as log:
            cleaner = Cleaner(OffsetMap(24 * 1000, key_hash=KeyHash.create(SECRET, siphash=True)),
                              io_buffer_size=2048, time=log.time)
            cleaner.clean(LogToClean(log.topic, log.partition, log, 0, log.active_segment.base_offset))
        results.append(_files(directory))
        # windows mapped whole: by the C reader, calls that got past their first window
        room = len(cleaner._map_buffer) // map_pass_module.MAP_SLOTS
        windows.append(sum(consumed > room for consumed in reader.consumed) if c_reader else spy.windows_put)
    assert results[0] == results[1]
    assert windows[0] > (1 if c_reader else 10) and windows[1] == 0  # many, then none


@pytest.mark.parametrize("codec", [CompressionType.NONE, CompressionType.GZIP])
def test_superseded_batches_are_not_read_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               c_module: None, codec: CompressionType) -> None:
    """A log of few keys updated again and again: the cleaning pass reads the batches around the
    keys' latest records, not the whole log, and counts the others as read and superseded --
    compressed batches too (the map pass's Python path records them), which are then not even
    decompressed."""
    time = MockTime()
    log = Log.open(tmp_path / "t-0", config(cleanup_policy="compact", segment_bytes=64 * 1024), time=time)
    try:
        for n in range(400):
            log.append_as_leader(MemoryRecords.with_records(2, codec, [
                SimpleRecord(b"value-%d" % n, b"key-%d" % (i % 7), time.milliseconds()) for i in range(10)]))
        log.roll()
        size = log.size_in_bytes
        read = [0]
        cleaning = [False]
        original = cleaner_module.FileRecords.read_into
        original_pread = cleaner_module.FileRecords._pread

        def counting(self: object, position: int, buffer: memoryview) -> memoryview:
            data: memoryview = original(self, position, buffer)  # type: ignore[arg-type]
            if cleaning[0]:
                read[0] += len(data)
            return data

        def counting_pread(self: object, size: int, position: int) -> bytes:  # the Python path's reads
            data: bytes = original_pread(self, size, position)  # type: ignore[arg-type]
            if cleaning[0]:
                read[0] += len(data)
            return data

        def start_cleaning(*args: object, **kwargs: object) -> None:
            cleaning[0] = True
            return original_clean_into(*args, **kwargs)

        original_clean_into = Cleaner.clean_into
        monkeypatch.setattr(cleaner_module.FileRecords, "read_into", counting)
        monkeypatch.setattr(cleaner_module.FileRecords, "_pread", counting_pread)
        monkeypatch.setattr(Cleaner, "clean_into", start_cleaning)
        # The directory gets an eighth of the map's memory: 400 entries of 48 bytes fit in this one.
        _, stats = Cleaner(OffsetMap(24 * 10_000), time=time).clean(
            LogToClean(log.topic, log.partition, log, 0, log.active_segment.base_offset))
        assert stats.bytes_read == stats.map_bytes_read == size
        assert stats.messages_read == 4000 and stats.messages_written == 7
        assert stats.superseded_removed == 4000 - 7
        assert 0 < read[0] < size // 20
        assert {record.key: record.value for record in all_records(log)} == {
            b"key-%d" % i: b"value-399" for i in range(7)}
    finally:
        log.close()


def test_hashing_on_the_helper_then_putting_maps_as_put_batches_does(c_module: None) -> None:
    """hash_batches + put_hashes (the helper thread's half of a read) against put_batches over the
    same bytes: the same answer and the same table, wherever the map fills, whatever the start
    offset, with keyless records and a batch the Python path must take."""
    rng = random.Random(9)
    parts, base = [], 0
    for n in range(30):
        records = [SimpleRecord(b"v", None if rng.random() < 0.1 else b"k%d" % rng.randrange(25), 0)
                   for _ in range(rng.randrange(1, 9))]
        codec = CompressionType.GZIP if n == 22 else CompressionType.NONE  # the Python path's
        batch = bytearray(MemoryRecords.with_records(2, codec, records).buffer)
        batch[:8] = base.to_bytes(8, "big")  # offsets follow on
        base += len(records)
        parts.append(bytes(batch))
    data = b"".join(parts) + parts[0][:30]  # and a batch cut short at the end
    key_hash = KeyHash.create(SECRET, siphash=True)
    for start in (0, 17, 60):
        for max_entries in [0, 1, 5, 12, 24, 10_000]:
            whole, halves = OffsetMap(24 * 64, key_hash=key_hash), OffsetMap(24 * 64, key_hash=key_hash)
            expected = whole.put_batches(data, start, max_entries)
            got = halves.put_hashes(halves.hash_batches(data, start), start, max_entries)
            assert got == expected, (start, max_entries)
            assert (halves.size, halves.latest_offset) == (whole.size, whole.latest_offset)
            assert bytes(halves._table) == bytes(whole._table)
    assert {OffsetMap(24 * 64, key_hash=key_hash).put_batches(data, 0, m).stop for m in (5, 10_000)} == {
        WalkStop.FULL, WalkStop.PYTHON}


class _MapPassSpy:
    """Counts the calls of the map pass's C reader, and the bytes each one mapped."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.consumed: list[int] = []
        module = offset_map_module.map_pass
        if module is None:
            return
        spy = self

        class Spy:
            @staticmethod
            def put_windows(*args: object) -> tuple[object, ...]:
                result: tuple[object, ...] = module.put_windows(*args)
                spy.consumed.append(int(result[0]))  # type: ignore[call-overload]
                return result

        monkeypatch.setattr(offset_map_module, "map_pass", Spy)

    @property
    def calls(self) -> int:
        return len(self.consumed)


class _IndexSpy:
    """The C module, counting the latest-offset bits built."""

    def __init__(self) -> None:
        self.indexed = 0
        self.skipped = 0
        self.windows_put = 0

    def offset_map_index_latest(self, *args: object) -> int:
        self.indexed += 1
        return int(compact.offset_map_index_latest(*args))

    def offset_map_put_hashes(self, *args: object) -> tuple[int, ...]:
        result: tuple[int, ...] = compact.offset_map_put_hashes(*args)
        self.windows_put += result[0] > 0
        return result

    def offset_map_skip_superseded(self, *args: object) -> tuple[int, ...]:
        result: tuple[int, ...] = compact.offset_map_skip_superseded(*args)
        self.skipped += result[2]
        return result

    def __getattr__(self, name: str) -> object:
        return getattr(compact, name)


def _stats(stats: CleanerStats) -> dict[str, int]:
    return {name: getattr(stats, name) for name in (
        "map_bytes_read", "map_messages_read", "bytes_read", "messages_read", "bytes_written",
        "messages_written", "superseded_removed", "tombstones_removed", "aborted_removed", "invalid_removed",
        "markers_removed", "empty_batches_kept", "segments_before", "segments_after")}


def test_a_corrupt_batch_stops_the_c_walk_with_the_python_error(tmp_path: Path, c_module: None) -> None:
    time = MockTime()
    log = _build(tmp_path / "t-0", random.Random(5), time)
    first = log.segments.values(0, log.log_end_offset)[0]
    path = first.log.path
    log.close()
    data = bytearray(path.read_bytes())
    data[200] ^= 0xFF  # inside the first batches: a CRC mismatch
    path.write_bytes(bytes(data))
    log = Log.open(tmp_path / "t-0", config(cleanup_policy="compact", segment_bytes=3000), time=time,
                   had_clean_shutdown=True)
    try:
        cleaner = Cleaner(OffsetMap(24 * 1000), time=time)
        assert cleaner.offset_map.walks_batches
        with pytest.raises(CorruptRecordError, match="position"):
            cleaner.clean(LogToClean(log.topic, log.partition, log, 0, log.active_segment.base_offset))
    finally:
        log.close()
    assert os.path.getsize(path) == len(data)  # nothing was swapped in


def test_the_cleaning_pass_checks_the_crcs_of_batches_the_map_pass_did_not_read(tmp_path: Path,
                                                                               c_module: None) -> None:
    """The cleaning pass trusts the CRCs of the mapped range only: a batch of the clean part below
    it, damaged after an earlier round, still stops the round with the error, and nothing is swapped."""
    time = MockTime()
    log = Log.open(tmp_path / "t-0", config(cleanup_policy="compact", segment_bytes=3000), time=time)

    def append(prefix: bytes) -> None:  # 200 records, each with a key of its own
        for i in range(40):
            log.append_as_leader(MemoryRecords.with_records(2, CompressionType.NONE, [
                SimpleRecord(b"v", prefix + b"%d-%d" % (i, j), time.milliseconds()) for j in range(5)]))
        log.roll()

    append(b"a")
    first_round_end = log.active_segment.base_offset
    Cleaner(OffsetMap(24 * 1000), time=time).clean(
        LogToClean(log.topic, log.partition, log, 0, first_round_end))
    append(b"b")
    first = log.segments.values(0, first_round_end)[0]
    assert first.size > 100
    path = first.log.path
    log.close()
    data = bytearray(path.read_bytes())
    data[70] ^= 0xFF  # inside the first batch's records: a CRC mismatch
    path.write_bytes(bytes(data))
    log = Log.open(tmp_path / "t-0", config(cleanup_policy="compact", segment_bytes=3000), time=time,
                   had_clean_shutdown=True)
    try:
        cleaner = Cleaner(OffsetMap(24 * 1000), time=time)
        with pytest.raises(CorruptRecordError, match="position"):
            cleaner.clean(LogToClean(log.topic, log.partition, log, first_round_end,
                                     log.active_segment.base_offset))
    finally:
        log.close()
    assert path.read_bytes() == bytes(data)  # nothing was swapped in


def _refresh_crcs(data: bytearray) -> None:
    """Recompute the CRC of every v2 batch in ``data`` (so that damage reaches the record walk)."""
    pos = 0
    while pos + 61 <= len(data):
        size = 12 + int.from_bytes(data[pos + 8:pos + 12], "big", signed=True)
        if size < 61 or pos + size > len(data) or data[pos + 16] != 2:
            return
        data[pos + 17:pos + 21] = crc32c.crc32c(bytes(data[pos + 21:pos + size])).to_bytes(4, "big")
        pos += size


def _outcome(directory: Path, walks: bool, monkeypatch: pytest.MonkeyPatch) -> object:
    monkeypatch.setattr(offset_map_module, "compact_native", compact if walks else None)
    log = Log.open(directory, config(cleanup_policy="compact", segment_bytes=3000), time=MockTime(),
                   had_clean_shutdown=True)
    try:
        cleaner = Cleaner(OffsetMap(24 * 1000, key_hash=KeyHash.create(SECRET, siphash=True)),
                          io_buffer_size=2048, time=log.time)
        cleaner.clean(LogToClean(log.topic, log.partition, log, 0, log.active_segment.base_offset))
    except Exception as e:  # the outcome compared is the error itself
        return (type(e).__name__, str(e).split(" (")[0])
    finally:
        log.close()
    return _files(directory)


def test_damaged_records_give_the_same_outcome_on_both_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              c_module: None) -> None:
    """Bytes flipped inside records (CRCs made to match, so the walks meet them): the C walk leaves
    each damaged batch to the Python path, so both clean the same or fail with the same error."""
    template = tmp_path / "template" / "t-0"
    _build(template, random.Random(11), MockTime()).close()
    first = min(template.glob("*.log"))
    pristine = first.read_bytes()
    rng = random.Random(12)
    outcomes = set()
    for trial in range(16):
        damaged = bytearray(pristine)
        for _ in range(rng.randrange(1, 4)):
            damaged[rng.randrange(61, len(damaged))] = rng.randrange(256)
        _refresh_crcs(damaged)
        results = []
        for walks in (True, False):
            directory = tmp_path / f"{trial}-{walks}" / "t-0"
            shutil.copytree(template, directory)
            (directory / first.name).write_bytes(bytes(damaged))
            results.append(_outcome(directory, walks, monkeypatch))
        outcomes.add("error" if isinstance(results[0], tuple) else "cleaned")
        if native is None and all(isinstance(r, tuple) for r in results):
            # The pure-Python record walk words some errors differently from the C walks (the same
            # kind of error: tests/records/test_native.py); with the C walker both paths share it.
            results = [r[0] for r in results]  # type: ignore[index]
        assert results[0] == results[1], trial
    assert outcomes == {"error", "cleaned"}  # both kinds of outcome were met
