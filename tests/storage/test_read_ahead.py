"""ReadAhead: every view holds the file's bytes from the position asked for, whatever the pattern of
positions (walks that use part of each view, jumps forward and back), with and without a thread
reading ahead."""

from __future__ import annotations

import random
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kafkalog.storage.file_records import FileRecords
from kafkalog.storage.read_ahead import ReadAhead

READ_SIZE = 64


@pytest.fixture(params=[True, False], ids=["thread", "inline"])
def executor(request: pytest.FixtureRequest) -> Iterator[ThreadPoolExecutor | None]:
    if not request.param:
        yield None
        return
    with ThreadPoolExecutor(max_workers=1) as pool:
        yield pool


def _file(tmp_path: Path, size: int) -> tuple[FileRecords, bytes]:
    data = random.Random(size).randbytes(size)
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(data)
    return FileRecords.open(path), data


def test_a_walk_that_uses_part_of_each_view_sees_every_byte(tmp_path: Path,
                                                            executor: ThreadPoolExecutor | None) -> None:
    records, data = _file(tmp_path, 5000)
    rng = random.Random(1)
    position = 0
    with records, ReadAhead(records, READ_SIZE, executor) as reader:
        while position < len(data):
            view = reader.view(position)
            assert bytes(view) == data[position:position + len(view)]
            # A walk's view is a whole read from where it stopped (at least READ_SIZE bytes) unless
            # the file ends first.
            assert len(view) >= min(READ_SIZE, len(data) - position)
            position += rng.randrange(0, len(view) + 1)  # a walk stops before a batch not whole
        assert len(reader.view(len(data))) == 0


def test_jumps_forward_back_and_past_the_end(tmp_path: Path, executor: ThreadPoolExecutor | None) -> None:
    records, data = _file(tmp_path, 3000)
    rng = random.Random(2)
    with records, ReadAhead(records, READ_SIZE, executor) as reader:
        position = 0
        for _ in range(400):
            view = reader.view(position)
            assert len(view) > 0 or position == len(data)
            assert bytes(view) == data[position:position + len(view)]
            position = rng.choice([
                position + rng.randrange(0, 2 * READ_SIZE),   # forward, often into the read ahead
                max(0, position - rng.randrange(0, 3 * READ_SIZE)),  # back (the Python path re-reads)
                rng.randrange(0, len(data) + 1),              # anywhere
            ])
            position = min(position, len(data))


def test_a_view_of_a_slice_stops_at_the_slice_end(tmp_path: Path,
                                                  executor: ThreadPoolExecutor | None) -> None:
    records, data = _file(tmp_path, 1000)
    with records:
        part = records.slice(100, 500)
        with ReadAhead(part, READ_SIZE, executor) as reader:
            got = b""
            while len(got) < 500:
                view = reader.view(len(got))
                assert view
                got += bytes(view)
            assert got == data[100:600] and not reader.view(500)
