"""The log cleaner on real logs: what survives (Kafka's rules), offsets and batches after cleaning,
multi-round cleaning with a small offset map, grouping, and reads across the gaps compaction leaves."""

from __future__ import annotations

import shutil
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalog.clock import MockTime
from kafkalog.records import MemoryRecords, SimpleRecord
from kafkalog.records.types import CompressionType, Header, TimestampType
from kafkalog.storage.checkpoint import CLEANER_OFFSET_CHECKPOINT_FILE, OffsetCheckpointFile
from kafkalog.storage.cleaner.cleaner import group_segments_by_size
from kafkalog.storage.log import FetchIsolation, Log
from kafkalog.tools.verify import verify_data_dir
from tests.storage._cleaning import all_records, append, clean, compacted_log
from tests.storage.conftest import config

KEYS = [f"key-{i}".encode() for i in range(12)]


History = list[tuple[int, bytes, bytes | None]]


def _expected(history: History, upper: int) -> dict[int, tuple[bytes, bytes | None]]:
    """offset -> (key, value) of what must survive: below ``upper`` the latest record of each key
    (tombstones too: their delete horizon has not passed), at and above it everything."""
    latest: dict[bytes, int] = {}
    for offset, key, _ in history:
        if offset < upper:
            latest[key] = offset
    keep = set(latest.values())
    return {offset: (key, value) for offset, key, value in history if offset >= upper or offset in keep}


batches_strategy = st.lists(
    st.lists(st.tuples(st.sampled_from(KEYS), st.one_of(st.none(), st.binary(min_size=0, max_size=40))),
             min_size=1, max_size=8),
    min_size=1, max_size=40)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=batches_strategy, segment_bytes=st.integers(300, 2000), map_slots=st.integers(12, 200),
       codec=st.sampled_from([CompressionType.NONE, CompressionType.GZIP]))
def test_cleaning_keeps_exactly_the_latest_record_per_key(tmp_path_factory, batches, segment_bytes, map_slots,
                                                         codec) -> None:
    tmp = tmp_path_factory.mktemp("clean")
    log = compacted_log(tmp, segment_bytes=segment_bytes, segment_index_bytes=4096)
    history: list[tuple[int, bytes, bytes | None]] = []
    headers = (Header("h", b"x"),)
    for batch in batches:
        start = log.log_end_offset
        append(log, batch, codec=codec, headers=headers)
        history += [(start + i, k, v) for i, (k, v) in enumerate(batch)]
    before = {r.offset: r for r in all_records(log)}
    upper = log.active_segment.base_offset
    rounds, stats = clean(log, memory=24 * map_slots)
    expected = _expected(history, upper)
    after = all_records(log)
    assert [r.offset for r in after] == sorted(expected)  # offsets kept and strictly increasing
    for record in after:
        original = before[record.offset]
        assert (record.key, record.value) == expected[record.offset]
        assert record.timestamp == original.timestamp and record.headers == original.headers
    assert stats.records_removed == len(history) - len(expected)
    for batch in log.batches(0, isolation=FetchIsolation.LOG_END):
        batch.ensure_valid()
    assert rounds >= 1 or upper == 0 or len(log.segments) == 1
    # The checkpoint says everything cleanable was cleaned; the directory passes verify and reloads.
    log.close()
    checkpoint = OffsetCheckpointFile(tmp / CLEANER_OFFSET_CHECKPOINT_FILE).read()
    if rounds:
        assert checkpoint[("topic", 0)] == upper
    report = verify_data_dir(tmp)
    assert report.ok, report.problems
    reopened = Log.open(tmp / "topic-0", config(cleanup_policy="compact"), had_clean_shutdown=False)
    assert [(r.offset, r.key, r.value) for r in all_records(reopened)] == \
        [(o, *expected[o]) for o in sorted(expected)]
    reopened.close()
    shutil.rmtree(tmp)


def test_a_log_bigger_than_the_offset_map_is_cleaned_in_several_rounds(tmp_path: Path) -> None:
    log = compacted_log(tmp_path, segment_bytes=4000)
    history = []
    for round_ in range(6):
        for chunk in range(0, 300, 30):
            start = log.log_end_offset
            entries = [(f"k{chunk + i}".encode(), f"v{round_}-{chunk + i}".encode()) for i in range(30)]
            append(log, entries)
            history += [(start + i, k, v) for i, (k, v) in enumerate(entries)]
    upper = log.active_segment.base_offset
    # 100 slots at load factor 0.9 hold 90 keys: 300 distinct keys need several rounds.
    rounds, stats = clean(log, memory=24 * 100)
    assert rounds >= 4
    assert stats.buffer_utilization <= 0.9
    expected = _expected(history, upper)
    got = [(r.offset, r.key, r.value) for r in all_records(log)]
    assert got == [(o, *expected[o]) for o in sorted(expected)]
    log.close()


