"""FileRecords: iteration, slices, searches, sendfile, truncation, preallocation (Kafka's FileRecordsTest)."""

from __future__ import annotations

import io
import os
import socket
import threading
import time
from pathlib import Path

import pytest

from kafkalog.errors import CorruptRecordError, IllegalArgumentError, KafkaStorageError
from kafkalog.records.memory import MemoryRecords, iter_batches
from kafkalog.records.types import CompressionType, SimpleRecord
from kafkalog.storage.file_records import FileRecords, LogOffsetPosition, TimestampAndOffset

VALUES = [b"abcd", b"efgh", b"ijkl"]


def v2(offset: int, *values: bytes, timestamp: int = 1000, epoch: int = -1,
       compression: CompressionType = CompressionType.NONE) -> MemoryRecords:
    return MemoryRecords.with_records(2, compression, [SimpleRecord(v, timestamp=timestamp) for v in values],
                                      offset, partition_leader_epoch=epoch)


@pytest.fixture
def fr(tmp_path: Path) -> FileRecords:
    """A file with three single-record v2 batches at offsets 0, 1, 2 (as FileRecordsTest's setup)."""
    records = FileRecords.open(tmp_path / "00000000000000000000.log", file_already_exists=False)
    for i, value in enumerate(VALUES):
        records.append(v2(i, value))
    yield records
    records.close()


def test_file_size_tracks_appends(tmp_path: Path) -> None:
    with FileRecords.open(tmp_path / "a.log", file_already_exists=False) as records:
        assert records.size_in_bytes == 0 == records.file_size
        for i in range(20):
            n = records.append(v2(i, b"abcd"))
            assert n == v2(i, b"abcd").size_in_bytes
            assert records.size_in_bytes == records.file_size == (i + 1) * n


def test_iteration_yields_every_batch_and_record(fr: FileRecords) -> None:
    batches = list(fr.batches())
    assert [b.base_offset for b in batches] == [0, 1, 2]
    assert [b.position for b in batches] == [0, batches[0].size_in_bytes, 2 * batches[0].size_in_bytes]
    assert [r.value for r in fr.records()] == VALUES
    # The chunked full-entry mode sees the same entries.
    full = list(fr.batches(load_full=True))
    assert [(b.position, b.last_offset, b.checksum) for b in full] == \
        [(b.position, b.last_offset, b.checksum) for b in batches]
    assert all(b.is_valid() for b in batches)


@pytest.mark.parametrize("tail", [b"", b"\0" * 2, b"\0" * 5, b"\0" * 17])
def test_short_garbage_tail_is_invisible(fr: FileRecords, tail: bytes) -> None:
    # 17 bytes or fewer after the last entry cannot hold a header: iteration stops silently.
    path = fr.path
    fr.close()
    with open(path, "ab") as f:
        f.write(tail)
    with FileRecords.open(path) as reopened:
        assert [r.value for r in reopened.records()] == VALUES


def test_torn_trailing_batch_is_invisible(fr: FileRecords) -> None:
    path = fr.path
    fr.close()
    partial = bytes(v2(3, b"torn batch value").buffer)[:40]
    with open(path, "ab") as f:
        f.write(partial)
    with FileRecords.open(path) as reopened:
        assert [b.last_offset for b in reopened.batches()] == [0, 1, 2]
        assert [b.last_offset for b in reopened.batches(load_full=True)] == [0, 1, 2]


def test_size_below_minimum_is_corrupt_and_names_file_and_position(fr: FileRecords) -> None:
    path = fr.path
    end = fr.size_in_bytes
    fr.close()
    with open(path, "ab") as f:
        f.write(b"\0" * 30)  # offset 0, size 0
    with FileRecords.open(path) as reopened:
        for load_full in (False, True):
            with pytest.raises(CorruptRecordError) as info:
                list(reopened.batches(load_full=load_full))
            assert str(path) in str(info.value)
            assert f"position {end}" in str(info.value)


def test_skipping_batches_reads_only_headers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "big.log"
    big = b"x" * 10_000
    with FileRecords.open(path, file_already_exists=False) as records:
        for i in range(20):
            records.append(v2(i, big))
    read_sizes: list[int] = []
    real_pread = os.pread

    def counting_pread(fd: int, n: int, offset: int) -> bytes:
        data = real_pread(fd, n, offset)
        read_sizes.append(len(data))
        return data

    with FileRecords.open(path, read_only=True) as records:
        monkeypatch.setattr(os, "pread", counting_pread)
        found = records.search_for_offset_with_size(19, 0)
        assert found is not None and found.offset == 19
        assert len(read_sizes) == 20 and max(read_sizes) <= 61
        read_sizes.clear()
        assert records.largest_timestamp_after(0).offset == 0
        assert sum(read_sizes) <= 20 * 61
        # Asking for records loads the one batch needed, no more.
        read_sizes.clear()
        assert records.search_for_timestamp(1000, found.position, 19) == TimestampAndOffset(1000, 19, None)
        assert sum(read_sizes) <= 61 + found.size


