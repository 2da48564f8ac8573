"""The API table agrees with kio's generated schemas (codec ranges and first flexible versions), and
every registered handler serves versions the codec parses."""

from kio.index import load_request_schema
from kio.schema.index import api_key_map, schema_name_map

from kafkalog.broker.handlers import load_handlers
from kafkalog.protocol.api_keys import API_KEYS, request_header_version, response_header_version


def test_table_matches_kio():
    for key, spec in API_KEYS.items():
        versions = sorted(schema_name_map[api_key_map[key]])
        assert (spec.min_version, spec.max_version) == (versions[0], versions[-1]), spec
        flexible = [v for v in versions if load_request_schema(key, v).__flexible__]
        assert spec.first_flexible == (flexible[0] if flexible else None), spec
        assert flexible == list(range(flexible[0], versions[-1] + 1)) if flexible else True


def test_header_versions():
    assert request_header_version(0, 8) == 1 and request_header_version(0, 9) == 2
    assert response_header_version(1, 11) == 0 and response_header_version(1, 12) == 1
    assert response_header_version(18, 4) == 0  # ApiVersions: always v0


def test_handlers_within_codec_range_and_no_telemetry():
    handlers = load_handlers()
    for key, handler in handlers.items():
        spec = API_KEYS[key]
        assert spec.min_version <= handler.min_version <= handler.max_version <= spec.max_version
    assert 71 not in handlers  # GetTelemetrySubscriptions must not be advertised (librdkafka would use it)
    for key in (0, 1, 2, 3, 10, 18, 22, 23):
        assert key in handlers


def test_components_are_built_at_startup_and_shut_down(tmp_path):
    from kafkalog.broker import Broker
    from kafkalog.broker.handlers import COMPONENT_FACTORIES, register_component

    events = []

    class Component:
        def __init__(self, apis):
            events.append(("built", apis.node_id))

        async def shutdown(self):
            events.append(("shutdown", None))

    register_component("test-component", Component)
    try:
        with Broker(tmp_path) as broker:
            assert isinstance(broker.server.apis.components["test-component"], Component)
    finally:
        del COMPONENT_FACTORIES["test-component"]
    assert events == [("built", 1), ("shutdown", None)]
