"""ApiVersions (18), v0-v4: the APIs and versions this broker serves, as registered by the handlers,
and from v3 the feature flags (``broker.features``).

A version above ours is answered, as Kafka does, with error 35 (UNSUPPORTED_VERSION) in a v0 body
that lists the versions of ApiVersions we serve (KIP-511), so the client can retry with one of them.
From v3 the client names its software; a name or version that is not Kafka's pattern (letters,
digits, ``-`` and ``.``, starting and ending with a letter or digit) is answered with
INVALID_REQUEST and no table, as ``ApiVersionsRequest.isValid`` has it.
"""

from __future__ import annotations

import re
from typing import Any

from kio.schema.api_versions.v0.response import ApiVersion as ApiVersionV0
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.errors import ErrorCode
from kio.static.primitive import i16

from kafkalog.broker.features import FINALIZED_FEATURES_EPOCH, finalized_features, supported_features
from kafkalog.broker.handlers import handles
from kafkalog.broker.request import ZERO_DELAY, RequestContext, build, nested_type
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.protocol.codec import encode_response, response_type

# Kafka 4 serves Produce from v3 (KIP-896) but advertises it from v0 (KAFKA-18659): older librdkafka
# (2.0.2, kcat 1.7.1's, among them) enables gzip, snappy and lz4 only when the broker lists
# Produce v0, and otherwise sends every batch uncompressed. A v0-v2 request is still refused (the
# connection is closed, as for any version not served).
PRODUCE_API_VERSIONS_RESPONSE_MIN_VERSION = 0


def advertised_versions(apis: Any) -> list[tuple[int, int, int]]:
    """(api_key, min, max) as ApiVersions lists them: what the handlers serve, Produce from v0."""
    return [
        (k, PRODUCE_API_VERSIONS_RESPONSE_MIN_VERSION if k == ApiKey.PRODUCE else lo, hi)
        for k, lo, hi in apis.supported_versions()
    ]


_SOFTWARE_NAME_OR_VERSION = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def unsupported_version_response(apis: Any) -> bytes:
    """The v0 body with error 35 and the versions of ApiVersions we serve."""
    keys = tuple(
        ApiVersionV0(api_key=i16(k), min_version=i16(lo), max_version=i16(hi))
        for k, lo, hi in advertised_versions(apis) if k == ApiKey.API_VERSIONS
    )
    return encode_response(ApiVersionsResponseV0(error_code=ErrorCode.unsupported_version, api_keys=keys))


@handles(ApiKey.API_VERSIONS, 0, 4)
async def handle_api_versions_request(apis: Any, request: RequestContext, body: Any) -> Any:
    cls = response_type(ApiKey.API_VERSIONS, request.api_version)
    if request.api_version >= 3 and not all(
        _SOFTWARE_NAME_OR_VERSION.fullmatch(text)
        for text in (body.client_software_name, body.client_software_version)
    ):
        return build(cls, error_code=ErrorCode.invalid_request, api_keys=(), throttle_time=ZERO_DELAY)
    api_version_cls = nested_type(cls, "ApiVersion")
    keys = tuple(
        api_version_cls(api_key=k, min_version=lo, max_version=hi) for k, lo, hi in advertised_versions(apis)
    )
    # v3+ (tagged fields): the feature flags (broker/features.py). Below v4 Kafka leaves out the
    # features whose lowest supported level is 0, which older clients fail to parse (KAFKA-17492).
    supported_cls = nested_type(cls, "SupportedFeatureKey")
    supported = tuple(
        supported_cls(name=name, min_version=lo, max_version=hi)
        for name, (lo, hi) in sorted(supported_features().items())
        if lo > 0 or request.api_version >= 4
    )
    finalized_cls = nested_type(cls, "FinalizedFeatureKey")
    finalized = tuple(
        finalized_cls(name=name, min_version_level=level, max_version_level=level)
        for name, level in sorted(finalized_features().items())
    )
    return build(cls, error_code=ErrorCode.none, api_keys=keys, throttle_time=ZERO_DELAY,
                 supported_features=supported, finalized_features_epoch=FINALIZED_FEATURES_EPOCH,
                 finalized_features=finalized, zk_migration_ready=False)