def test_slices(fr: FileRecords) -> None:
    size = fr.size_in_bytes
    items = list(fr.batches())
    first, second = items[0], items[1]

    whole = fr.slice(0, size)
    assert whole.size_in_bytes == size
    assert [b.buffer.tobytes() for b in whole.batches()] == [b.buffer.tobytes() for b in items]

    def offsets(view: FileRecords) -> list[int]:
        return [b.last_offset for b in view.batches()]

    rest = fr.slice(first.size_in_bytes, size - first.size_in_bytes)
    assert rest.size_in_bytes == size - first.size_in_bytes and offsets(rest) == [1, 2]
    # Past the end, and past Int.MAX: clamped to the current size.
    assert fr.slice(first.size_in_bytes, size).size_in_bytes == size - first.size_in_bytes
    assert fr.slice(first.size_in_bytes, 2**31 - 1).size_in_bytes == size - first.size_in_bytes
    # A slice of a slice is relative to the inner slice.
    nested = fr.slice(1, size - 1).slice(first.size_in_bytes - 1, size)
    assert nested.size_in_bytes == size - first.size_in_bytes and offsets(nested) == [1, 2]
    assert nested.read_bytes() == fr.read_bytes(first.size_in_bytes)
    nested = fr.slice(1, size - 1).slice(first.size_in_bytes - 1, 2**31 - 1)
    assert offsets(nested) == [1, 2]
    single = fr.slice(first.size_in_bytes, second.size_in_bytes)
    assert single.size_in_bytes == second.size_in_bytes and offsets(single) == [1]
    # Positions inside a slice are relative to it.
    assert [b.position for b in single.batches()] == [0]
    # One byte short of the batch: nothing complete to iterate.
    assert offsets(fr.slice(first.size_in_bytes, second.size_in_bytes - 1)) == []
    assert fr.slice(size, 10).size_in_bytes == 0


def test_read_into_fills_a_reused_buffer_like_read_bytes(fr: FileRecords) -> None:
    size = fr.size_in_bytes
    buffer = bytearray(7)
    for view in (fr, fr.slice(3, size - 5)):
        whole = view.read_bytes()
        got = b""
        position = 0
        while chunk := view.read_into(position, buffer):
            assert chunk.obj is buffer and len(chunk) <= 7
            got += bytes(chunk)
            position += len(chunk)
        assert got == whole  # the last read is short: it stops at the end of the view
    assert len(fr.read_into(size, bytearray(10))) == 0
    with pytest.raises(IllegalArgumentError):
        fr.read_into(size + 1, buffer)


@pytest.mark.parametrize(("position", "size"), [(-1, 5), (10_000, 15), (0, -1)])
def test_bad_slices_are_rejected(fr: FileRecords, position: int, size: int) -> None:
    with pytest.raises(IllegalArgumentError):
        fr.slice(position, size)


def test_slice_does_not_see_later_appends(fr: FileRecords) -> None:
    view = fr.slice(0, 2**31 - 1)
    before = view.size_in_bytes
    fr.append(v2(3, b"later"))
    assert view.size_in_bytes == before
    assert [b.last_offset for b in view.batches()] == [0, 1, 2]
    with pytest.raises(KafkaStorageError):
        view.append(b"x" * 20)
    view.close()  # a slice does not own the file
    assert [b.last_offset for b in fr.batches()] == [0, 1, 2, 3]


def test_search_for_offset_with_size(fr: FileRecords) -> None:
    fr.append(v2(50, b"test"))
    sizes = [b.size_in_bytes for b in fr.batches()]
    assert fr.search_for_offset_with_size(0, 0) == LogOffsetPosition(0, 0, sizes[0])
    assert fr.search_for_offset_with_size(1, 0) == LogOffsetPosition(1, sizes[0], sizes[1])
    assert fr.search_for_offset_with_size(1, sizes[0]) == LogOffsetPosition(1, sizes[0], sizes[1])
    fourth = sum(sizes[:3])
    assert fr.search_for_offset_with_size(3, fourth) == LogOffsetPosition(50, fourth, sizes[3])
    assert fr.search_for_offset_with_size(50, fourth) == LogOffsetPosition(50, fourth, sizes[3])
    assert fr.search_for_offset_with_size(51, 0) is None


