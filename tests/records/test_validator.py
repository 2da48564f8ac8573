"""LogValidator and append analysis (spec §9): every path, every error, conversions, properties."""

from __future__ import annotations

import struct
from collections.abc import Sequence

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalog.errors import (
    CorruptRecordError,
    InvalidConfigError,
    InvalidRecordError,
    InvalidTimestampError,
    OffsetsOutOfOrderError,
    RecordTooLargeError,
    RecordValidationError,
    UnsupportedCompressionTypeError,
    UnsupportedForMessageFormatError,
)
from kafkalog.records import (
    EndTransactionMarker,
    MemoryRecords,
    MemoryRecordsBuilder,
    RecordBatch,
    compress,
    iter_batches,
)
from kafkalog.records.legacy import encode_message
from kafkalog.records.types import (
    ATTRIBUTES_OFFSET,
    BASE_SEQUENCE_OFFSET,
    CRC_OFFSET,
    LAST_OFFSET_DELTA_OFFSET,
    MAX_TIMESTAMP_OFFSET,
    NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
    RECORDS_COUNT_OFFSET,
    CompressionType,
    ControlRecordType,
    Header,
    SimpleRecord,
    TimestampType,
)
from kafkalog.records.validator import (
    AppendOrigin,
    LogAppendInfo,
    LogValidator,
    ValidationResult,
    ValidatorConfig,
    analyze_and_validate_records,
    target_compression_from_config,
    trim_invalid_bytes,
    validate_messages_and_assign_offsets,
)

T0 = 1_700_000_000_000
NOW = T0 + 60_000
HOUR = 3_600_000
CREATE = TimestampType.CREATE_TIME
APPEND = TimestampType.LOG_APPEND_TIME
NONE, GZIP, SNAPPY, LZ4, ZSTD = (
    CompressionType.NONE,
    CompressionType.GZIP,
    CompressionType.SNAPPY,
    CompressionType.LZ4,
    CompressionType.ZSTD,
)
LEGACY_CODECS = [NONE, GZIP, SNAPPY, LZ4]
ALL_CODECS = [*LEGACY_CODECS, ZSTD]


# --- helpers --------------------------------------------------------------------------------------


def recs(n: int = 3, *, ts: int = T0, keys: bool = True) -> list[SimpleRecord]:
    return [
        SimpleRecord(value=f"value-{i}".encode(), key=f"key-{i}".encode() if keys else None, timestamp=ts + i)
        for i in range(n)
    ]


def build(
    magic: int = 2, codec: CompressionType = NONE, records: Sequence[SimpleRecord] | None = None, **kw: object
) -> MemoryRecords:
    return MemoryRecords.with_records(magic, codec, recs() if records is None else records, **kw)  # type: ignore[arg-type]


def validate(
    records: MemoryRecords | bytes,
    *,
    offset: int = 100,
    now: int = NOW,
    epoch: int = 7,
    origin: AppendOrigin = AppendOrigin.CLIENT,
    source: CompressionType | None = None,
    **config: object,
) -> ValidationResult:
    return validate_messages_and_assign_offsets(
        records,
        offset_counter=offset,
        now_ms=now,
        config=ValidatorConfig(**config),  # type: ignore[arg-type]
        partition_leader_epoch=epoch,
        origin=origin,
        source_compression=source,
    )


def concat(*parts: MemoryRecords | bytes) -> bytes:
    return b"".join(p.to_bytes() if isinstance(p, MemoryRecords) else p for p in parts)


def batches(records: MemoryRecords) -> list[RecordBatch]:
    return list(iter_batches(records.buffer))


def read(records: MemoryRecords) -> list[tuple[int, int, bytes | None, bytes | None]]:
    return [(r.offset, r.timestamp, r.key, r.value) for r in records.records()]


def patch_v2(data: bytes, fmt: str, pos: int, value: int) -> bytes:
    """Overwrite a v2 header field and fix the CRC (to make batches a real client would not)."""
    buf = bytearray(data)
    struct.pack_into(fmt, buf, pos, value)
    struct.pack_into(">I", buf, CRC_OFFSET, crc32c(buf[ATTRIBUTES_OFFSET:]))
    return bytes(buf)


def legacy_wrapper(
    magic: int, codec: CompressionType, inner: Sequence[bytes], wrapper_offset: int, ts: int = T0
) -> bytes:
    """A legacy compressed wrapper around hand-made inner entries (codec applied with magic 2 for zstd,
    which only the wrapper attributes then claim)."""
    payload = compress(codec, b"".join(inner), 2 if codec is ZSTD else magic)
    return encode_message(magic, wrapper_offset, ts, None, payload, int(codec))[0]


# --- configuration --------------------------------------------------------------------------------


def test_target_compression_from_config() -> None:
    assert target_compression_from_config("producer") is None
    assert target_compression_from_config("uncompressed") is NONE
    assert target_compression_from_config("zstd") is ZSTD


def test_config_rejects_bad_values() -> None:
    with pytest.raises(InvalidConfigError, match=r"target magic 3"):
        ValidatorConfig(target_magic=3)
    with pytest.raises(InvalidConfigError, match=r"CreateTime or LogAppendTime"):
        ValidatorConfig(timestamp_type=TimestampType.NO_TIMESTAMP_TYPE)


