"""``KafkaServer``: one broker node on one asyncio loop (Kafka's ``BrokerServer`` startup/shutdown).

Startup: open the data directory with ``LogManager`` (recovery runs in an executor thread), check
``meta.properties`` against ``node.id``, build the ``ReplicaManager`` and ``KafkaApis``, listen,
start the background tasks (retention every ``log.retention.check.interval.ms``, removal of ``.deleted``
segment files ``file.delete.delay.ms`` after their rename, flushing of logs
with a ``flush.ms`` every ``log.flush.scheduler.interval.ms``, recovery-point checkpoints every
``log.flush.offset.checkpoint.interval.ms``, log start offsets every
``log.flush.start.offset.checkpoint.interval.ms``, high watermarks to ``replication-offset-checkpoint``
every ``replica.high.watermark.checkpoint.interval.ms``, producer-id expiry every
``producer.id.expiration.check.interval.ms``). Shutdown: parked fetches are completed, requests in
flight are answered, connections closed, then ``LogManager.close`` flushes, checkpoints and writes
Kafka's clean-shutdown marker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from kafkalog.broker.auth_helper import AUTHORIZER
from kafkalog.broker.config import KafkaConfig, ListenerSpec
from kafkalog.broker.connection_quotas import (
    CONNECTION_QUOTAS,
    ConnectionQuotas,
    validate_connection_quota_configs,
)
from kafkalog.broker.dynamic_broker_config import load_dynamic_configs
from kafkalog.broker.group.coordinator_of import GROUP_COORDINATOR
from kafkalog.broker.group.group_config import GROUP_CONFIG_MANAGER, GroupConfigManager
from kafkalog.broker.group.manager_of import GROUP_METADATA_MANAGER
from kafkalog.broker.kafka_apis import BrokerEndpoint, KafkaApis
from kafkalog.broker.metadata_cache import MetadataCache
from kafkalog.broker.producer_id_manager import ProducerIdManager
from kafkalog.broker.replica_manager import ReplicaManager
from kafkalog.broker.sasl_authenticator import SaslServerAuthenticator, ServerFactories, sasl_server_factories
from kafkalog.broker.scram_credential_store import SCRAM_CREDENTIALS, ScramCredentialStore
from kafkalog.broker.socket_server import SocketServer
from kafkalog.broker.ssl_factory import server_ssl_context, ssl_principal_mapper
from kafkalog.broker.standard_authorizer import StandardAuthorizer
from kafkalog.broker.txn.coordinator_of import TRANSACTION_COORDINATOR
from kafkalog.errors import InvalidConfigError, KafkaStorageError
from kafkalog.storage.cleaner.cleaner_config import CleanerConfig
from kafkalog.storage.log_manager import LogManager
from kafkalog.storage.metadata_files import META_PROPERTIES_FILE, read_meta_properties
from kafkalog.storage.recovery_report import RecoveryReport

__all__ = ["KafkaServer"]

log = logging.getLogger(__name__)

_LONG_MAX = 2**63 - 1


def _advertised_host(spec: ListenerSpec) -> str:
    """Where clients of a listener are told to connect: its advertised host, else its own (loopback
    for a wildcard address)."""
    if spec.advertised_host:
        return spec.advertised_host
    return spec.host if spec.host not in ("", "0.0.0.0", "::") else "127.0.0.1"


def _authenticator(apis: KafkaApis, servers: ServerFactories) -> Callable[[], SaslServerAuthenticator]:
    return lambda: SaslServerAuthenticator(apis, servers)


def _highest_producer_id(log_manager: LogManager) -> int:
    """The highest producer id in any partition's producer state (-1 without any)."""
    return max((pid for partition_log in log_manager.logs()
                for pid in partition_log.producer_state.producers), default=-1)