def test_search_uses_last_offset_of_multi_record_batches(tmp_path: Path) -> None:
    with FileRecords.open(tmp_path / "m.log", file_already_exists=False) as records:
        records.append(v2(10, b"a", b"b", b"c"))  # 10..12
        records.append(v2(13, b"d", b"e"))  # 13..14
        first = records.first_batch()
        assert first is not None
        assert records.search_for_offset_with_size(11, 0) == LogOffsetPosition(12, 0, first.size_in_bytes)
        hit = records.search_for_offset_with_size(13, 0)
        assert hit is not None and (hit.offset, hit.position) == (14, first.size_in_bytes)
        last = records.last_batch()
        assert last is not None and last.next_offset == 15


@pytest.mark.parametrize("magic", [0, 1, 2])
def test_search_for_timestamp(tmp_path: Path, magic: int) -> None:
    with FileRecords.open(tmp_path / "t.log", file_already_exists=False, init_file_size=1 << 20,
                          preallocate=True) as records:
        for ts, offset, epoch in ((10, 5, 0), (11, 6, 1)):
            records.append(MemoryRecords.with_records(magic, CompressionType.NONE,
                                                      [SimpleRecord(b"", key=b"", timestamp=ts)], offset,
                                                      partition_leader_epoch=epoch))
        results = [records.search_for_timestamp(t, 0, 0) for t in (9, 10, 11, 12)]
        if magic == 0:
            assert results == [None, None, None, None]  # v0 has no timestamps
        else:
            e0, e1 = (0, 1) if magic == 2 else (None, None)
            assert results == [TimestampAndOffset(10, 5, e0), TimestampAndOffset(10, 5, e0),
                               TimestampAndOffset(11, 6, e1), None]
        # starting_offset filters records below it.
        if magic:
            assert records.search_for_timestamp(9, 0, 6) == TimestampAndOffset(11, 6, e1)


def test_largest_timestamp_after(tmp_path: Path) -> None:
    with FileRecords.open(tmp_path / "l.log", file_already_exists=False) as records:
        assert records.largest_timestamp_after(0) == TimestampAndOffset(-1, -1, None)
        records.append(v2(0, b"a", timestamp=100, epoch=4))
        records.append(v2(1, b"b", b"c", timestamp=300, epoch=5))
        records.append(v2(3, b"d", timestamp=300, epoch=6))
        records.append(v2(4, b"e", timestamp=200, epoch=7))
        # The first batch holding the max wins; its LAST offset is reported.
        assert records.largest_timestamp_after(0) == TimestampAndOffset(300, 2, 5)
        second_end = sum(b.size_in_bytes for b in list(records.batches())[:2])
        assert records.largest_timestamp_after(second_end) == TimestampAndOffset(300, 3, 6)


def test_truncate(fr: FileRecords) -> None:
    first = fr.first_batch()
    assert first is not None
    end = fr.search_for_offset_with_size(1, 0)
    assert end is not None
    size = fr.size_in_bytes
    assert fr.truncate_to(end.position) == size - end.position  # bytes removed
    assert [b.last_offset for b in fr.batches()] == [0]
    assert fr.size_in_bytes == first.size_in_bytes == fr.file_size


def test_truncate_returns_removed_bytes_and_checks_bounds(fr: FileRecords) -> None:
    size = fr.size_in_bytes
    with pytest.raises(KafkaStorageError):
        fr.truncate_to(size + 1)
    with pytest.raises(KafkaStorageError):
        fr.truncate_to(-1)
    assert fr.truncate_to(size - 10) == 10
    assert fr.size_in_bytes == fr.file_size == size - 10


def test_truncate_to_same_size_does_not_touch_the_file(fr: FileRecords) -> None:
    # Kafka only truncates the channel when it is longer: some systems bump mtime on a no-op truncate.
    old = 1_600_000_000
    os.utime(fr.path, (old, old))
    assert fr.truncate_to(fr.size_in_bytes) == 0
    assert int(os.stat(fr.path).st_mtime) == old
    assert fr.last_modified_ms == old * 1000


