"""``validate_lone_v2_batch`` (the one-pass check of the usual produce request) against the general
path it short-cuts: whenever it accepts, it must give exactly the general path's result; whenever
the general path rejects, it must decline."""

from __future__ import annotations

import importlib
import struct

import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalog.errors import KafkaLogError
from kafkalog.records import default_batch
from kafkalog.records.memory import MemoryRecords
from kafkalog.records.types import CompressionType, SimpleRecord, TimestampType
from kafkalog.records.validator import (
    LONG_MAX,
    AppendOrigin,
    ValidatorConfig,
    analyze_and_validate_records,
    trim_invalid_bytes,
    validate_lone_v2_batch,
    validate_messages_and_assign_offsets,
)

NOW = 1_700_000_000_000
MAX_BYTES = 1 << 20


@pytest.fixture(autouse=True)
def _c_walker(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fast lane needs the C walker: use it whatever KAFKALOG_PURE_PYTHON says."""
    monkeypatch.setattr(default_batch, "native", importlib.import_module("kafkalog.records._native"))


def _general(raw: bytes, config: ValidatorConfig, offset: int, epoch: int, origin: AppendOrigin):
    records = MemoryRecords(raw)
    info = analyze_and_validate_records(records, origin, assign_offsets=True, max_message_bytes=MAX_BYTES)
    result = validate_messages_and_assign_offsets(
        trim_invalid_bytes(records, info), offset_counter=offset, now_ms=NOW, config=config,
        partition_leader_epoch=epoch, origin=origin, source_compression=info.source_compression)
    info = info.with_validation_result(result, first_offset=offset, timestamp_type=config.timestamp_type,
                                       log_start_offset=7)
    return result, info


def _fast(raw: bytes, config: ValidatorConfig, offset: int, epoch: int, origin: AppendOrigin):
    return validate_lone_v2_batch(MemoryRecords(raw), offset_counter=offset, now_ms=NOW, config=config,
                                  partition_leader_epoch=epoch, origin=origin, max_message_bytes=MAX_BYTES,
                                  log_start_offset=7)


def _same(fast, general) -> None:
    (fr, fi), (gr, gi) = fast, general
    assert bytes(fr.validated_records.buffer) == bytes(gr.validated_records.buffer)
    assert (fr.max_timestamp, fr.shallow_offset_of_max_timestamp, fr.messages_size_maybe_changed,
            fr.log_append_time_ms, fr.next_offset) == (
        gr.max_timestamp, gr.shallow_offset_of_max_timestamp, gr.messages_size_maybe_changed,
        gr.log_append_time_ms, gr.next_offset)
    assert fi == gi


def _resign(raw: bytearray) -> bytes:
    struct.pack_into(">I", raw, 17, crc32c(bytes(raw[21:])))
    return bytes(raw)


_record = st.builds(
    SimpleRecord,
    value=st.one_of(st.none(), st.binary(max_size=20)),
    key=st.one_of(st.none(), st.binary(min_size=1, max_size=8)),
    timestamp=st.one_of(st.just(-1), st.integers(NOW - 10_000, NOW + 10_000)),
)
_config = st.builds(
    ValidatorConfig,
    target_magic=st.sampled_from([2, 2, 2, 1]),
    target_compression=st.sampled_from([None, None, CompressionType.NONE, CompressionType.GZIP]),
    timestamp_type=st.sampled_from([TimestampType.CREATE_TIME, TimestampType.LOG_APPEND_TIME]),
    timestamp_before_max_ms=st.sampled_from([LONG_MAX, 5_000]),
    timestamp_after_max_ms=st.sampled_from([LONG_MAX, 5_000]),
    compacted_topic=st.booleans(),
)


@st.composite
def _append(draw: st.DrawFn) -> bytes:
    records = draw(st.lists(_record, min_size=1, max_size=8))
    kind = draw(st.sampled_from(["plain"] * 6 + ["gzip", "lat", "pid", "base", "crc", "count", "two",
                                                  "epoch", "maxts"]))
    kwargs: dict = {}
    if kind == "gzip":
        kwargs["compression"] = CompressionType.GZIP
    if kind == "lat":
        kwargs.update(timestamp_type=TimestampType.LOG_APPEND_TIME, log_append_time=NOW - 5)
    if kind == "pid":
        kwargs.update(producer_id=42, producer_epoch=1, base_sequence=0)
    if kind == "epoch":
        kwargs["partition_leader_epoch"] = 3
    codec = kwargs.pop("compression", CompressionType.NONE)
    built = MemoryRecords.with_records(2, codec, records, 5 if kind == "base" else 0, **kwargs)
    raw = bytearray(bytes(built.buffer))
    if kind == "crc":
        raw[-1] ^= 0x01
    elif kind == "count":
        struct.pack_into(">i", raw, 57, len(records) + 1)
        raw = bytearray(_resign(raw))
    elif kind == "maxts":  # a producer that left the max timestamp wrong
        struct.pack_into(">q", raw, 35, NOW - 99_999)
        raw = bytearray(_resign(raw))
    elif kind == "two":
        raw = raw + raw
    return bytes(raw)


@settings(max_examples=400, deadline=None)
@given(_append(), _config, st.integers(0, 10**12), st.sampled_from([0, 5, -1]),
       st.sampled_from([AppendOrigin.CLIENT, AppendOrigin.CLIENT, AppendOrigin.COORDINATOR]))
def test_fast_lane_agrees_with_the_general_path(raw: bytes, config: ValidatorConfig, offset: int, epoch: int,
                                                origin: AppendOrigin) -> None:
    before = bytes(raw)
    fast = _fast(raw, config, offset, epoch, origin)
    assert raw == before  # the caller's buffer is never edited
    try:
        general = _general(raw, config, offset, epoch, origin)
    except KafkaLogError:
        assert fast is None
        return
    if fast is not None:
        _same(fast, general)


@pytest.mark.parametrize("timestamp_type", [TimestampType.CREATE_TIME, TimestampType.LOG_APPEND_TIME])
def test_the_usual_produce_takes_the_fast_lane(timestamp_type: TimestampType) -> None:
    raw = bytes(MemoryRecords.with_records(
        2, CompressionType.NONE, [SimpleRecord(b"v%d" % i, b"k", NOW + i) for i in range(10)]).buffer)
    config = ValidatorConfig(timestamp_type=timestamp_type)
    fast = _fast(raw, config, 1000, 4, AppendOrigin.CLIENT)
    assert fast is not None
    _same(fast, _general(raw, config, 1000, 4, AppendOrigin.CLIENT))
    assert fast[1].first_offset == 1000 and fast[1].last_offset == 1009


def test_without_the_c_walker_the_general_path_does_everything(monkeypatch: pytest.MonkeyPatch) -> None:
    raw = bytes(MemoryRecords.with_records(2, CompressionType.NONE, [SimpleRecord(b"v", b"k", NOW)]).buffer)
    monkeypatch.setattr(default_batch, "native", None)
    assert _fast(raw, ValidatorConfig(), 0, 0, AppendOrigin.CLIENT) is None