# --- analyze_and_validate_records -----------------------------------------------------------------


def test_analyze_v2_client_base_offset_must_be_zero() -> None:
    records = build(base_offset=5)
    with pytest.raises(InvalidRecordError, match=r"baseOffset .* should be 0, but it is 5.*batch 0"):
        analyze_and_validate_records(records, AppendOrigin.CLIENT)
    # replication and coordinators may send any base offset
    info = analyze_and_validate_records(records, AppendOrigin.REPLICATION)
    assert (info.first_offset, info.last_offset) == (5, 7)


def test_analyze_legacy_client_offsets_are_not_checked() -> None:
    info = analyze_and_validate_records(build(1, base_offset=5), AppendOrigin.CLIENT)
    assert (info.first_offset, info.last_offset_of_first_batch, info.last_offset) == (-1, 5, 7)


def test_analyze_record_too_large() -> None:
    records = build()
    size = records.size_in_bytes
    with pytest.raises(RecordTooLargeError, match=rf"{size} bytes.*maximum configured value of {size - 1}"):
        analyze_and_validate_records(records, AppendOrigin.CLIENT, max_message_bytes=size - 1)
    info = analyze_and_validate_records(
        records, AppendOrigin.CLIENT, max_message_bytes=size - 1, ignore_record_size=True
    )
    assert info.valid_bytes == size
    assert (
        analyze_and_validate_records(records, AppendOrigin.CLIENT, max_message_bytes=size).valid_bytes == size
    )


def test_analyze_corrupt_crc() -> None:
    data = bytearray(build(1).to_bytes())
    data[-1] ^= 0xFF  # last message's value
    with pytest.raises(CorruptRecordError, match=r"stored crc = \d+.*batch 2 at position"):
        analyze_and_validate_records(MemoryRecords(bytes(data)), AppendOrigin.CLIENT)


def test_analyze_out_of_order_offsets_only_matter_for_follower_appends() -> None:
    data = concat(build(1, records=recs(1), base_offset=7), build(1, records=recs(1), base_offset=3))
    info = analyze_and_validate_records(MemoryRecords(data), AppendOrigin.CLIENT, assign_offsets=True)
    assert not info.offsets_monotonic
    with pytest.raises(OffsetsOutOfOrderError, match=r"Out of order offsets.*\[7, 3\]"):
        analyze_and_validate_records(MemoryRecords(data), AppendOrigin.REPLICATION, assign_offsets=False)


def test_analyze_fields() -> None:
    gz = build(1, GZIP, recs(3, ts=T0 + 100), base_offset=10)
    plain = build(1, NONE, recs(2, ts=T0), base_offset=13)
    info = analyze_and_validate_records(MemoryRecords(concat(plain, gz)), AppendOrigin.REPLICATION)
    assert info.source_compression is GZIP
    assert info.shallow_count == 3
    assert (info.last_offset_of_first_batch, info.last_offset) == (13, 12)
    assert (info.max_timestamp, info.shallow_offset_of_max_timestamp) == (T0 + 102, 12)
    assert not info.offsets_monotonic


def test_analyze_and_trim_partial_tail() -> None:
    whole = build().to_bytes()
    data = whole + whole[:40]
    info = analyze_and_validate_records(MemoryRecords(data), AppendOrigin.REPLICATION)
    assert info.valid_bytes == len(whole) and info.shallow_count == 1
    assert trim_invalid_bytes(MemoryRecords(data), info).to_bytes() == whole
    same = MemoryRecords(whole)
    assert trim_invalid_bytes(same, analyze_and_validate_records(same, AppendOrigin.CLIENT)) is same


def test_trim_rejects_negative_valid_bytes() -> None:
    info = LogAppendInfo(-1, -1, None, NO_TIMESTAMP, -1, NONE, -5, -1, 0, True)
    with pytest.raises(CorruptRecordError, match=r"illegal length -5"):
        trim_invalid_bytes(MemoryRecords(b""), info)


def test_log_append_info_after_validation() -> None:
    records = build()
    info = analyze_and_validate_records(records, AppendOrigin.CLIENT)
    result = validate(records, timestamp_type=APPEND)
    updated = info.with_validation_result(result, first_offset=100, timestamp_type=APPEND)
    assert (updated.first_offset, updated.last_offset, updated.num_messages) == (100, 102, 3)
    assert (updated.max_timestamp, updated.shallow_offset_of_max_timestamp) == (NOW, 102)
    assert updated.log_append_time == NOW
    assert info.with_validation_result(result, first_offset=100, timestamp_type=CREATE).log_append_time == -1


# --- batch-level errors ---------------------------------------------------------------------------


@pytest.mark.parametrize("target", [NONE, GZIP])
def test_empty_record_set(target: CompressionType) -> None:
    with pytest.raises(InvalidRecordError, match=r"no batches at all"):
        validate(MemoryRecords(b""), target_compression=target)