def test_the_active_segment_is_never_cleaned(tmp_path: Path) -> None:
    log = compacted_log(tmp_path)
    for i in range(50):
        append(log, [(b"same", str(i).encode())])
    assert len(log.segments) == 1
    rounds, _ = clean(log)
    assert rounds == 0
    assert len(all_records(log)) == 50
    log.roll()
    rounds, _ = clean(log)
    assert rounds == 1
    assert [(r.offset, r.value) for r in all_records(log)] == [(49, b"49")]
    log.close()


def test_reads_across_compaction_gaps(tmp_path: Path) -> None:
    log = compacted_log(tmp_path, segment_bytes=500)
    for i in range(100):
        append(log, [(KEYS[i % 3], str(i).encode())])
    log.roll()
    clean(log)
    survivors = [r.offset for r in all_records(log)]
    assert survivors == [97, 98, 99]
    # A read from any offset in a gap starts at the next surviving batch, as a fetch does.
    for start in (0, 1, 50, 96, 97):
        fetched = log.read(start, 10_000)
        first = next(iter(fetched.records.batches()))
        assert first.base_offset == max(start, 97)
        assert [r.offset for r in log.records(start)] == [o for o in survivors if o >= start]
    assert log.read(100, 100).records.size_in_bytes == 0
    log.close()


def test_cleaned_segments_are_grouped_up_to_segment_bytes(tmp_path: Path) -> None:
    log = compacted_log(tmp_path, segment_bytes=100_000)
    for i in range(300):
        append(log, [(f"k{i}".encode(), b"v" * 20)])
        if i % 30 == 29:
            log.roll()
    assert len(log.segments) == 11
    _, stats = clean(log)
    # Nothing was superseded, so the ten cleanable segments fit one and become one.
    assert stats.records_removed == 0
    assert [s.base_offset for s in log.segments] == [0, 300]
    assert len(all_records(log)) == 300
    groups = group_segments_by_size(list(log.segments), 100, 10 * 1024 * 1024, 300)
    assert [len(g) for g in groups] == [1, 1]
    log.close()


def test_segments_whose_offsets_could_overflow_32_bits_are_not_grouped(tmp_path: Path) -> None:
    log = compacted_log(tmp_path)
    for _ in range(2):
        for i in range(10):
            append(log, [(b"a", str(i).encode())])
        log.roll()
    segments = list(log.segments)[:2]
    assert [len(g) for g in group_segments_by_size(segments, 10**9, 10 * 1024 * 1024, 20)] == [2]
    # The last segment's worst case is the first uncleanable offset - 1: 2^31 past the group's base.
    assert [len(g) for g in group_segments_by_size(segments, 10**9, 10 * 1024 * 1024, 2**31 + 1)] == [1, 1]
    # Too many log bytes or index bytes for one segment split the group too.
    assert [len(g) for g in group_segments_by_size(segments, segments[0].size_in_bytes, 10**6, 20)] == [1, 1]
    log.close()


def test_a_round_ends_past_an_offset_gap_at_the_end_of_the_dirty_section(tmp_path: Path) -> None:
    """A follower's log may skip offsets between segments (its leader's log was compacted): a
    segment mapped whole covers every offset below the next one's base, so the round ends there
    (Kafka fast-forwards its map the same way), not inside the gap."""
    log = compacted_log(tmp_path)
    now = log.time.milliseconds()
    log.append_as_follower(MemoryRecords.with_records(2, CompressionType.NONE, [
        SimpleRecord(b"v%d" % i, b"k%d" % (i % 3), now) for i in range(6)], 0))
    log.roll(20)
    log.append_as_follower(MemoryRecords.with_records(2, CompressionType.NONE, [
        SimpleRecord(b"w", b"k0", now)], 20))  # into the active segment, based at 20
    rounds, _ = clean(log)
    assert rounds == 1
    assert [(r.offset, r.value) for r in all_records(log)] == [(3, b"v3"), (4, b"v4"), (5, b"v5"), (20, b"w")]
    log.close()
    checkpoint = OffsetCheckpointFile(tmp_path / CLEANER_OFFSET_CHECKPOINT_FILE).read()
    assert checkpoint[("topic", 0)] == 20  # the first uncleanable offset, not 6 (past the last record)