def test_preallocate(tmp_path: Path) -> None:
    path = tmp_path / "p.log"
    records = FileRecords.open(path, file_already_exists=False, init_file_size=1 << 20, preallocate=True)
    assert records.size_in_bytes == 0 and path.stat().st_size == 1 << 20
    for i, value in enumerate(VALUES):
        records.append(v2(i, value))
    size = records.size_in_bytes
    assert path.stat().st_size == 1 << 20
    assert [r.value for r in records.records()] == VALUES  # the zero tail is beyond the logical end
    records.close()
    assert path.stat().st_size == size  # trimmed on close
    with FileRecords.open(path, file_already_exists=True, init_file_size=1 << 20, preallocate=True) as again:
        assert again.size_in_bytes == size == path.stat().st_size
        assert [r.value for r in again.records()] == VALUES


def test_preallocate_false_creates_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "n.log"
    with FileRecords.open(path, file_already_exists=False, init_file_size=1 << 20, preallocate=False) as r:
        assert r.size_in_bytes == 0 and path.stat().st_size == 0


def test_untrimmed_preallocated_file_after_crash_is_corrupt_at_the_zero_tail(tmp_path: Path) -> None:
    path = tmp_path / "crash.log"
    records = FileRecords.open(path, file_already_exists=False, init_file_size=4096, preallocate=True)
    for i, value in enumerate(VALUES):
        records.append(v2(i, value))
    data_end = records.size_in_bytes
    records.close_handlers()  # no trim: as after a crash
    with FileRecords.open(path) as reopened:
        assert reopened.size_in_bytes == 4096
        seen = []
        with pytest.raises(CorruptRecordError, match=f"position {data_end}"):
            for batch in reopened.batches():
                seen.append(batch.last_offset)
        assert seen == [0, 1, 2]
        reopened.trim()  # nothing to trim: the logical size is the file length here
        assert reopened.truncate_to(data_end) == 4096 - data_end
        assert path.stat().st_size == data_end


def test_trim_cuts_preallocation_without_closing(tmp_path: Path) -> None:
    path = tmp_path / "t.log"
    with FileRecords.open(path, file_already_exists=False, init_file_size=8192, preallocate=True) as r:
        r.append(v2(0, b"a"))
        r.trim()
        assert path.stat().st_size == r.size_in_bytes
        r.append(v2(1, b"b"))  # still usable
        assert [b.last_offset for b in r.batches()] == [0, 1]


def test_write_to_socketpair_uses_sendfile(fr: FileRecords, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real_sendfile = os.sendfile

    def spy(out_fd: int, in_fd: int, offset: int, count: int) -> int:
        calls.append(count)
        return real_sendfile(out_fd, in_fd, offset, count)

    monkeypatch.setattr(os, "sendfile", spy)
    size = fr.size_in_bytes
    a, b = socket.socketpair()
    with a, b:
        assert fr.write_to(a, 0, size) == size
        assert calls  # zero-copy path taken
        received = b""
        while len(received) < size:
            received += b.recv(size - len(received))
        assert received == fr.read_bytes(0, size)
        # From a slice: positions are relative to it, and the length is clipped at its end.
        view = fr.slice(10, 50)
        assert view.write_to(a, 5, 1000) == 45
        got = b""
        while len(got) < 45:
            got += b.recv(45 - len(got))
        assert got == fr.read_bytes(15, 45)


def test_write_to_file_and_fd_and_fallback(fr: FileRecords, tmp_path: Path) -> None:
    size = fr.size_in_bytes
    data = fr.read_bytes()
    third = size // 3
    out = tmp_path / "out.bin"
    with open(out, "wb") as f:
        f.write(b"HEAD")  # buffered: must be flushed before the zero-copy bytes go in after it
        assert fr.write_to(f, 0, third) == third
        # Asking for more than is left writes only what is left (Kafka's testBytesLengthOfWriteTo).
        assert fr.write_to(f.fileno(), third, size - third + 1) == size - third
    assert out.read_bytes() == b"HEAD" + data
    sink = io.BytesIO()  # no usable fileno(): read + write fallback
    assert fr.write_to(sink, 3, size) == size - 3
    assert sink.getvalue() == data[3:]
    with pytest.raises(IllegalArgumentError):
        fr.write_to(sink, size + 1, 1)


def test_write_to_non_blocking_socket_reports_partial_progress(tmp_path: Path) -> None:
    path = tmp_path / "big.log"
    with FileRecords.open(path, file_already_exists=False) as records:
        records.append(v2(0, os.urandom(4 << 20)))
        a, b = socket.socketpair()
        with a, b:
            a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65536)
            a.setblocking(False)
            sent = records.write_to(a, 0, records.size_in_bytes)
            assert 0 < sent < records.size_in_bytes