@pytest.mark.parametrize(
    ("magic", "codec", "target"),
    [
        (2, NONE, NONE),
        (2, NONE, GZIP),
        (2, GZIP, GZIP),
        (2, ZSTD, NONE),
        (1, GZIP, GZIP),
        (0, LZ4, NONE),
        (1, SNAPPY, GZIP),
    ],
)
def test_only_one_batch_for_v2_or_compressed(
    magic: int, codec: CompressionType, target: CompressionType
) -> None:
    data = concat(build(magic, codec), build(magic, codec))
    with pytest.raises(InvalidRecordError, match=r"more than one batch.*position"):
        validate(MemoryRecords(data), target_compression=target, target_magic=magic)


def test_several_uncompressed_legacy_batches_are_fine() -> None:
    result = validate(build(1, records=recs(4)), target_magic=1)
    assert [o for o, *_ in read(result.validated_records)] == [100, 101, 102, 103]
    # and with a compressed target they become one wrapper
    result = validate(build(1, records=recs(4)), target_magic=1, target_compression=GZIP)
    assert [b.compression_type for b in batches(result.validated_records)] == [GZIP]


def test_batch_magic_must_match_first_batch() -> None:
    data = concat(build(1, records=recs(1)), build(0, records=recs(1)))
    with pytest.raises(
        InvalidRecordError, match=r"Batch magic 0 is not the same as the first batch's magic.*1"
    ):
        validate(MemoryRecords(data), target_magic=1)


def test_v2_count_must_match_offsets() -> None:
    builder = MemoryRecordsBuilder(2, NONE, CREATE, 0)
    for offset in (0, 2, 5):
        builder.append_with_offset(offset, T0, b"k", b"v")
    gappy = builder.build()
    with pytest.raises(
        InvalidRecordError, match=r"Inconsistent batch offset range \[0, 5\] and count of records 3"
    ):
        validate(gappy)
    # a coordinator is trusted with such batches
    result = validate(gappy, origin=AppendOrigin.COORDINATOR)
    # Kafka sets the *last* offset to the last assigned one (counter - 1) and keeps the deltas
    assert RecordBatch(result.validated_records.buffer).last_offset == 102 == result.next_offset - 1


def test_v2_invalid_offset_range() -> None:
    data = patch_v2(build(records=recs(1)).to_bytes(), ">i", LAST_OFFSET_DELTA_OFFSET, -1)
    with pytest.raises(InvalidRecordError, match=r"invalid offset range: \[0, -1\]"):
        validate(MemoryRecords(data))


def test_v2_batch_without_records() -> None:
    # a one-record batch cut down to its header, claiming 0 records (offset range [0, 0])
    buf = bytearray(build(records=recs(1)).to_bytes()[:RECORD_BATCH_OVERHEAD])
    struct.pack_into(">i", buf, 8, RECORD_BATCH_OVERHEAD - 12)
    data = patch_v2(bytes(buf), ">i", RECORDS_COUNT_OFFSET, 0)
    assert RecordBatch(data).is_valid()
    for target in (NONE, GZIP):
        with pytest.raises(InvalidRecordError, match=r"Invalid reported count for record batch: 0"):
            validate(MemoryRecords(data), target_compression=target)


def test_control_batches_from_clients_are_rejected() -> None:
    marker = MemoryRecords.with_end_transaction_marker(
        0, T0, 0, 42, 1, EndTransactionMarker(ControlRecordType.COMMIT, 3)
    )
    with pytest.raises(InvalidRecordError, match=r"not allowed to write control records.*batch 0"):
        validate(marker)
    result = validate(marker, origin=AppendOrigin.COORDINATOR, target_compression=GZIP)
    out = batches(result.validated_records)[0]
    assert out.is_control and out.compression_type is NONE and out.base_offset == 100


def test_producer_id_with_negative_sequence() -> None:
    data = build(producer_id=42, producer_epoch=1, base_sequence=0).to_bytes()
    data = patch_v2(data, ">i", BASE_SEQUENCE_OFFSET, -1)
    with pytest.raises(
        InvalidRecordError, match=r"Invalid sequence number -1 in record batch with producerId 42"
    ):
        validate(MemoryRecords(data))


@pytest.mark.parametrize("target_magic", [0, 1])
@pytest.mark.parametrize("codec", [NONE, GZIP])
def test_transactional_and_idempotent_need_magic_2(target_magic: int, codec: CompressionType) -> None:
    txn = build(2, codec, producer_id=42, producer_epoch=1, base_sequence=0, is_transactional=True)
    with pytest.raises(
        UnsupportedForMessageFormatError, match=rf"Transactional.*magic version {target_magic}"
    ):
        validate(txn, target_magic=target_magic)
    idempotent = build(2, codec, producer_id=42, producer_epoch=1, base_sequence=0)
    with pytest.raises(UnsupportedForMessageFormatError, match=rf"Idempotent.*magic version {target_magic}"):
        validate(idempotent, target_magic=target_magic)


def test_producer_state_is_kept_when_rebuilding() -> None:
    txn = build(2, NONE, producer_id=42, producer_epoch=3, base_sequence=17, is_transactional=True)
    result = validate(txn, target_compression=LZ4)
    out = batches(result.validated_records)[0]
    assert (out.producer_id, out.producer_epoch, out.base_sequence, out.is_transactional) == (42, 3, 17, True)
    assert out.compression_type is LZ4 and out.partition_leader_epoch == 7