def test_the_cleaned_batches_keep_producer_fields_and_offsets(tmp_path: Path) -> None:
    from kafkalog.records.memory import MemoryRecords
    from kafkalog.records.types import SimpleRecord

    time = MockTime()
    log = compacted_log(tmp_path, time=time)
    now = time.milliseconds()
    log.append_as_leader(MemoryRecords.with_records(
        2, CompressionType.NONE, [SimpleRecord(b"1", b"a", now), SimpleRecord(b"2", b"b", now)],
        producer_id=7, producer_epoch=1, base_sequence=0))
    log.append_as_leader(MemoryRecords.with_records(
        2, CompressionType.NONE, [SimpleRecord(b"3", b"a", now + 1)], producer_id=7, producer_epoch=1,
        base_sequence=2))
    log.roll()
    clean(log)
    batches = list(log.batches(0, isolation=FetchIsolation.LOG_END))
    fields = [(b.base_offset, b.last_offset, b.base_sequence, b.producer_id, b.record_count) for b in batches]
    assert fields == [(0, 1, 0, 7, 1), (2, 2, 2, 7, 1)]
    assert [(r.offset, r.key, r.value) for r in all_records(log)] == [(1, b"b", b"2"), (2, b"a", b"3")]
    log.close()
    # (the same clock: a producer idle for producer.id.expiration.ms would be forgotten)
    reopened = Log.open(tmp_path / "topic-0", config(cleanup_policy="compact"), had_clean_shutdown=False,
                        time=time)
    entry = reopened.producer_state.last_entry(7)
    assert entry is not None and entry.last_seq == 2
    reopened.close()


def test_a_log_truncated_during_cleaning_does_not_get_its_data_back(tmp_path: Path) -> None:
    import pytest

    from kafkalog.errors import KafkaLogError
    from kafkalog.storage.cleaner.cleaner import Cleaner
    from kafkalog.storage.cleaner.log_to_clean import LogToClean
    from kafkalog.storage.cleaner.offset_map import OffsetMap

    log = compacted_log(tmp_path, segment_bytes=500)
    for i in range(60):
        append(log, [(KEYS[i % 4], str(i).encode())])
    log.roll()
    replace = log.replace_segments

    def truncate_first(new, old):  # a truncation that was not preceded by an abort
        log.truncate_to(0)
        return replace(new, old)

    log.replace_segments = truncate_first  # type: ignore[method-assign]
    # Refused: the cleaned segments would end past the new log end, or replace the now active one.
    with pytest.raises(KafkaLogError, match=r"now ends at 0|active segment"):
        Cleaner(OffsetMap(24 * 100), time=log.time).clean(
            LogToClean("topic", 0, log, 0, log.active_segment.base_offset))
    assert all_records(log) == []
    assert not [p for p in log.dir.iterdir() if p.name.endswith((".cleaned", ".swap"))]
    log.close()


def test_an_aborted_clean_leaves_every_group_whole(tmp_path: Path) -> None:
    """Groups are swapped in one behind the other (each once its flush is done): an abort at any check
    leaves the groups swapped so far cleaned, the others as they were, no cleaned file behind."""
    import pytest

    from kafkalog.storage.cleaner.cleaner import Cleaner, LogCleaningAbortedError
    from kafkalog.storage.cleaner.log_to_clean import LogToClean
    from kafkalog.storage.cleaner.offset_map import OffsetMap

    template = tmp_path / "template"
    log = compacted_log(template, segment_bytes=2000)
    for i in range(300):
        append(log, [(f"k{i % 40}".encode(), f"v{i}".encode())])
    log.roll()
    expected = {r.key: r.value for r in all_records(log)}  # the latest value of each key
    log.close()
    for abort_at in range(1, 12):
        work = tmp_path / f"work-{abort_at}"
        shutil.copytree(template, work)
        log = Log.open(work / "topic-0", config(cleanup_policy="compact", segment_bytes=2000))
        calls = 0

        def check_done(_: str, limit: int = abort_at) -> None:
            nonlocal calls
            calls += 1
            if calls == limit:
                raise LogCleaningAbortedError("aborted by the test")

        cleaner = Cleaner(OffsetMap(24 * 1000), io_buffer_size=1024, check_done=check_done)
        with pytest.raises(LogCleaningAbortedError):
            cleaner.clean(LogToClean("topic", 0, log, 0, log.active_segment.base_offset))
        assert {r.key: r.value for r in all_records(log)} == expected
        log.close()
        assert not [p.name for p in (work / "topic-0").iterdir() if p.suffix in (".cleaned", ".swap")]
        assert verify_data_dir(work).ok