def test_concurrent_appends_never_expose_partial_batches(tmp_path: Path) -> None:
    records = FileRecords.open(tmp_path / "c.log", file_already_exists=False)
    target = 256 * 1024
    errors: list[BaseException] = []

    def writer() -> None:
        i = 0
        try:
            while records.size_in_bytes < target:
                records.append(v2(i, b"v" * (i % 300)))
                i += 1
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    thread = threading.Thread(target=writer)
    thread.start()
    checks = 0
    deadline = time.monotonic() + 20
    while thread.is_alive() and time.monotonic() < deadline:
        size = records.size_in_bytes
        view = records.slice(0, size)
        assert view.size_in_bytes == size
        batches = list(view.batches(load_full=True))
        assert sum(b.size_in_bytes for b in batches) == size  # every published byte is a whole batch
        assert all(b.is_valid() for b in batches[-3:])
        checks += 1
    thread.join()
    records.close()
    assert not errors and checks > 0


def test_read_only_open(fr: FileRecords, tmp_path: Path) -> None:
    fr.flush()
    with FileRecords.open(fr.path, read_only=True) as ro:
        assert [r.value for r in ro.records()] == VALUES
        with pytest.raises(KafkaStorageError):
            ro.append(b"x" * 30)
        with pytest.raises(KafkaStorageError):
            ro.truncate_to(0)
    with pytest.raises(KafkaStorageError):
        FileRecords.open(tmp_path / "missing.log", read_only=True)


def test_rename_delete_and_closed_state(fr: FileRecords, tmp_path: Path) -> None:
    target = tmp_path / "renamed.log.deleted"
    fr.rename_to(target)
    assert fr.path == target and target.exists()
    assert [b.last_offset for b in fr.batches()] == [0, 1, 2]  # the open file moved with it
    fr.append(v2(3, b"after rename"))
    assert fr.delete_if_exists() is True
    assert not target.exists()
    assert fr.delete_if_exists() is False
    assert fr.last_modified_ms == 0
    with pytest.raises(KafkaStorageError, match="closed"):
        list(fr.batches())


def test_append_accepts_bytes_like(tmp_path: Path) -> None:
    data = bytes(v2(0, b"x").buffer)
    with FileRecords.open(tmp_path / "b.log", file_already_exists=False) as records:
        records.append(data)
        records.append(bytearray(bytes(v2(1, b"y").buffer)))
        records.append(memoryview(bytes(v2(2, b"z").buffer)))
        records.append(b"")
        assert [r.value for r in records.records()] == [b"x", b"y", b"z"]


@pytest.mark.parametrize("name", [
    "kafka_python_record_batch_data_v0.bin",
    "kafka_python_record_batch_data_v1.bin",
    "kafka_python_record_batch_data_v2.bin",
    "kafka_go_fixtures/v1-v1c-v2-v2c-v2b-v2b-v2b-v2bc-v1b-v1bc.records.bin",
    "kafka_go_fixtures/v2bc-v1-v1c.records.bin",
])
def test_real_broker_record_sets_iterate_like_memory(golden_dir: Path, tmp_path: Path, name: str) -> None:
    data = (golden_dir / name).read_bytes()
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(data)
    expected = [(b.position, b.last_offset, b.size_in_bytes, b.max_timestamp) for b in iter_batches(data)]
    assert expected
    with FileRecords.open(path, read_only=True) as records:
        for load_full in (False, True):
            got = [(b.position, b.last_offset, b.size_in_bytes, b.max_timestamp)
                   for b in records.batches(load_full=load_full)]
            assert got == expected
        assert all(b.is_valid() for b in records.batches())
        memory_records = [(r.offset, r.timestamp, r.key, r.value)
                          for b in iter_batches(data) for r in b.records()]
        assert [(r.offset, r.timestamp, r.key, r.value) for r in records.records()] == memory_records


def test_write_to_socket_with_timeout_waits_for_room(tmp_path: Path) -> None:
    # A socket with a timeout is non-blocking underneath; write_to must wait for the reader, not stop.
    with FileRecords.open(tmp_path / "big.log", file_already_exists=False) as records:
        records.append(v2(0, os.urandom(2 << 20)))
        size = records.size_in_bytes
        a, b = socket.socketpair()
        with a, b:
            a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65536)
            a.settimeout(10)
            received = bytearray()

            def drain() -> None:
                while len(received) < size:
                    chunk = b.recv(1 << 16)
                    if not chunk:
                        return
                    received.extend(chunk)

            reader = threading.Thread(target=drain)
            reader.start()
            assert records.write_to(a, 0, size) == size
            reader.join(10)
            assert bytes(received) == records.read_bytes()