@pytest.mark.parametrize("target_magic", [0, 1])
def test_zstd_needs_magic_2(target_magic: int) -> None:
    with pytest.raises(UnsupportedCompressionTypeError, match=rf"zstd.*magic {target_magic}"):
        validate(build(2, NONE), target_magic=target_magic, target_compression=ZSTD)
    with pytest.raises(UnsupportedCompressionTypeError, match=rf"zstd.*magic {target_magic}"):
        validate(build(2, ZSTD), target_magic=target_magic)  # compression.type=producer


def test_legacy_zstd_wrapper_is_rejected() -> None:
    inner = [encode_message(1, i, T0, b"k", b"v", 0)[0] for i in range(2)]
    wrapper = legacy_wrapper(1, ZSTD, inner, 1)
    with pytest.raises(UnsupportedCompressionTypeError, match=r"zstd.*magic 1.*batch 0"):
        validate(MemoryRecords(wrapper), target_magic=2)


def test_headers_cannot_be_down_converted() -> None:
    records = [SimpleRecord(b"v", b"k", T0, (Header("h", b"x"),))]
    with pytest.raises(UnsupportedForMessageFormatError, match=r"headers.*offset 0"):
        validate(build(2, NONE, records), target_magic=1)


# --- record-level errors --------------------------------------------------------------------------


@pytest.mark.parametrize(("magic", "codec"), [(0, NONE), (1, NONE), (1, GZIP), (2, NONE), (2, SNAPPY)])
def test_compacted_topic_needs_keys(magic: int, codec: CompressionType) -> None:
    records = [SimpleRecord(b"a", b"k", T0), SimpleRecord(b"b", None, T0), SimpleRecord(b"c", None, T0)]
    data = build(magic, codec, records)
    if magic < 2 and codec is NONE:
        # one batch per legacy message: the second batch fails on its own
        with pytest.raises(RecordValidationError, match=r"1 record errors.*batch 1 at position") as info:
            validate(data, target_magic=magic, compacted_topic=True)
        assert info.value.record_errors == [(0, "Compacted topic cannot accept message without key")]
        return
    with pytest.raises(RecordValidationError, match=r"rejected due to 2 record errors") as info:
        validate(data, target_magic=magic, compacted_topic=True)
    assert not isinstance(info.value, InvalidTimestampError)
    assert [i for i, _ in info.value.record_errors] == [1, 2]
    assert all("without key" in m for _, m in info.value.record_errors)
    validate(data, target_magic=magic)  # fine when not compacted


@pytest.mark.parametrize(("magic", "codec"), [(1, NONE), (1, LZ4), (2, NONE), (2, GZIP)])
def test_timestamps_out_of_range(magic: int, codec: CompressionType) -> None:
    records = [
        SimpleRecord(b"ok", b"k", NOW - HOUR),
        SimpleRecord(b"old", b"k", NOW - HOUR - 1),
        SimpleRecord(b"new", b"k", NOW + HOUR + 1),
    ]
    with pytest.raises(InvalidTimestampError, match=r"invalid timestamp") as info:
        validate(
            build(magic, codec, records),
            target_magic=magic,
            timestamp_before_max_ms=HOUR,
            timestamp_after_max_ms=HOUR,
        )
    errors = info.value.record_errors
    if codec is NONE and magic < 2:
        assert errors == [(0, errors[0][1])]  # the 2nd single-message batch fails first
        assert f"Timestamp {NOW - HOUR - 1} of message with offset 1 is out of range" in errors[0][1]
    else:
        assert [i for i, _ in errors] == [1, 2]
        assert f"{NOW - HOUR - 1} of message with offset 1" in errors[0][1]
        assert f"within [{NOW - HOUR}, {NOW + HOUR}]" in errors[1][1]


def test_timestamps_are_not_checked_on_log_append_time_topics_or_without_timestamp() -> None:
    far = [SimpleRecord(b"x", b"k", 5)]
    # LogAppendTime: the broker's clock replaces the far-off timestamp.
    appended = validate(build(2, NONE, far), timestamp_type=APPEND, timestamp_before_max_ms=1,
                        timestamp_after_max_ms=1)
    assert appended.max_timestamp == NOW
    assert [r.timestamp for r in appended.validated_records.records()] == [NOW]
    # v0 has no timestamp to check; a v2 record may carry none (-1).
    untimed = [SimpleRecord(b"x", b"k", NO_TIMESTAMP)]
    for result in (validate(build(0, NONE, far), target_magic=0, timestamp_before_max_ms=1),
                   validate(build(2, NONE, untimed), timestamp_before_max_ms=1)):
        assert result.max_timestamp == NO_TIMESTAMP
        assert [(r.offset, r.value) for r in result.validated_records.records()] == [(100, b"x")]


def test_timestamp_and_key_errors_together_are_a_timestamp_error() -> None:
    records = [SimpleRecord(b"a", None, T0), SimpleRecord(b"b", b"k", NOW + 10 * HOUR)]
    with pytest.raises(InvalidTimestampError) as info:
        validate(build(2, NONE, records), compacted_topic=True, timestamp_after_max_ms=HOUR)
    assert [i for i, _ in info.value.record_errors] == [0, 1]
    assert "without key" in info.value.record_errors[0][1]


