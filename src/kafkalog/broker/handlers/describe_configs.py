"""DescribeConfigs (32), v1-v4 (Kafka's ``describeConfigs``): a topic's configs (override, broker
default or Kafka default, with the source and synonyms), a group's (KIP-848's GROUP resource: the
group's value or the default, for any group id, existing or not), this broker's configs, static and
dynamic, or the cluster-wide dynamic ones (``kafkalog.broker.config_helper`` decides the values),
and its loggers' levels (BROKER_LOGGER, ``runtime_logger_manager``). Config types from v3;
documentation is not kept (null). No config names (null or empty): every config, as Kafka answers.

A resource needs DESCRIBE_CONFIGS on the topic, on the group, or on the cluster for the broker and
its loggers; one refused gets TOPIC_, GROUP_ or CLUSTER_AUTHORIZATION_FAILED and no configs, and
comes after the described ones, as Kafka answers."""

from __future__ import annotations

import re
from typing import Any

from kio.schema.errors import ErrorCode

from kafkalog.broker.acl import AclOperation
from kafkalog.broker.auth_helper import authorization_failed_message
from kafkalog.broker.config_helper import (
    ConfigEntry,
    ConfigSource,
    ResourceType,
    config_authorization_error,
    describe_broker_configs,
    describe_group_configs,
    describe_topic_configs,
)
from kafkalog.broker.group.group_config import group_config_manager
from kafkalog.broker.handlers import handles
from kafkalog.broker.request import ZERO_DELAY, RequestContext, build, nested_type
from kafkalog.broker.runtime_logger_manager import loggers
from kafkalog.errors import InvalidTopicError
from kafkalog.protocol.api_keys import ApiKey
from kafkalog.protocol.codec import response_type
from kafkalog.storage.log_file_utils import validate_topic_name


def _broker_id(name: str) -> int | None:
    """Scala's ``toInt`` of a broker resource name (a sign and ASCII digits: "01" is broker 1)."""
    if re.fullmatch(r"[+-]?[0-9]+", name, re.ASCII) is None:
        return None
    number = int(name)
    return number if -(2**31) <= number < 2**31 else None


def _entries(apis: Any, resource: Any) -> tuple[ErrorCode, str | None, list[Any]]:
    # Kafka's ConfigHelper describes every config when no name is given, null or empty alike.
    names = tuple(resource.configuration_keys) if resource.configuration_keys else None
    if resource.resource_type == ResourceType.TOPIC:
        try:
            validate_topic_name(resource.resource_name)  # Kafka's Topic.validate comes first
        except InvalidTopicError as e:
            return ErrorCode.invalid_topic_exception, str(e), []
        if not apis.log_manager.has_topic(resource.resource_name):
            return ErrorCode.unknown_topic_or_partition, None, []  # no message, as Kafka's
        config = apis.log_manager.topic_config(resource.resource_name)
        return ErrorCode.none, None, describe_topic_configs(config, apis.config, names)
    if resource.resource_type == ResourceType.BROKER:
        if resource.resource_name != "":
            broker_id = _broker_id(resource.resource_name)
            if broker_id is None:
                return (ErrorCode.invalid_request,
                        f"Broker id must be an integer, but it is: {resource.resource_name}", [])
            if broker_id != apis.node_id:
                return (
                    ErrorCode.invalid_request,
                    (
                        f"Unexpected broker id, expected {apis.node_id} or empty string, "
                        f"but received {resource.resource_name}"
                    ),
                    [],
                )
        per_broker = resource.resource_name != ""  # "": the cluster-wide dynamic configs only
        return ErrorCode.none, None, describe_broker_configs(apis.config, names, per_broker)
    if resource.resource_type == ResourceType.BROKER_LOGGER:
        return _broker_loggers(apis.node_id, resource.resource_name, names)
    if resource.resource_type == ResourceType.GROUP:
        if not resource.resource_name:
            return ErrorCode.invalid_request, "Group name must not be empty", []
        props = group_config_manager(apis).group_config(resource.resource_name)
        return ErrorCode.none, None, describe_group_configs(props, apis.config, names)
    return ErrorCode.invalid_request, f"Unsupported resource type: {resource.resource_type}", []


def _broker_loggers(
    node_id: int, name: str, names: tuple[str, ...] | None
) -> tuple[ErrorCode, str | None, list[Any]]:
    """Every logger and its effective level (``runtime_logger_manager``), as Kafka lists its log4j
    loggers: DYNAMIC_BROKER_LOGGER_CONFIG, neither read-only nor sensitive, no synonyms."""
    if not name:
        return ErrorCode.invalid_request, "Broker id must not be empty", []
    requested = _broker_id(name)
    if requested is None:
        return ErrorCode.invalid_request, f"Broker id must be an integer, but it is: {name}", []
    if requested != node_id:
        return ErrorCode.invalid_request, f"Unexpected broker id, expected {node_id} but received {name}", []
    entries = [
        # Kafka sends no type for a logger (0, UNKNOWN).
        ConfigEntry(logger, level, ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG, False, False, (), 0)
        for logger, level in loggers().items()
        if not names or logger in names
    ]
    return ErrorCode.none, None, entries


@handles(ApiKey.DESCRIBE_CONFIGS, 1, 4)
async def handle_describe_configs_request(apis: Any, request: RequestContext, body: Any) -> Any:
    cls = response_type(ApiKey.DESCRIBE_CONFIGS, request.api_version)
    result_cls = nested_type(cls, "DescribeConfigsResult")
    entry_cls = nested_type(cls, "DescribeConfigsResourceResult")
    synonym_cls = nested_type(cls, "DescribeConfigsSynonym")
    include_synonyms = getattr(body, "include_synonyms", False)
    results = []
    refused = []
    for resource in body.resources:
        denied = config_authorization_error(
            apis, request, AclOperation.DESCRIBE_CONFIGS, resource.resource_type, resource.resource_name
        )
        if denied != ErrorCode.none:
            refused.append(
                build(
                    result_cls,
                    error_code=denied,
                    error_message=authorization_failed_message(denied),
                    resource_type=resource.resource_type,
                    resource_name=resource.resource_name,
                    configs=(),
                )
            )
            continue
        error, message, entries = _entries(apis, resource)
        configs = tuple(
            build(
                entry_cls,
                name=e.name,
                value=e.value,
                read_only=e.read_only,
                is_default=e.is_default,
                config_source=e.source,
                is_sensitive=e.is_sensitive,
                synonyms=tuple(
                    build(synonym_cls, name=s.name, value=s.value, source=s.source) for s in e.synonyms
                )
                if include_synonyms
                else (),
                config_type=e.config_type,
                documentation=None,
            )
            for e in entries
        )
        results.append(
            build(
                result_cls,
                error_code=error,
                error_message=message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
                configs=configs,
            )
        )
    return build(cls, throttle_time=ZERO_DELAY, results=(*results, *refused))
