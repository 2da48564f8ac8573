"""Timestamp options resolved as Spark's offset reader gets them from Kafka's ListOffsets: the
special timestamps (-1 latest, -2 earliest, -3 the largest timestamp ...), and "no offset" for a
first match that is not visible yet. No Spark session: the planner's own functions."""

from __future__ import annotations

import pytest

from kafkalog.errors import InvalidConfigError
from kafkalog.records import CompressionType, MemoryRecords, SimpleRecord
from kafkalog.spark.catalog import TopicCatalog
from kafkalog.spark.options import parse_source_options
from kafkalog.spark.reader import plan_batch_ranges, resolve_limit
from kafkalog.storage.log_manager import LogManager

from ._util import T0

TP = ("t", 0)


@pytest.fixture()
def data_dir(tmp_path):
    """t-0: offsets 0-2 plain (T0, T0+1, T0+2), 3 an open transaction's record (T0+5), 4 plain
    (T0+3, out of order), 5 plain (T0+10). High watermark 6, last stable offset 3."""
    with LogManager(tmp_path) as lm:
        (log,) = lm.create_topic("t", 1)

        def plain(*timestamps: int) -> None:
            recs = [SimpleRecord(b"v%d" % ts, None, T0 + ts) for ts in timestamps]
            log.append_as_leader(MemoryRecords.with_records(2, CompressionType.NONE, recs))

        plain(0, 1, 2)
        log.append_as_leader(MemoryRecords.with_records(
            2, CompressionType.NONE, [SimpleRecord(b"open", b"k", T0 + 5)], producer_id=7, producer_epoch=0,
            base_sequence=0, is_transactional=True))
        plain(3)
        plain(10)
        assert (log.high_watermark, log.last_stable_offset) == (6, 3)
    return tmp_path


def _start(data_dir, read_committed=False, **options):
    opts = parse_source_options(
        {"path": str(data_dir), "subscribe": "t",
         "kafka.isolation.level": "read_committed" if read_committed else "read_uncommitted", **options},
        streaming=False)
    with TopicCatalog(str(data_dir)) as catalog:
        return resolve_limit(catalog, opts.starting, [TP], starting=True, read_committed=read_committed)[TP]


@pytest.mark.parametrize(("ts", "read_uncommitted", "read_committed"), [
    (0, 0, 0),
    (2, 2, 2),
    (4, 3, None),        # first record >= T0+4 is the open transaction's: past the LSO
    (6, 5, None),
    (11, None, None),    # no record that late
    (-2, 0, 0),          # earliest
    (-4, 0, 0),          # earliest local
    (-1, 6, 3),          # latest: the high watermark, or the LSO
    (-3, 5, None),       # the record with the largest timestamp (offset 5)
    (-5, None, None),    # latest tiered: offset -1 on a log without tiered storage, "no offset"
])
def test_starting_timestamp_as_kafka_answers_it(data_dir, ts, read_uncommitted, read_committed):
    value = str(ts if ts < 0 else T0 + ts)
    for committed, expected in ((False, read_uncommitted), (True, read_committed)):
        if expected is None:
            # Spark's default strategy fails ("No offset matched"); 'latest' starts at latest.
            with pytest.raises(InvalidConfigError, match="no offset matched"):
                _start(data_dir, committed, startingTimestamp=value)
            latest = 3 if committed else 6
            assert _start(data_dir, committed, startingTimestamp=value,
                          startingOffsetsByTimestampStrategy="latest") == latest
        else:
            assert _start(data_dir, committed, startingTimestamp=value) == expected, committed


def test_ending_timestamps_and_special_values_plan_the_right_ranges(data_dir):
    def ranges(**options):
        opts = parse_source_options({"path": str(data_dir), "subscribe": "t", **options}, streaming=False)
        with TopicCatalog(str(data_dir)) as catalog:
            return [(r.from_offset, r.until_offset) for r in plan_batch_ranges(catalog, opts)]

    assert ranges(startingTimestamp="-2", endingTimestamp="-1") == [(0, 6)]
    # The end is the first offset holding a timestamp >= T0+3: offset 3 (T0+5), not 4 (T0+3).
    assert ranges(startingTimestamp=str(T0 + 1), endingTimestamp=str(T0 + 3)) == [(1, 3)]
    # An end with no match is latest, whatever the strategy (it applies to starts only).
    assert ranges(endingOffsetsByTimestamp=f'{{"t":{{"0":{T0 + 99}}}}}') == [(0, 6)]
    # A start that resolves past the end: Spark's resolved-offsets error.
    with pytest.raises(InvalidConfigError, match="RESOLVED_START_OFFSET_GREATER_THAN_END_OFFSET"):
        ranges(startingOffsets='{"t":{"0":5}}', endingTimestamp=str(T0 + 1))