def test_record_errors_read_as_kafkas_log_validator_writes_them() -> None:
    """The texts a producer gets (record errors and the top-level message) are Kafka's own, the
    partition named; the exception's own message also says where in the append it was."""
    records = [SimpleRecord(b"a", b"k", T0), SimpleRecord(b"bb", None, T0)]
    with pytest.raises(RecordValidationError) as info:
        validate(build(2, NONE, records), compacted_topic=True, topic_partition="cmp-0")
    assert info.value.record_errors == [(1, "Compacted topic cannot accept message without key in topic "
                                            "partition cmp-0")]
    assert info.value.client_message == (
        "One or more records have been rejected due to 1 record errors in total, and only showing the "
        "first three errors at most: [RecordError(batchIndex=1, message='Compacted topic cannot accept "
        "message without key in topic partition cmp-0')]")
    assert "batch 0 at position 0" in str(info.value)
    data = build(2, NONE, [SimpleRecord(b"vv", b"k", T0)], log_append_time=T0, timestamp_type=APPEND)
    with pytest.raises(InvalidTimestampError) as ts_info:
        validate(data, timestamp_type=APPEND)
    expected = (f"Invalid timestamp type in message DefaultRecord(offset=0, timestamp={T0}, key=1 bytes, "
                "value=2 bytes). Producer should not set timestamp type to LogAppendTime.")
    assert ts_info.value.record_errors == [(0, expected)]
    assert ts_info.value.client_message == "One or more records have been rejected due to invalid timestamp"
    # A compressed batch Kafka may keep as sent is read without keys and values
    # (skipKeyValueIterator): its records print as PartialDefaultRecord, a null key as -1 bytes.
    kept = build(2, GZIP, [SimpleRecord(b"vv", None, T0)], log_append_time=T0, timestamp_type=APPEND)
    with pytest.raises(InvalidTimestampError) as partial:
        validate(kept, timestamp_type=APPEND, target_compression=GZIP)
    assert partial.value.record_errors == [(0, (
        f"Invalid timestamp type in message PartialDefaultRecord(offset=0, timestamp={T0}, key=-1 bytes, "
        "value=2 bytes). Producer should not set timestamp type to LogAppendTime."))]
    # Kafka computes the bounds in Java longs: now + Long.MAX_VALUE (after.max.ms unset) wraps.
    with pytest.raises(InvalidTimestampError) as wrapped:
        validate(build(2, NONE, [SimpleRecord(b"v", b"k", NOW - 2 * HOUR)]), timestamp_before_max_ms=HOUR)
    ((_, text),) = wrapped.value.record_errors
    assert text.endswith(f"should be within [{NOW - HOUR}, {NOW + 2**63 - 1 - 2**64}]")


def test_log_append_time_from_producers() -> None:
    # On a LogAppendTime topic a producer may not claim LogAppendTime.
    data = build(2, NONE, log_append_time=T0, timestamp_type=APPEND)
    with pytest.raises(InvalidTimestampError, match=r"LogAppendTime"):
        validate(data, timestamp_type=APPEND)
    # On a CreateTime topic Kafka only refuses it when the batch timestamp is -1 ...
    builder = MemoryRecordsBuilder(2, NONE, APPEND, 0, NO_TIMESTAMP)
    builder.append(NO_TIMESTAMP, b"k", b"v")
    with pytest.raises(InvalidTimestampError, match=r"should not set timestamp type to LogAppendTime"):
        validate(builder.build())
    # ... and otherwise range-checks that timestamp and rewrites the batch as CreateTime.
    result = validate(data)
    assert batches(result.validated_records)[0].timestamp_type is CREATE
    with pytest.raises(InvalidTimestampError):
        validate(data, timestamp_before_max_ms=1)


def test_corrupt_inner_message_crc() -> None:
    inner = [encode_message(1, i, T0, b"k", b"v", 0)[0] for i in range(3)]
    bad = bytearray(inner[1])
    bad[-1] ^= 0x01
    inner[1] = bytes(bad)
    wrapper = legacy_wrapper(1, GZIP, inner, 2)
    with pytest.raises(CorruptRecordError, match=r"offset 1 \(record 1 of batch 0.*stored crc"):
        validate(MemoryRecords(wrapper), target_magic=1)
    with pytest.raises(CorruptRecordError):
        validate(MemoryRecords(wrapper), target_magic=2)


def test_inner_magic_must_match_wrapper() -> None:
    inner = [encode_message(1, 0, T0, b"k", b"v", 0)[0], encode_message(0, 1, T0, b"k", b"v", 0)[0]]
    wrapper = legacy_wrapper(1, GZIP, inner, 1)
    with pytest.raises(RecordValidationError, match=r"record errors") as info:
        validate(MemoryRecords(wrapper), target_magic=1)
    assert info.value.record_errors == [(1, info.value.record_errors[0][1])]
    assert info.value.record_errors[0][1].startswith("Record LegacyRecordBatch(offset=1, Record(magic=0, ")
    assert info.value.record_errors[0][1].endswith("'s magic does not match outer magic 1")


def test_compressed_inner_message_is_invalid() -> None:
    nested = encode_message(1, 0, T0, None, compress(GZIP, b"xx", 1), int(GZIP))[0]
    wrapper = legacy_wrapper(1, GZIP, [nested], 0)
    with pytest.raises(InvalidRecordError, match=r"must not be compressed.*batch 0"):
        validate(MemoryRecords(wrapper), target_magic=1)


