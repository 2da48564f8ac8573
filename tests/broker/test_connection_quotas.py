"""Connection limits as Kafka's ``ConnectionQuotas`` keeps them: at ``max.connections`` a new
connection waits, unread, for a free slot (bounded by ``connections.max.idle.ms`` and the listen
backlog); over ``max.connections.per.ip`` (or its override for the address) it is closed at once; a
dynamic change applies to the next connection and wakes the waiting ones; bad values are refused."""

from __future__ import annotations

import socket
import threading
import time

import pytest
from kio.schema.errors import ErrorCode

from kafkalog.broker.connection_quotas import max_connections_per_ip_overrides
from kafkalog.broker.embedded import Broker
from kafkalog.errors import InvalidConfigError
from tests.broker import _raw
from tests.broker.test_dynamic_broker_configs import SET, _alter

TIMEOUT_S = 10


def _api_versions(sock: socket.socket) -> int:
    cls, _ = _raw.request_class(18, 0)
    return int(_raw.request(sock, cls()).error_code)


def _answered_within(sock: socket.socket, seconds: float) -> bool:
    """Whether an ApiVersions sent now is answered within ``seconds`` (the socket stays usable)."""
    cls, _ = _raw.request_class(18, 0)
    _raw.send_frame(sock, _raw.header(18, 0, 1) + _raw.encode_body(cls()))
    sock.settimeout(seconds)
    try:
        return len(_raw.recv_frame(sock)) > 0
    except TimeoutError:
        return False
    finally:
        sock.settimeout(TIMEOUT_S)


def test_at_max_connections_a_new_connection_waits_for_a_slot(tmp_path):
    with Broker(tmp_path, configs={"max.connections": 2}) as broker:
        first, second = _raw.connect(broker.bootstrap_servers), _raw.connect(broker.bootstrap_servers)
        assert _api_versions(first) == _api_versions(second) == 0
        with _raw.connect(broker.bootstrap_servers) as third:
            assert not _answered_within(third, 0.5)  # held, not closed: Kafka's acceptor blocks
            closer = threading.Timer(0.3, first.close)
            closer.start()
            start = time.monotonic()
            third.settimeout(TIMEOUT_S)
            assert len(_raw.recv_frame(third)) > 0  # the ApiVersions sent while it waited
            assert time.monotonic() - start < 5
            closer.join()
        second.close()


@pytest.mark.parametrize("configs", [
    {"max.connections.per.ip": 1},
    {"max.connections.per.ip": 5, "max.connections.per.ip.overrides": "127.0.0.1:1"},
    {"max.connections.per.ip": 0, "max.connections.per.ip.overrides": "localhost:1"},
])
def test_over_max_connections_per_ip_a_connection_is_closed_at_once(tmp_path, configs):
    with Broker(tmp_path, configs=configs) as broker:
        with _raw.connect(broker.bootstrap_servers) as first:
            assert _api_versions(first) == 0
            with _raw.connect(broker.bootstrap_servers) as second:
                assert _raw.is_closed(second)
            assert _api_versions(first) == 0
        # the slot is the address's again once the first has gone
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            with _raw.connect(broker.bootstrap_servers) as again:
                try:
                    if _api_versions(again) == 0:
                        break
                except ConnectionError:
                    pass  # the first's close not yet counted
            assert time.monotonic() < deadline, "the closed connection's slot never came back"
            time.sleep(0.05)


def test_a_dynamic_limit_applies_to_the_next_connection_and_wakes_the_waiting(tmp_path):
    with Broker(tmp_path) as broker:
        admin = _raw.connect(broker.bootstrap_servers)
        assert _alter(admin, "", [("max.connections", SET, "1")]) == (ErrorCode.none, None)
        with _raw.connect(broker.bootstrap_servers) as waiting:
            assert not _answered_within(waiting, 0.5)
            assert _alter(admin, "", [("max.connections", SET, "3")]) == (ErrorCode.none, None)
            assert _answered_within(waiting, 5)
        assert _alter(admin, "", [("max.connections.per.ip", SET, "1")]) == (ErrorCode.none, None)
        with _raw.connect(broker.bootstrap_servers) as refused:
            assert _raw.is_closed(refused)
        # Kafka's checks before anything changes
        error, message = _alter(admin, "", [("max.connections.per.ip", SET, "0")])
        assert error == ErrorCode.invalid_request
        assert message == ("max.connections.per.ip can be set to zero only if "
                           "max.connections.per.ip.overrides property is set.")
        error, message = _alter(admin, "", [("max.connections", SET, "-1")])
        assert error == ErrorCode.invalid_request and "Value must be at least 0" in message
        admin.close()


def test_bad_values_are_one_clear_startup_error(tmp_path):
    with pytest.raises(InvalidConfigError, match="not of the form host:count"):
        Broker(tmp_path / "a", configs={"max.connections.per.ip.overrides": "127.0.0.1"}).start()
    with pytest.raises(InvalidConfigError, match="can be set to zero only if"):
        Broker(tmp_path / "b", configs={"max.connections.per.ip": 0}).start()
    assert max_connections_per_ip_overrides(" 127.0.0.1:3 , ::1:4,") == {"127.0.0.1": 3, "::1": 4}
