"""The size prefix is checked before anything is allocated; headers parse per version."""

import struct

import pytest

from kafkalog.errors import InvalidRequestError
from kafkalog.protocol.framing import check_frame_size
from kafkalog.protocol.headers import encode_response_header, parse_request_header


@pytest.mark.parametrize("size", [-17, -1, 0, 101, 2**31 - 1])
def test_bad_sizes_refused(size):
    with pytest.raises(InvalidRequestError):
        check_frame_size(struct.pack(">i", size), 100)


def test_good_size():
    assert check_frame_size(struct.pack(">i", 100), 100) == 100


def test_request_header_v1_and_v2():
    v1 = struct.pack(">hhih", 3, 8, 42, 3) + b"cli" + b"BODY"
    header, offset = parse_request_header(memoryview(v1))
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (3, 8, 42, "cli")
    assert header.header_version == 1 and v1[offset:] == b"BODY"
    # v2: a tagged field (tag 5, 2 bytes) after the client id is skipped
    v2 = struct.pack(">hhih", 3, 12, 7, -1) + b"\x01\x05\x02zz" + b"BODY"
    header, offset = parse_request_header(memoryview(v2))
    assert (header.client_id, header.header_version) == (None, 2) and v2[offset:] == b"BODY"
    with pytest.raises(InvalidRequestError):
        parse_request_header(memoryview(v2[:12]))


def test_response_headers():
    assert encode_response_header(3, 8, 9) == struct.pack(">i", 9)
    assert encode_response_header(3, 12, 9) == struct.pack(">i", 9) + b"\x00"
    assert encode_response_header(18, 3, 9) == struct.pack(">i", 9)  # ApiVersions: header v0 always