def test_v2_structure_errors_name_the_batch() -> None:
    data = patch_v2(
        build(records=recs(2)).to_bytes(), ">i", RECORDS_COUNT_OFFSET, 3
    )  # recordsCount 3, but 2 records
    with pytest.raises(InvalidRecordError, match=r"batch 0 at position 0"):
        validate(MemoryRecords(data), origin=AppendOrigin.COORDINATOR)


# --- offsets, timestamps and in-place edits -------------------------------------------------------


def test_in_place_v2_keeps_crc_when_only_offset_and_epoch_change() -> None:
    data = build().to_bytes()
    result = validate(MemoryRecords(data), offset=1000, epoch=12)
    out = result.validated_records.to_bytes()
    assert out[16:] == data[16:]
    batch = RecordBatch(out)
    assert (batch.base_offset, batch.partition_leader_epoch) == (1000, 12)
    assert (result.max_timestamp, result.shallow_offset_of_max_timestamp, result.next_offset) == (
        T0 + 2,
        1002,
        1003,
    )


def test_in_place_v2_fixes_a_wrong_max_timestamp() -> None:
    data = patch_v2(build().to_bytes(), ">q", MAX_TIMESTAMP_OFFSET, T0 + 999)
    out = validate(MemoryRecords(data)).validated_records
    batch = batches(out)[0]
    batch.ensure_valid()
    assert batch.max_timestamp == T0 + 2


def test_in_place_v1_shallow_offset_is_first_max() -> None:
    records = [
        SimpleRecord(b"a", None, T0 + 5),
        SimpleRecord(b"b", None, T0 + 9),
        SimpleRecord(b"c", None, T0 + 9),
    ]
    result = validate(build(1, NONE, records), target_magic=1)
    assert (result.max_timestamp, result.shallow_offset_of_max_timestamp) == (T0 + 9, 101)
    assert not result.messages_size_maybe_changed


def test_in_place_v0_has_no_max_timestamp() -> None:
    for ts_type in (CREATE, APPEND):
        result = validate(build(0, NONE), target_magic=0, timestamp_type=ts_type)
        assert (result.max_timestamp, result.shallow_offset_of_max_timestamp) == (-1, -1)
        assert [o for o, *_ in read(result.validated_records)] == [100, 101, 102]


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_in_place_compressed_v2_log_append_time(codec: CompressionType) -> None:
    data = build(2, codec).to_bytes()
    result = validate(MemoryRecords(data), timestamp_type=APPEND)
    out = result.validated_records.to_bytes()
    assert out[RECORD_BATCH_OVERHEAD:] == data[RECORD_BATCH_OVERHEAD:]  # payload untouched
    batch = RecordBatch(out)
    batch.ensure_valid()
    assert batch.timestamp_type is APPEND and batch.max_timestamp == NOW
    assert batch.base_timestamp == T0
    assert (result.max_timestamp, result.shallow_offset_of_max_timestamp) == (NOW, 102)
    assert [r.timestamp for r in batch.records()] == [NOW] * 3


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4])
def test_in_place_compressed_v1(codec: CompressionType) -> None:
    data = build(1, codec).to_bytes()
    result = validate(MemoryRecords(data), target_magic=1)
    out = result.validated_records.to_bytes()
    assert not result.messages_size_maybe_changed
    assert out[8:] == data[8:]
    assert read(result.validated_records) == [
        (100 + i, T0 + i, f"key-{i}".encode(), f"value-{i}".encode()) for i in range(3)
    ]
    assert (result.max_timestamp, result.shallow_offset_of_max_timestamp) == (T0 + 2, 102)


def test_v1_wrapper_with_non_sequential_inner_offsets_is_rebuilt() -> None:
    builder = MemoryRecordsBuilder(1, GZIP, CREATE, 0)
    for offset in (0, 2, 5):
        builder.append_with_offset(offset, T0 + offset, b"k", b"v%d" % offset)
    result = validate(builder.build(), target_magic=1)
    assert result.messages_size_maybe_changed
    assert [(o, v) for o, _, _, v in read(result.validated_records)] == [
        (100, b"v0"),
        (101, b"v2"),
        (102, b"v5"),
    ]
    assert (result.max_timestamp, result.shallow_offset_of_max_timestamp) == (T0 + 5, 102)


def test_v1_wrapper_offset_zero_is_tolerated() -> None:
    """Old librdkafka sends wrapper offset 0; inner relative offsets 0..n-1 then count as 0..n-1."""
    inner = [encode_message(1, i, T0 + i, b"k", b"v%d" % i, 0)[0] for i in range(3)]
    result = validate(MemoryRecords(legacy_wrapper(1, GZIP, inner, 0)), target_magic=1)
    assert not result.messages_size_maybe_changed
    assert [o for o, *_ in read(result.validated_records)] == [100, 101, 102]


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4])
def test_v0_compressed_is_always_rebuilt(codec: CompressionType) -> None:
    result = validate(build(0, codec), target_magic=0)
    assert result.messages_size_maybe_changed
    assert read(result.validated_records) == [
        (100 + i, -1, f"key-{i}".encode(), f"value-{i}".encode()) for i in range(3)
    ]
    assert (result.max_timestamp, result.shallow_offset_of_max_timestamp) == (-1, -1)
    assert batches(result.validated_records)[0].offset == 102