class KafkaServer:
    def __init__(self, data_dir: Path | str, config: KafkaConfig | None = None) -> None:
        self.data_dir = Path(data_dir)
        config = config if config is not None else KafkaConfig()
        named = config.originals.get("log.dirs", "").strip()
        if not named or Path(named).resolve() != self.data_dir.resolve():
            # DescribeConfigs then reports the directory served, as Kafka's log.dirs names its own.
            config = config.with_overrides({"log.dirs": str(self.data_dir.resolve())})
        self.config = config
        self.log_manager: LogManager | None = None
        # What opening the data directory cut from damaged partitions (kept even if startup fails).
        self.recovery_reports: list[RecoveryReport] = []
        self.apis: KafkaApis | None = None
        self._socket_servers: list[SocketServer] = []
        self.bound_ports: dict[str, int] = {}  # by listener name
        self._tasks: list[asyncio.Task[None]] = []
        self.bound_port: int | None = None
        self._last_flush: dict[Path, float] = {}
        self._file_delete_timers: dict[int, asyncio.TimerHandle] = {}  # by due time (log clock, ms)

    @property
    def bootstrap_servers(self) -> str:
        """host:port to bootstrap from: the first listener's advertised host and bound port."""
        return f"{self.advertised_host}:{self.bound_port}"

    @property
    def advertised_host(self) -> str:
        return _advertised_host(self.config.listeners[0])

    async def startup(self) -> None:
        loop = asyncio.get_running_loop()
        # The dynamic broker configs kept in the data directory, over the static ones.
        self.config = load_dynamic_configs(self.data_dir, self.config)
        config = self.config
        # SSL listeners' keystores are read before the logs are: a config error stops nothing.
        tls = {
            spec.name: server_ssl_context(config, spec.name, spec.security_protocol)
            for spec in config.listeners
            if spec.security_protocol in ("SSL", "SASL_SSL")
        }
        # Only SSL listeners map certificate subjects (SASL_SSL's principal is SASL's), as in Kafka.
        principal_mappers = {
            spec.name: ssl_principal_mapper(config, spec.name)
            for spec in config.listeners
            if spec.security_protocol == "SSL"
        }
        validate_connection_quota_configs(config)
        # The SCRAM users are read now too: a malformed file is a startup error before any log opens.
        scram = ScramCredentialStore.load(self.data_dir)
        group_configs = GroupConfigManager.load(self.data_dir)  # and the group configs
        authorizer = StandardAuthorizer.from_config(config, self.data_dir)  # and the ACLs
        sasl_servers = {
            spec.name: sasl_server_factories(config, spec.name, lambda user, m: scram.credential(user, m))
            for spec in config.listeners
            if spec.security_protocol.startswith("SASL_")
        }
        self.log_manager = await loop.run_in_executor(None, self._open_logs)
        try:
            meta = read_meta_properties(self.data_dir / META_PROPERTIES_FILE)
            if meta.node_id is not None and meta.node_id != config.node_id:
                raise InvalidConfigError(
                    f"Stored node id {meta.node_id} in {self.data_dir / META_PROPERTIES_FILE} doesn't match "
                    f"the configured node.id {config.node_id}"
                )
            if meta.cluster_id is None:
                raise KafkaStorageError(f"No cluster.id in {self.data_dir / META_PROPERTIES_FILE}")
            replica_manager = ReplicaManager(self.log_manager)
            producer_ids = ProducerIdManager(self.data_dir)
            first = config.listeners[0]
            self.apis = KafkaApis(
                config,
                self.log_manager,
                replica_manager,
                producer_ids,
                MetadataCache(self.log_manager),
                meta.cluster_id,
                BrokerEndpoint(config.node_id, "", first.port),
                components={
                    SCRAM_CREDENTIALS: scram,
                    AUTHORIZER: authorizer,
                    GROUP_CONFIG_MANAGER: group_configs,
                },
            )
            coordinator = self.apis.components.get(GROUP_COORDINATOR)
            if coordinator is not None:
                coordinator.startup()  # groups from __consumer_offsets, before the first request
            txn_coordinator = self.apis.components.get(TRANSACTION_COORDINATOR)
            if txn_coordinator is not None:
                # after the groups: completing a transaction can apply offsets it committed
                txn_coordinator.startup()
            # Before the first InitProducerId: above every producer id the partitions and the loaded
            # __transaction_state hold (kafkalog-producer-ids may be missing, e.g. in Kafka's log.dirs).
            producer_ids.ensure_above(max(
                _highest_producer_id(self.log_manager),
                txn_coordinator.state_manager.highest_producer_id if txn_coordinator is not None else -1,
            ))
            apis = self.apis
            quotas = ConnectionQuotas(lambda: apis.config, [spec.name for spec in config.listeners])
            apis.components[CONNECTION_QUOTAS] = quotas  # a dynamic limit wakes the waiting connections
            for spec in config.listeners:
                socket_server = SocketServer(
                    self.apis,
                    max_request_bytes=config.socket_request_max_bytes,
                    idle_ms=config.connections_max_idle_ms,
                    quotas=quotas,
                    listener_name=spec.name,
                    authenticator=_authenticator(self.apis, sasl_servers[spec.name])
                    if spec.name in sasl_servers
                    else None,
                    principal_mapper=principal_mappers.get(spec.name),
                )
                await socket_server.start(spec.host, spec.port, tls.get(spec.name),
                                          backlog=config.get_int("socket.listen.backlog.size"))
                self._socket_servers.append(socket_server)
                self.bound_ports[spec.name] = socket_server.port
                self.apis.endpoints[spec.name] = BrokerEndpoint(
                    config.node_id, _advertised_host(spec), spec.advertised_port or socket_server.port
                )
            self.bound_port = self.bound_ports[first.name]
            self.apis.endpoint = self.apis.endpoints[first.name]
        except BaseException:
            for started in self._socket_servers:
                await started.stop()
            self._socket_servers.clear()
            await loop.run_in_executor(None, self.log_manager.close)
            raise
        self._start_background_tasks()
        listening = ", ".join(
            f"{spec.name} {_advertised_host(spec)}:{self.bound_ports[spec.name]}"
            if len(config.listeners) > 1 or spec.security_protocol != "PLAINTEXT"
            else f"{_advertised_host(spec)}:{self.bound_ports[spec.name]}"
            for spec in config.listeners
        )
        log.info(
            "Kafka-wire broker node %d serving %s on %s (cluster %s)",
            config.node_id,
            self.data_dir,
            listening,
            meta.cluster_id,
        )

    def _open_logs(self) -> LogManager:
        config = self.config
        manager = LogManager(self.data_dir, default_config=config.log_config, node_id=config.node_id,
                             lead=True, producer_id_expiration_ms=config.producer_id_expiration_ms)
        self.recovery_reports = manager.recovery_reports()
        try:
            # compacted topics (``__consumer_offsets`` among them) are cleaned in the background
            manager.start_cleaner(CleanerConfig.from_broker_props(config.values))
        except BaseException:
            manager.close()
            raise
        return manager

    def _start_background_tasks(self) -> None:
        config = self.config
        assert self.log_manager is not None
        loop = asyncio.get_running_loop()

        def file_delete_scheduled(due_ms: int) -> None:  # any thread: the cleaner's too
            with contextlib.suppress(RuntimeError):  # loop closed: LogManager.close deletes them all
                loop.call_soon_threadsafe(self._schedule_file_delete, due_ms)

        self.log_manager.set_file_delete_listener(file_delete_scheduled)
        first_due = self.log_manager.next_file_delete_ms()
        if first_due is not None:
            self._schedule_file_delete(first_due)
        self._schedule("kafka-log-retention", config.log_retention_check_interval_ms, self._cleanup_logs)
        if config.log_flush_scheduler_interval_ms < _LONG_MAX:
            self._schedule(
                "kafka-log-flusher", config.log_flush_scheduler_interval_ms, self._flush_dirty_logs
            )
        self._schedule(
            "group-metadata-manager-cleanup",
            config.get_int("offsets.retention.check.interval.ms"),
            self._cleanup_group_metadata,
        )
        self._schedule(
            "transaction-abort",
            config.get_int("transaction.abort.timed.out.transaction.cleanup.interval.ms"),
            self._abort_timed_out_transactions,
        )
        self._schedule(
            "transactionalId-expiration",
            config.get_int("transaction.remove.expired.transaction.cleanup.interval.ms"),
            self._remove_expired_transactional_ids,
        )
        self._schedule(
            "PeriodicProducerExpirationCheck",
            config.producer_id_expiration_check_interval_ms,
            self._remove_expired_producers,
        )
        self._schedule(
            "kafka-recovery-point-checkpoint",
            config.log_flush_offset_checkpoint_interval_ms,
            self._checkpoint_recovery_offsets,
        )
        self._schedule(
            "kafka-log-start-offset-checkpoint",
            config.log_flush_start_offset_checkpoint_interval_ms,
            self._checkpoint_log_start_offsets,
        )
        # Kafka's ReplicaManager starts this one at once (initial delay 0).
        self._schedule(
            "highwatermark-checkpoint",
            config.replica_high_watermark_checkpoint_interval_ms,
            self._checkpoint_high_watermarks,
            initial_delay_ms=0,
        )

    def _schedule(self, name: str, interval_ms: int, action: Callable[[], Awaitable[None]],
                  initial_delay_ms: int | None = None) -> None:
        """Run ``action`` every ``interval_ms``, first after ``initial_delay_ms`` (default: the interval);
        an interval of 0 or less runs it once, as Kafka's scheduler does."""
        async def run() -> None:
            await asyncio.sleep((interval_ms if initial_delay_ms is None else initial_delay_ms) / 1000)
            while True:
                try:
                    await action()
                except Exception:
                    log.exception("Background task %s failed", name)
                if interval_ms <= 0:
                    return
                await asyncio.sleep(interval_ms / 1000)

        self._tasks.append(asyncio.get_running_loop().create_task(run(), name=name))

    def _schedule_file_delete(self, due_ms: int) -> None:
        """A one-shot timer removes ``.deleted`` segments at ``due_ms`` (Kafka's ``delete-file`` task,
        ``file.delete.delay.ms`` after the rename); one timer per due time."""
        if self.log_manager is None or due_ms in self._file_delete_timers:
            return
        delay_ms = max(0, due_ms - self.log_manager.time.milliseconds())
        self._file_delete_timers[due_ms] = asyncio.get_running_loop().call_later(
            delay_ms / 1000, self._delete_files, due_ms)

    def _delete_files(self, due_ms: int) -> None:
        self._file_delete_timers.pop(due_ms, None)
        manager = self.log_manager
        if manager is None:
            return
        try:
            manager.delete_pending_files()
        except Exception:
            log.exception("Error deleting segment files")
        # The loop's clock and the logs' may disagree a little: what is not due yet gets its own timer.
        next_due = manager.next_file_delete_ms()
        if next_due is not None:
            self._schedule_file_delete(next_due)

    async def _cleanup_logs(self) -> None:
        assert self.log_manager is not None
        deleted = self.log_manager.cleanup_logs()
        if deleted:
            log.info("Retention deleted %d segment(s)", deleted)

    async def _remove_expired_producers(self) -> None:
        """Producers idle past ``producer.id.expiration.ms`` are forgotten (Kafka's
        ``UnifiedLog.removeExpiredProducers``); their next batch may start at any sequence."""
        assert self.log_manager is not None
        removed = self.log_manager.remove_expired_producers()
        if removed:
            log.debug("Expired %d producer id(s)", removed)

    async def _flush_dirty_logs(self) -> None:
        assert self.log_manager is not None
        loop = asyncio.get_running_loop()
        now = loop.time()
        for partition_log in self.log_manager.logs():
            flush_ms = partition_log.config.flush_ms
            last = self._last_flush.get(partition_log.dir, 0.0)
            if flush_ms < _LONG_MAX and (now - last) * 1000 >= flush_ms:
                await loop.run_in_executor(None, partition_log.flush)
                self._last_flush[partition_log.dir] = now

    async def _cleanup_group_metadata(self) -> None:
        """Expired offsets and dead groups become tombstones (Kafka's ``cleanupGroupMetadata``)."""
        if self.apis is None:
            return
        coordinator = self.apis.components.get(GROUP_COORDINATOR)
        manager = self.apis.components.get(GROUP_METADATA_MANAGER)
        if coordinator is not None:
            await coordinator.cleanup_group_metadata()
        elif manager is not None:
            await manager.cleanup_expired_offsets()

    async def _abort_timed_out_transactions(self) -> None:
        """Ongoing transactions past their timeout are aborted; markers a failure left unwritten are
        written again (Kafka's ``abortTimedOutTransactions`` and its marker channel's retries)."""
        coordinator = self.apis.components.get(TRANSACTION_COORDINATOR) if self.apis is not None else None
        if coordinator is not None:
            coordinator.complete_pending_transactions()
            coordinator.abort_timed_out_transactions()

    async def _remove_expired_transactional_ids(self) -> None:
        coordinator = self.apis.components.get(TRANSACTION_COORDINATOR) if self.apis is not None else None
        if coordinator is not None:
            coordinator.state_manager.remove_expired_transactional_ids()

    async def _checkpoint_recovery_offsets(self) -> None:
        assert self.log_manager is not None
        self.log_manager.checkpoint_log_recovery_offsets()

    async def _checkpoint_log_start_offsets(self) -> None:
        assert self.log_manager is not None
        self.log_manager.checkpoint_log_start_offsets()

    async def _checkpoint_high_watermarks(self) -> None:
        if self.apis is not None:
            self.apis.replica_manager.checkpoint_high_watermarks()

    async def shutdown(self) -> None:
        """Answer what is in flight, close the connections, close the logs (clean-shutdown marker)."""
        log.info("Shutting down broker node %d", self.config.node_id)
        if self.apis is not None:
            self.apis.replica_manager.shutdown()
            # parked JoinGroup/SyncGroup requests are answered (NOT_COORDINATOR) before connections close
            coordinator = self.apis.components.get(GROUP_COORDINATOR)
            if coordinator is not None:
                coordinator.shutdown()
        for socket_server in self._socket_servers:
            await socket_server.stop()
        self._socket_servers.clear()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()
        for timer in self._file_delete_timers.values():
            timer.cancel()
        self._file_delete_timers.clear()
        if self.log_manager is not None:
            self.log_manager.set_file_delete_listener(None)  # closing deletes what still waits
        for component in self.apis.components.values() if self.apis is not None else ():
            closer: Any = getattr(component, "shutdown", None)
            if closer is not None:
                result = closer()
                if asyncio.iscoroutine(result):
                    await result
        if self.apis is not None and self.log_manager is not None:
            # Kafka's ReplicaManager.shutdown writes the high watermarks one last time.
            try:
                self.apis.replica_manager.checkpoint_high_watermarks()
            except Exception:
                log.exception("Error writing the high watermark checkpoint at shutdown")
        if self.log_manager is not None:
            await asyncio.get_running_loop().run_in_executor(None, self.log_manager.close)
            self.log_manager = None
        log.info("Broker node %d shut down cleanly", self.config.node_id)

    async def serve_until(self, stop: asyncio.Event) -> None:
        await self.startup()
        try:
            await stop.wait()
        finally:
            await self.shutdown()
