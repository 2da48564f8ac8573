"""Zig-zag varint/varlong (spec §3.4), including Kafka's length limits and 32/64-bit wrap-around."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalog.errors import InvalidRecordError
from kafkalog.records.varint import (
    decode_varint,
    decode_varlong,
    encode_varint,
    encode_varlong,
    size_of_varint,
    size_of_varlong,
)

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, b"\x00"),
        (-1, b"\x01"),
        (1, b"\x02"),
        (63, b"\x7e"),
        (-64, b"\x7f"),
        (64, b"\x80\x01"),
        (-65, b"\x81\x01"),
        (2**31 - 1, b"\xfe\xff\xff\xff\x0f"),
        (-(2**31), b"\xff\xff\xff\xff\x0f"),
    ],
)
def test_known_varint_encodings(value: int, encoded: bytes) -> None:
    assert encode_varint(value) == encoded
    assert decode_varint(encoded, 0) == (value, len(encoded))
    assert size_of_varint(value) == len(encoded)


def test_known_varlong_encodings() -> None:
    assert encode_varlong(-1) == b"\x01"
    assert encode_varlong(2**63 - 1) == b"\xfe" + b"\xff" * 8 + b"\x01"
    assert encode_varlong(-(2**63)) == b"\xff" * 9 + b"\x01"
    assert decode_varlong(b"\xff" * 9 + b"\x01", 0) == (-(2**63), 10)
    assert size_of_varlong(-(2**63)) == 10


@settings(max_examples=300, deadline=None)
@given(INT32, st.binary(max_size=3))
def test_varint_round_trip(value: int, prefix: bytes) -> None:
    data = prefix + encode_varint(value) + b"\x55"
    assert decode_varint(data, len(prefix)) == (value, len(data) - 1)
    assert size_of_varint(value) == len(encode_varint(value))


@settings(max_examples=300, deadline=None)
@given(INT64)
def test_varlong_round_trip(value: int) -> None:
    data = encode_varlong(value)
    assert decode_varlong(data, 0) == (value, len(data))
    assert size_of_varlong(value) == len(data)


def test_varint_longer_than_five_bytes_is_invalid() -> None:
    with pytest.raises(InvalidRecordError, match="too long"):
        decode_varint(b"\x80\x80\x80\x80\x80\x01", 0)


def test_varlong_longer_than_ten_bytes_is_invalid() -> None:
    with pytest.raises(InvalidRecordError, match="too long"):
        decode_varlong(b"\x80" * 10 + b"\x01", 0)


def test_fifth_varint_byte_keeps_only_32_bits_like_java() -> None:
    # 0x7f in the 5th byte: Java's int shift drops bits 32..34, so this equals ff ff ff ff 0f.
    assert decode_varint(b"\xff\xff\xff\xff\x7f", 0) == (-(2**31), 5)
    assert decode_varint(b"\xfe\xff\xff\xff\x7f", 0) == (2**31 - 1, 5)


@pytest.mark.parametrize("data", [b"", b"\x80", b"\xff\xff", b"\x80\x80\x80\x80"])
def test_premature_end_is_invalid_record(data: bytes) -> None:
    with pytest.raises(InvalidRecordError, match="Premature end"):
        decode_varint(data, 0)
    with pytest.raises(InvalidRecordError):
        decode_varlong(data, 0)


def test_out_of_range_values_cannot_be_encoded() -> None:
    with pytest.raises(InvalidRecordError):
        encode_varint(2**31)
    with pytest.raises(InvalidRecordError):
        encode_varlong(-(2**63) - 1)