@pytest.mark.parametrize("codec", [GZIP, LZ4, ZSTD])
def test_same_codec_at_another_level_is_not_recompressed(codec: CompressionType) -> None:
    data = build(2, codec, recs(50)).to_bytes()
    result = validate(MemoryRecords(data), target_compression=codec, compression_level=1)
    assert not result.messages_size_maybe_changed
    assert result.validated_records.to_bytes()[RECORD_BATCH_OVERHEAD:] == data[RECORD_BATCH_OVERHEAD:]


@pytest.mark.parametrize("source", ALL_CODECS)
@pytest.mark.parametrize("target", ALL_CODECS)
def test_other_codec_is_recompressed(source: CompressionType, target: CompressionType) -> None:
    result = validate(build(2, source, recs(20)), target_compression=target)
    out = batches(result.validated_records)
    assert len(out) == 1 and out[0].compression_type is target
    out[0].ensure_valid()
    assert result.messages_size_maybe_changed is (source is not target)
    assert read(result.validated_records) == [
        (100 + i, T0 + i, f"key-{i}".encode(), f"value-{i}".encode()) for i in range(20)
    ]


def test_rebuilt_batch_is_rechecked_against_max_message_bytes() -> None:
    records = [SimpleRecord(bytes(range(256)) * 4, b"k", T0)]
    data = build(2, GZIP, records)
    size = data.size_in_bytes
    with pytest.raises(RecordTooLargeError, match=r"after conversion.*maximum configured size of"):
        validate(data, target_compression=NONE, max_message_bytes=size)
    result = validate_messages_and_assign_offsets(
        data,
        offset_counter=0,
        now_ms=NOW,
        partition_leader_epoch=0,
        config=ValidatorConfig(target_compression=NONE, max_message_bytes=size),
        source_compression=None,
        ignore_record_size=True,
    )
    assert result.validated_records.size_in_bytes > size


# --- conversions ----------------------------------------------------------------------------------


def expected_timestamps(
    source_magic: int, target_magic: int, ts_type: TimestampType, original: list[int]
) -> list[int]:
    """What a reader sees after validation, by Kafka's rules."""
    if target_magic == 0:
        return [NO_TIMESTAMP] * len(original)
    if ts_type is APPEND:
        return [NOW] * len(original)
    if source_magic == 0:
        return [NO_TIMESTAMP] * len(original)
    return original


KEYS = [b"key-0", None, b"key-2"]
VALUES = [b"value-0", b"value-1", None]
CHAIN_RECORDS = [SimpleRecord(v, k, T0 + i) for i, (k, v) in enumerate(zip(KEYS, VALUES, strict=True))]


@pytest.mark.parametrize("codec", LEGACY_CODECS)
@pytest.mark.parametrize("ts_type", [CREATE, APPEND])
@pytest.mark.parametrize("source_magic", [0, 1, 2])
@pytest.mark.parametrize("target_magic", [0, 1, 2])
def test_conversion_between_magics(
    codec: CompressionType, ts_type: TimestampType, source_magic: int, target_magic: int
) -> None:
    result = validate(
        build(source_magic, codec, CHAIN_RECORDS), target_magic=target_magic, timestamp_type=ts_type
    )
    out = result.validated_records
    assert {b.magic for b in batches(out)} == {target_magic}
    assert {b.compression_type for b in batches(out)} == {codec}
    assert result.messages_size_maybe_changed is (
        source_magic != target_magic or (target_magic == 0 and codec is not NONE)
    )
    got = read(out)
    assert [o for o, *_ in got] == [100, 101, 102]
    assert [k for _, _, k, _ in got] == KEYS
    assert [v for *_, v in got] == VALUES
    assert [t for _, t, _, _ in got] == expected_timestamps(
        source_magic, target_magic, ts_type, [T0, T0 + 1, T0 + 2]
    )


@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_conversion_chain_v0_v1_v2_and_back(codec: CompressionType) -> None:
    """Each output fed back in as the next input (CreateTime): v0 -> v1 -> v2 -> v1 -> v0, then the
    same from v1 (where timestamps exist to be kept until v0 drops them)."""
    for start, lost in ((0, True), (1, False)):
        current = build(start, codec, CHAIN_RECORDS)
        offset = 0
        for target in (1, 2, 1, 0):
            result = validate(current, target_magic=target, target_compression=codec, offset=offset)
            out = result.validated_records
            assert {b.magic for b in batches(out)} == {target}
            got = read(out)
            assert [o for o, *_ in got] == list(range(offset, offset + 3))
            assert [k for _, _, k, _ in got] == KEYS
            assert [v for *_, v in got] == VALUES
            lost = lost or target == 0
            assert [t for _, t, _, _ in got] == ([NO_TIMESTAMP] * 3 if lost else [T0, T0 + 1, T0 + 2])
            current, offset = out, offset + 3