def test_groups_cleaned_while_a_swap_is_slow_go_in_together(tmp_path: Path) -> None:
    """When the swaps fall behind, the groups waiting go in with one replace_segments (one directory
    fsync), all or none; the log, and a reopened one, hold each key's latest value."""
    import threading

    from kafkalog.storage.cleaner.cleaner import Cleaner
    from kafkalog.storage.cleaner.log_to_clean import LogToClean
    from kafkalog.storage.cleaner.offset_map import OffsetMap

    cfg = config(cleanup_policy="compact", segment_bytes=2000)
    log = compacted_log(tmp_path, segment_bytes=2000)
    for i in range(300):
        append(log, [(f"k{i % 40}".encode(), f"v{i}".encode())])
    log.roll()
    expected = {r.key: r.value for r in all_records(log)}
    cleaner = Cleaner(OffsetMap(24 * 1000), io_buffer_size=1024)
    all_cleaned = threading.Event()
    clean_segments, replace = cleaner.clean_segments, log.replace_segments
    groups_left = len(group_segments_by_size(log.segments.values(0, log.active_segment.base_offset),
                                             2000, cfg.segment_index_bytes, log.active_segment.base_offset))
    calls: list[tuple[int, int]] = []

    def counting_clean(*args, **kwargs):  # type: ignore[no-untyped-def]
        nonlocal groups_left
        cleaned = clean_segments(*args, **kwargs)
        groups_left -= 1
        if groups_left == 0:
            all_cleaned.set()
        return cleaned

    def slow_replace(new, old):  # type: ignore[no-untyped-def]
        assert all_cleaned.wait(30)  # the first swap waits until every group is cleaned
        calls.append((len(new), len(old)))
        return replace(new, old)

    cleaner.clean_segments = counting_clean  # type: ignore[method-assign]
    log.replace_segments = slow_replace  # type: ignore[method-assign]
    cleaner.clean(LogToClean("topic", 0, log, 0, log.active_segment.base_offset))
    assert max(n for n, _ in calls) > 1  # the first call takes what was ready as it started
    assert sum(n for n, _ in calls) == len(log.segments.values(0, log.active_segment.base_offset))
    assert {r.key: r.value for r in all_records(log)} == expected
    log.close()
    assert not [p.name for p in log.dir.iterdir() if p.suffix in (".cleaned", ".swap", ".deleted")]
    with Log.open(log.dir, cfg) as reopened:
        assert {r.key: r.value for r in all_records(reopened)} == expected
    assert verify_data_dir(tmp_path).ok


def test_legacy_messages_are_rewritten_as_v2_batches(tmp_path: Path) -> None:
    """Kafka 4 (KIP-724, KAFKA-13093) writes every cleaned batch as v2: a v0/v1 message set becomes a
    v2 batch of its kept records (first kept offset to last, same codec, no producer), v0's missing
    timestamps stay -1 under CreateTime, v1's are kept; the records keep their offsets."""
    log = compacted_log(tmp_path)

    def legacy(magic: int, codec: CompressionType, base: int, *records: SimpleRecord) -> None:
        log.append_as_follower(MemoryRecords.with_records(magic, codec, list(records), base))

    legacy(1, CompressionType.GZIP, 0,
           SimpleRecord(b"a1", b"a", 1000), SimpleRecord(b"b1", b"b", 1001), SimpleRecord(b"c1", b"c", 1002))
    legacy(0, CompressionType.NONE, 3, SimpleRecord(b"d0", b"d"))
    legacy(1, CompressionType.NONE, 4, SimpleRecord(b"a2", b"a", 1004))
    log.roll()
    clean(log)
    batches = list(log.batches(0, isolation=FetchIsolation.LOG_END))
    assert [b.magic for b in batches] == [2, 2, 2]
    first, v0, last = batches
    assert (first.base_offset, first.last_offset, first.compression_type) == (1, 2, CompressionType.GZIP)
    assert [(r.offset, r.key, r.timestamp) for r in first.records()] == [(1, b"b", 1001), (2, b"c", 1002)]
    assert (v0.base_offset, v0.timestamp_type, v0.max_timestamp) == (3, TimestampType.CREATE_TIME, -1)
    assert v0.producer_id == -1
    assert [(r.offset, r.value, r.timestamp) for r in v0.records()] == [(3, b"d0", -1)]
    assert [(r.offset, r.value, r.timestamp) for r in last.records()] == [(4, b"a2", 1004)]
    assert all(b.is_valid() for b in batches)
    log.close()
    assert verify_data_dir(tmp_path).ok
