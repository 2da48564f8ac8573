"""``KafkaApis``: decode a request frame, dispatch it by API key to its handler, encode the response
(Kafka's ``KafkaApis.handle``). The components handlers use hang off this object: ``config``,
``log_manager``, ``replica_manager``, ``producer_id_manager`` and whatever a later module attaches
(a group coordinator, a transaction coordinator) via ``components``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kafkalog.broker.handlers import COMPONENT_FACTORIES, HANDLERS, load_handlers
from kafkalog.broker.request import ANONYMOUS, RequestContext
from kafkalog.errors import UnsupportedVersionError
from kafkalog.protocol.api_keys import API_KEYS, ApiKey
from kafkalog.protocol.codec import decode_request, encode_response
from kafkalog.protocol.fetch_response import Chunk
from kafkalog.protocol.headers import encode_response_header, parse_request_header, peek_api

if TYPE_CHECKING:
    from kafkalog.broker.config import KafkaConfig
    from kafkalog.broker.metadata_cache import MetadataCache
    from kafkalog.broker.producer_id_manager import ProducerIdManager
    from kafkalog.broker.replica_manager import ReplicaManager
    from kafkalog.storage.log_manager import LogManager

__all__ = ["BrokerEndpoint", "KafkaApis"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    """How clients reach this node (Metadata's broker entry, FindCoordinator's answer)."""

    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass
class KafkaApis:
    config: KafkaConfig
    log_manager: LogManager
    replica_manager: ReplicaManager
    producer_id_manager: ProducerIdManager
    metadata_cache: MetadataCache
    cluster_id: str
    endpoint: BrokerEndpoint
    components: dict[str, Any] = field(default_factory=dict)
    # Where clients of each listener are told to connect (the first listener's is ``endpoint``).
    endpoints: dict[str, BrokerEndpoint] = field(default_factory=dict)

    def __post_init__(self) -> None:
        load_handlers()
        for name, factory in COMPONENT_FACTORIES.items():
            if name not in self.components:
                self.components[name] = factory(self)

    @property
    def node_id(self) -> int:
        return self.endpoint.node_id

    def endpoint_for(self, request: RequestContext) -> BrokerEndpoint:
        """This node as the clients of the request's listener reach it (Kafka answers Metadata,
        FindCoordinator and DescribeCluster with the endpoint of the listener asked on)."""
        return self.endpoints.get(request.listener_name, self.endpoint)

    def supported_versions(self) -> list[tuple[int, int, int]]:
        """(api_key, min, max) of every served API, as ApiVersions advertises them."""
        return [
            (h.api_key, h.min_version, h.max_version)
            for h in sorted(HANDLERS.values(), key=lambda h: h.api_key)
        ]

    async def handle(
        self,
        frame: memoryview,
        client: tuple[str, int],
        connection_id: str,
        listener_name: str = "",
        principal: str = ANONYMOUS,
    ) -> list[Chunk] | None:
        """The response to one request frame as chunks (header first, no size prefix), or None when
        the request wants no response. Raises InvalidRequestError / UnsupportedVersionError when the
        connection must be closed."""
        api_key, api_version, correlation_id = peek_api(frame)
        handler = HANDLERS.get(api_key)
        if handler is None or not handler.min_version <= api_version <= handler.max_version:
            if api_key == ApiKey.API_VERSIONS:
                # Kafka answers any ApiVersions version, an unknown one with a v0 body and error 35.
                from kafkalog.broker.handlers.api_versions import unsupported_version_response

                return [
                    encode_response_header(api_key, 0, correlation_id),
                    unsupported_version_response(self),
                ]
            spec = API_KEYS.get(api_key)
            name = spec.name if spec is not None else "unknown"
            raise UnsupportedVersionError(
                f"Unsupported API key {api_key} ({name}) version {api_version} from {connection_id}"
            )
        header, offset = parse_request_header(frame)
        body = (
            handler.decode(frame, offset, api_version)
            if handler.decode is not None
            else decode_request(api_key, api_version, frame, offset)
        )
        context = RequestContext(header, client[0], client[1], connection_id, listener_name, principal)
        response = await handler.handle(self, context, body)
        if response is None:
            return None
        head = encode_response_header(api_key, api_version, correlation_id)
        if isinstance(response, list):
            return [head, *response]
        return [head + encode_response(response)]