@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_v2_down_conversion(codec: CompressionType) -> None:
    records = [
        SimpleRecord(b"a", b"k", T0 + 3),
        SimpleRecord(b"b", b"k", T0 + 7),
        SimpleRecord(b"c", b"k", T0 + 7),
    ]
    to_v1 = validate(build(2, codec, records), target_magic=1)
    assert [t for _, t, _, _ in read(to_v1.validated_records)] == [T0 + 3, T0 + 7, T0 + 7]
    # MemoryRecordsBuilder.info(): uncompressed v1 → first offset with the max; compressed → last offset
    assert (to_v1.max_timestamp, to_v1.shallow_offset_of_max_timestamp) == (
        T0 + 7,
        101 if codec is NONE else 102,
    )
    to_v0 = validate(build(2, codec, records), target_magic=0)
    assert [t for _, t, _, _ in read(to_v0.validated_records)] == [NO_TIMESTAMP] * 3
    assert (to_v0.max_timestamp, to_v0.shallow_offset_of_max_timestamp) == (-1, -1)


def test_up_conversion_of_v0_has_no_timestamps() -> None:
    result = validate(build(0, NONE), target_magic=2)
    batch = batches(result.validated_records)[0]
    assert batch.max_timestamp == NO_TIMESTAMP and batch.timestamp_type is CREATE
    assert (result.max_timestamp, result.shallow_offset_of_max_timestamp) == (-1, -1)
    la = validate(build(0, NONE), target_magic=1, timestamp_type=APPEND)
    assert (la.max_timestamp, la.shallow_offset_of_max_timestamp) == (NOW, 100)


def test_log_validator_class() -> None:
    data = build(1, GZIP)
    validator = LogValidator(
        data, now_ms=NOW, config=ValidatorConfig(target_magic=2), partition_leader_epoch=3
    )
    result = validator.validate_messages_and_assign_offsets(40)
    assert result.next_offset == 43
    assert batches(result.validated_records)[0].partition_leader_epoch == 3


@pytest.mark.parametrize("magic", [0, 1, 2])
@pytest.mark.parametrize("codec", [NONE, GZIP])
@pytest.mark.parametrize("target_magic", [0, 1, 2])
@pytest.mark.parametrize("ts_type", [CREATE, APPEND])
def test_input_is_never_modified(
    magic: int, codec: CompressionType, target_magic: int, ts_type: TimestampType
) -> None:
    data = bytearray(build(magic, codec).to_bytes())
    snapshot = bytes(data)
    validate(MemoryRecords(data), target_magic=target_magic, timestamp_type=ts_type, offset=77, epoch=5)
    assert bytes(data) == snapshot


# --- property: any allowed (source magic, codec) → (target magic, codec) --------------------------


record_st = st.builds(
    SimpleRecord,
    value=st.one_of(st.none(), st.binary(max_size=40)),
    key=st.one_of(st.none(), st.binary(max_size=10)),
    timestamp=st.integers(T0 - 10_000, T0 + 10_000),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    records=st.lists(record_st, min_size=1, max_size=12),
    source_magic=st.sampled_from([0, 1, 2]),
    source_codec=st.sampled_from(ALL_CODECS),
    target_magic=st.sampled_from([0, 1, 2]),
    target_codec=st.sampled_from([None, *ALL_CODECS]),
    ts_type=st.sampled_from([CREATE, APPEND]),
    offset=st.integers(0, 1 << 40),
    level=st.sampled_from([None, 1]),
)
def test_any_allowed_conversion_preserves_records(
    records: list[SimpleRecord],
    source_magic: int,
    source_codec: CompressionType,
    target_magic: int,
    target_codec: CompressionType | None,
    ts_type: TimestampType,
    offset: int,
    level: int | None,
) -> None:
    if source_magic < 2 and source_codec is ZSTD:
        source_codec = GZIP
    effective = source_codec if target_codec is None else target_codec
    data = build(source_magic, source_codec, records)
    config = {
        "target_magic": target_magic,
        "target_compression": target_codec,
        "timestamp_type": ts_type,
        "compression_level": level,
    }
    if effective is ZSTD and target_magic < 2:
        with pytest.raises(UnsupportedCompressionTypeError):
            validate(data, offset=offset, **config)
        return
    info = analyze_and_validate_records(data, AppendOrigin.CLIENT)
    result = validate(data, offset=offset, source=info.source_compression, **config)
    out = result.validated_records
    assert result.next_offset == offset + len(records)
    out_batches = batches(out)
    assert out_batches and all(b.magic == target_magic for b in out_batches)
    assert all(b.compression_type is effective for b in out_batches)
    for b in out_batches:
        b.ensure_valid()
        if target_magic == 2:
            assert b.partition_leader_epoch == 7
    got = read(out)
    assert [o for o, *_ in got] == list(range(offset, offset + len(records)))
    assert [k for _, _, k, _ in got] == [r.key for r in records]
    assert [v for *_, v in got] == [r.value for r in records]
    original = [r.timestamp for r in records]
    assert [t for _, t, _, _ in got] == expected_timestamps(source_magic, target_magic, ts_type, original)
    # the validated records are a well-formed follower append
    again = analyze_and_validate_records(out, AppendOrigin.REPLICATION, assign_offsets=False)
    assert again.valid_bytes == out.size_in_bytes
    assert again.last_offset == offset + len(records) - 1
    if target_magic > 0 and (ts_type is APPEND or source_magic > 0):
        assert result.max_timestamp == max(t for _, t, _, _ in got)
