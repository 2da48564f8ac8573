"""Producer-id expiry as Kafka runs it: every ``producer.id.expiration.check.interval.ms`` the broker
forgets the producers idle for ``producer.id.expiration.ms`` (Kafka's PeriodicProducerExpirationCheck);
DescribeProducers stops listing them and their next batch starts afresh at any sequence (KIP-360).
A dynamic ``producer.id.expiration.ms`` reaches every partition at once."""

from __future__ import annotations

import time

from kio.schema.errors import ErrorCode

from kafkalog.broker import Broker
from tests.broker import _raw
from tests.broker.test_dynamic_broker_configs import DYNAMIC_BROKER, _alter, _describe
from tests.broker.test_produce_errors import _batch, _create, _init_producer_id, _produce

TIMEOUT_S = 10
SET = 0


def _describe_producers(sock, topic):
    cls, mod = _raw.request_class(61, 0)
    response = _raw.request(sock, cls(topics=(mod.TopicRequest(name=topic, partition_indexes=(0,)),)))
    (partition,) = response.topics[0].partitions
    assert partition.error_code == ErrorCode.none
    return [state.producer_id for state in partition.active_producers]


def _wait_until_forgotten(sock, topic):
    deadline = time.monotonic() + TIMEOUT_S
    while _describe_producers(sock, topic):
        assert time.monotonic() < deadline, "the producer was never expired"
        time.sleep(0.05)


def test_an_idle_producer_is_expired_while_the_broker_runs(tmp_path):
    configs = {"producer.id.expiration.ms": 1000, "producer.id.expiration.check.interval.ms": 100}
    with Broker(tmp_path / "data", configs=configs) as broker, \
            _raw.connect(broker.bootstrap_servers) as sock:
        _create(sock, "exp")
        pid, epoch = _init_producer_id(sock)
        now = int(time.time() * 1000)
        first = _batch(3, producer_id=pid, epoch=epoch, sequence=0, timestamp=now)
        assert _produce(sock, "exp", first).error_code == ErrorCode.none
        assert _describe_producers(sock, "exp") == [pid]
        # Known, the producer's gap is refused and its retry deduplicated.
        gap = _batch(1, producer_id=pid, epoch=epoch, sequence=7, timestamp=now)
        assert _produce(sock, "exp", gap).error_code == ErrorCode.out_of_order_sequence_number
        assert _produce(sock, "exp", first).base_offset == 0
        _wait_until_forgotten(sock, "exp")
        assert time.time() * 1000 - now >= 1000  # not before producer.id.expiration.ms
        # Forgotten: the same gap is accepted, and the producer is known again from it.
        r = _produce(sock, "exp", gap)
        assert (r.error_code, r.base_offset) == (ErrorCode.none, 3)
        assert _describe_producers(sock, "exp") == [pid]
        log = broker.server.log_manager.get_log("exp", 0)
        assert [b.base_sequence for b in log.batches(0)] == [0, 7]


def test_a_dynamic_expiration_applies_to_every_partition_at_once(tmp_path):
    configs = {"producer.id.expiration.check.interval.ms": 100}  # the expiry itself: Kafka's day
    with Broker(tmp_path / "data", configs=configs) as broker, \
            _raw.connect(broker.bootstrap_servers) as sock:
        node = str(broker.server.apis.node_id)
        topics = ["dyn-a", "dyn-b"]
        now = int(time.time() * 1000)
        for topic in topics:
            _create(sock, topic)
            pid, epoch = _init_producer_id(sock)
            batch = _batch(1, producer_id=pid, epoch=epoch, sequence=0, timestamp=now)
            assert _produce(sock, topic, batch).error_code == ErrorCode.none
        time.sleep(0.3)  # a few checks run: nothing expires after a day's expiry
        assert all(_describe_producers(sock, topic) for topic in topics)
        assert _alter(sock, node, [("producer.id.expiration.ms", SET, "200")]) == (ErrorCode.none, None)
        assert broker.server.log_manager.producer_state_manager_config.producer_id_expiration_ms == 200
        for topic in topics:
            _wait_until_forgotten(sock, topic)
        described = _describe(sock, 4, node, ["producer.id.expiration.ms"])["producer.id.expiration.ms"]
        assert (described.value, described.config_source) == ("200", DYNAMIC_BROKER)
        # Kafka's bound (atLeast(1)) is checked; the check interval is read only at startup.
        assert _alter(sock, node, [("producer.id.expiration.ms", SET, "0")])[0] != ErrorCode.none
        refused = _alter(sock, node, [("producer.id.expiration.check.interval.ms", SET, "5")])
        assert refused[0] == ErrorCode.invalid_request
        assert broker.server.log_manager.producer_state_manager_config.producer_id_expiration_ms == 200


def test_the_check_interval_is_internal(tmp_path):
    """Kafka lists an internal config in DescribeConfigs only when it is set (as an INT)."""
    with Broker(tmp_path / "a") as broker, _raw.connect(broker.bootstrap_servers) as sock:
        configs = _describe(sock, 4, str(broker.server.apis.node_id))
        assert "producer.id.expiration.check.interval.ms" not in configs
        assert configs["producer.id.expiration.ms"].config_type == 3  # INT
    name = "producer.id.expiration.check.interval.ms"
    with Broker(tmp_path / "b", configs={name: 1234}) as broker, \
            _raw.connect(broker.bootstrap_servers) as sock:
        entry = _describe(sock, 4, str(broker.server.apis.node_id))[name]
        assert (entry.value, entry.config_type) == ("1234", 3)
