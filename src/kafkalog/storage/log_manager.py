"""``LogManager``: one data directory (a ``log.dirs`` entry) holding many topics and partitions.

What Kafka's ``LogManager`` does for one log dir, without the broker around it:

* **Lock.** A writer owns the directory: it holds ``<dir>/.lock`` exclusively (``DataDirLock``:
  ``flock`` and the POSIX record lock Kafka's ``FileChannel.tryLock`` takes), so a Kafka broker, another
  owner and the appenders of ``kafkalog.storage.appender`` (which hold it shared) are all refused while
  it is open. Read-only opens take no lock, create nothing and change nothing, so readers work next to
  a running writer. A partition an appender left dirty is recovered at load whatever the
  clean-shutdown marker says; a clean close records ``clean`` for the next appender.
* **Startup** (§8.1): ``meta.properties`` is written if absent; the clean-shutdown marker
  ``.kafka_cleanshutdown`` is read and deleted at once (a crash while loading then counts as unclean);
  ``recovery-point-offset-checkpoint`` and ``log-start-offset-checkpoint`` are read (an unreadable one
  counts as empty: full recovery / no start offset); every ``<topic>-<partition>`` directory is opened
  with ``Log.open``. ``-delete`` directories are removed, ``-future``/``-stray`` ones and the KRaft
  metadata log are left alone, and any other sub-directory is an error, as it is for Kafka.
* **Topics.** Per-topic overrides live in ``kafkalog-topic-configs.json`` (Kafka keeps them in
  its metadata quorum); a topic exists when its partition directories do.
* **Shutdown**: flush, checkpoint, close every log, write the clean-shutdown marker, release the lock.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from kafkalog.clock import SYSTEM_TIME, Time
from kafkalog.errors import (
    InvalidConfigError,
    InvalidTopicError,
    KafkaLogError,
    KafkaStorageError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from kafkalog.records.types import MAGIC_V2
from kafkalog.storage.appender import AppendState, recovery_decision, write_append_state
from kafkalog.storage.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT_FILE,
    RECOVERY_POINT_OFFSET_CHECKPOINT_FILE,
    OffsetCheckpointFile,
)
from kafkalog.storage.config import TOPIC_CONFIGS_FILE, LogConfig, read_topic_configs, write_topic_configs
from kafkalog.storage.dir_lock import LOCK_FILE, DataDirLock
from kafkalog.storage.files import fsync_directory
from kafkalog.storage.log import Log
from kafkalog.storage.log_file_utils import (
    INDEX_FILE_SUFFIX,
    LOG_FILE_SUFFIX,
    TIME_INDEX_FILE_SUFFIX,
    TXN_INDEX_FILE_SUFFIX,
    PartitionDirKind,
    log_delete_dir_name,
    parse_partition_dir_name,
    topic_partition_dir_name,
    validate_topic_name,
)
from kafkalog.storage.metadata_files import (
    META_PROPERTIES_FILE,
    PARTITION_METADATA_FILE,
    CleanShutdownFile,
    MetaProperties,
    PartitionMetadataFile,
    Uuid,
    read_meta_properties,
    write_meta_properties,
)
from kafkalog.storage.partition_dirs import METADATA_TOPIC, scan_partition_dirs
from kafkalog.storage.producer_state import PRODUCER_ID_EXPIRATION_MS, ProducerStateManagerConfig
from kafkalog.storage.recovery_report import RecoveryReport
from kafkalog.storage.txn_index import ABORTED_TXN_SIZE

if TYPE_CHECKING:
    from kafkalog.storage.cleaner.cleaner_config import CleanerConfig
    from kafkalog.storage.cleaner.log_cleaner import LogCleaner

__all__ = [
    "LOCK_FILE",
    "LogManager",
    "PartitionDescription",
    "PartitionRecovery",
    "TopicDescription",
    "open_data_dir",
    "recover_data_dir",
]

log = logging.getLogger(__name__)

# The record format a KRaft broker's logs always write (Kafka's LogConfig default, 3.0-IV1: v2).
_KRAFT_MESSAGE_FORMAT_VERSION = "3.0-IV1"

# Kafka's sample server.properties uses node.id=1; meta.properties must match the broker's node.id.
DEFAULT_NODE_ID = 1

ProgressCallback = Callable[[int, int], None]


@dataclass(frozen=True, slots=True)
class PartitionDescription:
    """One partition of a described topic."""

    partition: int
    log_start_offset: int
    log_end_offset: int
    high_watermark: int
    last_stable_offset: int
    recovery_point: int
    size_in_bytes: int
    segment_count: int

    def to_json(self) -> dict[str, int]:
        return {
            "partition": self.partition,
            "logStartOffset": self.log_start_offset,
            "logEndOffset": self.log_end_offset,
            "highWatermark": self.high_watermark,
            "lastStableOffset": self.last_stable_offset,
            "recoveryPoint": self.recovery_point,
            "size": self.size_in_bytes,
            "segments": self.segment_count,
        }


@dataclass(frozen=True, slots=True)
class TopicDescription:
    """A topic: its id, partitions and the configs set explicitly for it (Kafka string forms)."""

    topic: str
    topic_id: str | None
    partitions: tuple[PartitionDescription, ...]
    config_overrides: Mapping[str, str] = field(default_factory=dict)

    @property
    def size_in_bytes(self) -> int:
        return sum(p.size_in_bytes for p in self.partitions)

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "topicId": self.topic_id,
            "partitionCount": len(self.partitions),
            "configs": dict(sorted(self.config_overrides.items())),
            "partitions": [p.to_json() for p in self.partitions],
        }


@dataclass(frozen=True, slots=True)
class PartitionRecovery:
    """What ``recover_data_dir`` changed in one partition directory."""

    topic: str
    partition: int
    log_end_offset: int
    truncated_bytes: int
    deleted_segments: tuple[str, ...]
    rebuilt_indexes: tuple[str, ...]
    report: RecoveryReport | None = None  # what was cut, with offsets and reasons

    @property
    def changed(self) -> bool:
        return bool(self.truncated_bytes or self.deleted_segments or self.rebuilt_indexes)

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic, "partition": self.partition, "logEndOffset": self.log_end_offset,
            "truncatedBytes": self.truncated_bytes, "deletedSegments": list(self.deleted_segments),
            "rebuiltIndexes": list(self.rebuilt_indexes),
            "cuts": [] if self.report is None else [c.to_json() for c in self.report.cuts],
        }


def _check_partition_count(count: object) -> int:
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise InvalidConfigError(f"Number of partitions must be larger than 0, got {count!r}")
    if count > 2**31 - 1:
        raise InvalidConfigError(f"Number of partitions {count} is larger than the maximum {2**31 - 1}")
    return count


class LogManager:
    """A data directory of topics; see the module docstring. Use as a context manager."""

    def __init__(
        self,
        data_dir: Path | str,
        *,
        default_config: LogConfig | None = None,
        time: Time = SYSTEM_TIME,
        read_only: bool = False,
        force_recovery: bool = False,
        full_recovery: bool = False,
        node_id: int = DEFAULT_NODE_ID,
        cluster_id: str | None = None,
        progress: ProgressCallback | None = None,
        lead: bool = False,
        producer_id_expiration_ms: int = PRODUCER_ID_EXPIRATION_MS,
    ) -> None:
        """Open (in writable mode: create) ``data_dir`` and load every partition in it.

        ``lead``: as a (KRaft) broker that leads every partition, each log opened or created records
        its leader epoch as starting at its end (``Log.become_leader``, Kafka's ``makeLeader``), and
        the logs write record format v2 whatever a topic's ``message.format.version`` says (kept and
        described, but ignored, as Kafka's ``LogConfig.shouldIgnoreMessageFormatVersion`` is for
        every KRaft broker). Offline, the setting is honoured (v0/v1 for old versions).

        ``force_recovery`` loads as after a crash even if the clean-shutdown marker is present;
        ``full_recovery`` additionally ignores the recovery-point checkpoint, so every segment is
        recovered. ``node_id``/``cluster_id`` only matter when ``meta.properties`` is written.
        ``progress(done, total)`` is called as partitions are loaded. ``producer_id_expiration_ms``
        starts the ``ProducerStateManagerConfig`` every partition shares (``producer_state_manager_config``,
        which a dynamic ``producer.id.expiration.ms`` changes).
        """
        self._dir = Path(data_dir)
        self._default_config = default_config if default_config is not None else LogConfig()
        self._time = time
        self._read_only = read_only
        self._lock = threading.RLock()
        self._logs: dict[tuple[str, int], Log] = {}
        self._topic_configs: dict[str, LogConfig] = {}
        self._topic_ids: dict[str, Uuid] = {}
        self._closed = False
        self._dir_lock: DataDirLock | None = None
        self._cleaner: LogCleaner | None = None
        self._had_clean_shutdown = False
        self._lead = lead and not read_only
        self._file_delete_listener: Callable[[int], None] | None = None
        self._producer_state_manager_config = ProducerStateManagerConfig(producer_id_expiration_ms)
        self._prepare_dir(node_id, cluster_id)
        try:
            self._load(force_recovery, full_recovery, progress)
        except BaseException:
            self._abort()
            raise

    # --- opening --------------------------------------------------------------------------------

    def _prepare_dir(self, node_id: int, cluster_id: str | None) -> None:
        data_dir = self._dir
        if self._read_only:
            if not data_dir.is_dir():
                raise KafkaStorageError(f"Data directory {data_dir} does not exist")
            return
        if data_dir.exists() and not data_dir.is_dir():
            raise KafkaStorageError(f"Data directory {data_dir} is not a directory")
        try:
            data_dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise KafkaStorageError(f"Cannot create data directory {data_dir}: {e}") from e
        self._dir_lock = DataDirLock(data_dir, exclusive=True)
        try:
            meta_path = data_dir / META_PROPERTIES_FILE
            if meta_path.exists():
                read_meta_properties(meta_path)  # a malformed file is Kafka's startup error too
            else:
                write_meta_properties(meta_path, MetaProperties(
                    version=1,
                    cluster_id=cluster_id if cluster_id is not None else str(Uuid.random()),
                    node_id=node_id,
                    directory_id=Uuid.random(),
                ))
        except BaseException:
            self._dir_lock.release()
            self._dir_lock = None
            raise

    def _read_checkpoint(self, name: str, meaning: str) -> dict[tuple[str, int], int]:
        try:
            return OffsetCheckpointFile(self._dir / name).read()
        except KafkaLogError as e:
            log.warning("Error reading %s of %s, treating it as empty (%s): %s", name, self._dir, meaning, e)
            return {}

    def _load(self, force_recovery: bool, full_recovery: bool, progress: ProgressCallback | None) -> None:
        marker = CleanShutdownFile(self._dir)
        had_clean_shutdown = marker.exists()
        if had_clean_shutdown and not self._read_only:
            # Kafka deletes the marker before loading, so a crash during loading counts as unclean.
            marker.delete()
        self._had_clean_shutdown = had_clean_shutdown and not force_recovery
        if not self._read_only:
            # Kafka's LogManager creates both (empty) when it starts, before any checkpoint is written.
            for name in (RECOVERY_POINT_OFFSET_CHECKPOINT_FILE, LOG_START_OFFSET_CHECKPOINT_FILE):
                OffsetCheckpointFile(self._dir / name).create_if_missing()
        recovery_points = ({} if full_recovery else
                           self._read_checkpoint(RECOVERY_POINT_OFFSET_CHECKPOINT_FILE, "full recovery"))
        log_start_offsets = self._read_checkpoint(LOG_START_OFFSET_CHECKPOINT_FILE, "no log start offsets")
        stored_configs = read_topic_configs(self._dir)

        to_load: list[tuple[Path, str, int]] = []
        for entry in scan_partition_dirs(self._dir):
            child, parsed = entry.path, entry.name
            if parsed.kind is PartitionDirKind.DELETE:
                if not self._read_only:
                    log.info("Removing %s, a partition directory scheduled for deletion", child)
                    shutil.rmtree(child, ignore_errors=False)
                continue
            if parsed.kind is not PartitionDirKind.LIVE:
                log.info("Ignoring %s (%s replica)", child, parsed.kind.value[1:])
                continue
            if not entry.is_topic_partition:
                log.info("Ignoring %s: the KRaft metadata log is not a topic", child)
                continue
            if self._read_only and not entry.has_segment():
                # A writer is creating this partition right now; it is not readable yet.
                log.info("Skipping %s: no segment yet", child)
                continue
            to_load.append((child, parsed.topic, parsed.partition))

        for index, (directory, topic, partition) in enumerate(to_load):
            config = self._config_for(topic, stored_configs.get(topic, {}))
            topic_id = self._read_topic_id(directory)
            if topic_id is None and not self._read_only:
                # A partition without partition.metadata (copied in, or from an older Kafka) gets its
                # topic's id, so that all partitions of a topic agree.
                topic_id = self._topic_ids.get(topic) or Uuid.random()
            if topic_id is not None:
                self._topic_ids.setdefault(topic, topic_id)
            recovery_point = recovery_points.get((topic, partition), 0)
            clean = self._had_clean_shutdown
            try:
                if not self._read_only:
                    # An appender that died mid-append left its partition dirty (kafkalog.storage.appender).
                    recovery_point, clean = recovery_decision(directory, recovery_point, clean)
                loaded = Log.open(
                    directory,
                    self._live_config(config),
                    recovery_point=recovery_point,
                    log_start_offset=log_start_offsets.get((topic, partition), 0),
                    had_clean_shutdown=clean,
                    time=self._time,
                    read_only=self._read_only,
                    topic_id=topic_id,
                    producer_state_manager_config=self._producer_state_manager_config,
                )
            except KafkaLogError as e:
                raise KafkaStorageError(f"Error while loading partition {topic}-{partition} from "
                                        f"{directory}: {e}") from e
            if self._lead:
                loaded.become_leader()
            self._logs[(topic, partition)] = loaded
            self._topic_configs[topic] = config
            if progress is not None:
                progress(index + 1, len(to_load))

    def _live_config(self, config: LogConfig) -> LogConfig:
        """What the topic's logs run with: as a broker, record format v2 whatever message.format.version."""
        if self._lead and config.target_magic != MAGIC_V2:
            return replace(config, message_format_version=_KRAFT_MESSAGE_FORMAT_VERSION)
        return config

    def _config_for(self, topic: str, overrides: Mapping[str, str]) -> LogConfig:
        try:
            return LogConfig.from_props(overrides, self._default_config)
        except KafkaLogError as e:
            raise KafkaStorageError(f"Invalid config for topic {topic} in "
                                    f"{self._dir / TOPIC_CONFIGS_FILE}: {e}") from e

    @staticmethod
    def _read_topic_id(directory: Path) -> Uuid | None:
        metadata = PartitionMetadataFile(directory / PARTITION_METADATA_FILE)
        if not metadata.exists():
            return None
        try:
            return metadata.read().topic_id
        except KafkaLogError as e:
            log.warning("Ignoring unreadable %s: %s", metadata.path, e)
            return None

    def _abort(self) -> None:
        """Undo a failed open: close what was loaded and release the lock, without a clean marker."""
        for loaded in self._logs.values():
            try:
                loaded.close()
            except Exception:
                log.exception("Error closing %s after a failed open", loaded.dir)
        self._logs.clear()
        self._closed = True
        if self._dir_lock is not None:
            self._dir_lock.release()
            self._dir_lock = None

    # --- state ----------------------------------------------------------------------------------

    @property
    def data_dir(self) -> Path:
        return self._dir

    @property
    def read_only(self) -> bool:
        return self._read_only

    @property
    def had_clean_shutdown(self) -> bool:
        """Whether this open found the clean-shutdown marker (and was not told to ignore it)."""
        return self._had_clean_shutdown

    @property
    def time(self) -> Time:
        return self._time

    @property
    def producer_state_manager_config(self) -> ProducerStateManagerConfig:
        """The producer-id expiry every partition shares (Kafka's ``ProducerStateManagerConfig``)."""
        return self._producer_state_manager_config

    @property
    def default_config(self) -> LogConfig:
        return self._default_config

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaStorageError(f"LogManager for {self._dir} is closed")

    def _check_writable(self, what: str) -> None:
        self._check_open()
        if self._read_only:
            raise KafkaStorageError(f"Cannot {what}: data directory {self._dir} is opened read-only")

    def topics(self) -> list[str]:
        with self._lock:
            return sorted({topic for topic, _ in self._logs})

    def partitions(self, topic: str) -> list[int]:
        with self._lock:
            found = sorted(p for t, p in self._logs if t == topic)
        if not found:
            raise UnknownTopicOrPartitionError(f"Topic {topic!r} does not exist in {self._dir}")
        return found

    def has_topic(self, topic: str) -> bool:
        with self._lock:
            return any(t == topic for t, _ in self._logs)

    def has_partition(self, topic: str, partition: int) -> bool:
        with self._lock:
            return (topic, partition) in self._logs

    def logs(self) -> list[Log]:
        """Every loaded partition log, sorted by topic and partition."""
        with self._lock:
            return [self._logs[key] for key in sorted(self._logs)]

    def get_log(self, topic: str, partition: int) -> Log:
        with self._lock:
            found = self._logs.get((topic, partition))
            if found is None:
                if self.has_topic(topic):
                    raise UnknownTopicOrPartitionError(
                        f"Partition {partition} of topic {topic!r} does not exist in {self._dir} "
                        f"(partitions: {', '.join(map(str, self.partitions(topic)))})")
                raise UnknownTopicOrPartitionError(f"Topic {topic!r} does not exist in {self._dir}")
            return found

    def recovery_reports(self) -> list[RecoveryReport]:
        """What loading cut from the data, one report per partition that lost any (see
        ``kafkalog.storage.recovery_report``); empty after a clean load."""
        with self._lock:
            return [p.recovery_report for _, p in sorted(self._logs.items()) if p.recovery_report.cuts]

    def topic_config(self, topic: str) -> LogConfig:
        with self._lock:
            self.partitions(topic)
            return self._topic_configs[topic]

    def topic_id(self, topic: str) -> Uuid | None:
        with self._lock:
            self.partitions(topic)
            return self._topic_ids.get(topic)

    # --- topic administration -------------------------------------------------------------------

    def _stored_overrides(self) -> dict[str, dict[str, str]]:
        return {topic: cfg.overridden_props() for topic, cfg in self._topic_configs.items()
                if cfg.overridden and self.has_topic(topic)}

    def _create_partition(self, topic: str, partition: int, config: LogConfig, topic_id: Uuid) -> Log:
        directory = self._dir / topic_partition_dir_name(topic, partition)
        try:
            directory.mkdir()
        except FileExistsError:
            raise KafkaStorageError(f"Partition directory {directory} exists already") from None
        except OSError as e:
            raise KafkaStorageError(f"Cannot create partition directory {directory}: {e}") from e
        try:
            # Log.open writes partition.metadata with the topic id, before any append (as Kafka does).
            created = Log.open(directory, self._live_config(config), time=self._time, topic_id=topic_id,
                               producer_state_manager_config=self._producer_state_manager_config)
            created.set_file_delete_listener(self._file_delete_listener)
            if self._lead:
                created.become_leader()
        except BaseException:
            shutil.rmtree(directory, ignore_errors=True)
            raise
        fsync_directory(self._dir)
        return created

    def create_topic(self, topic: str, partitions: int = 1,
                     configs: Mapping[str, Any] | None = None, *, validate_only: bool = False) -> list[Log]:
        """Create ``topic`` with ``partitions`` partitions and the given config overrides (validated
        with Kafka's rules). Raises TopicExistsError, InvalidTopicError or InvalidConfigError.
        ``validate_only``: run every check, create nothing, return []."""
        validate_topic_name(topic)
        if topic == METADATA_TOPIC:
            raise InvalidTopicError(f"Topic name {topic!r} is reserved for the KRaft metadata log")
        count = _check_partition_count(partitions)
        config = LogConfig.from_props(dict(configs or {}), self._default_config)
        with self._lock:
            self._check_writable("create a topic")
            if self.has_topic(topic):
                raise TopicExistsError(f"Topic '{topic}' already exists.")
            # Kafka's Topic.hasCollision: '.' and '_' collide in metric names.
            for existing in self.topics():
                if existing.replace(".", "_") == topic.replace(".", "_"):
                    raise InvalidTopicError(f"Topic '{topic}' collides with existing topic: {existing}")
            if validate_only:
                return []
            # Overrides first: a crash then leaves a harmless config line, never a topic without them.
            overrides = self._stored_overrides()
            if config.overridden:
                overrides[topic] = config.overridden_props()
            write_topic_configs(self._dir, overrides)
            topic_id = Uuid.random()
            created: list[Log] = []
            try:
                for partition in range(count):
                    created.append(self._create_partition(topic, partition, config, topic_id))
            except BaseException:
                for partial in created:
                    partial.close()
                    shutil.rmtree(partial.dir, ignore_errors=True)
                raise
            for partition, new_log in enumerate(created):
                self._logs[(topic, partition)] = new_log
            self._topic_configs[topic] = config
            self._topic_ids[topic] = topic_id
            return created

    def add_partitions(self, topic: str, total: int) -> list[Log]:
        """Grow ``topic`` to ``total`` partitions (Kafka's CreatePartitions); returns the new logs."""
        total = _check_partition_count(total)
        with self._lock:
            self._check_writable("add partitions")
            existing = self.partitions(topic)
            if total <= len(existing):
                if total == len(existing):
                    raise InvalidConfigError(f"Topic {topic} already has {total} partitions.")
                raise InvalidConfigError(f"Topic {topic} currently has {len(existing)} partitions, which is "
                                         f"higher than the requested {total}.")
            topic_id = self._topic_ids.get(topic) or Uuid.random()
            self._topic_ids[topic] = topic_id
            config = self._topic_configs[topic]
            created = []
            for partition in range(max(existing) + 1, max(existing) + 1 + total - len(existing)):
                new_log = self._create_partition(topic, partition, config, topic_id)
                self._logs[(topic, partition)] = new_log
                created.append(new_log)
            return created

    def delete_topic(self, topic: str) -> None:
        """Delete every partition of ``topic``: close it, rename its directory to Kafka's
        ``-delete`` form (so a crash leaves something the next load removes), then remove it."""
        with self._lock:
            self._check_writable("delete a topic")
            partitions = self.partitions(topic)
            doomed = []
            for partition in partitions:
                if self._cleaner is not None:
                    self._cleaner.abort_and_pause_cleaning((topic, partition))
                victim = self._logs.pop((topic, partition))
                victim.close()
                target = self._dir / log_delete_dir_name(topic, partition)
                try:
                    os.replace(victim.dir, target)
                except OSError as e:
                    raise KafkaStorageError(f"Cannot rename {victim.dir} to {target}: {e}") from e
                doomed.append(target)
            fsync_directory(self._dir)
            if self._cleaner is not None:
                for partition in partitions:
                    self._cleaner.update_checkpoints_for_removed((topic, partition))
                    self._cleaner.resume_cleaning((topic, partition))
            self._topic_configs.pop(topic, None)
            self._topic_ids.pop(topic, None)
            write_topic_configs(self._dir, self._stored_overrides())
            self.checkpoint()
            for directory in doomed:
                shutil.rmtree(directory, ignore_errors=True)

    def alter_topic_config(self, topic: str, configs: Mapping[str, Any]) -> LogConfig:
        """Set config overrides of ``topic`` (a value of None removes an override, reverting to the
        default). The result is validated as a whole before anything changes."""
        with self._lock:
            self._check_writable("alter topic configs")
            current = self.topic_config(topic).overridden_props()
            for name, value in configs.items():
                if value is None:
                    LogConfig.default_value(name)  # rejects unknown names
                    current.pop(name, None)
                else:
                    current[name] = value
            new_config = LogConfig.from_props(current, self._default_config)
            overrides = self._stored_overrides()
            overrides.pop(topic, None)
            if new_config.overridden:
                overrides[topic] = new_config.overridden_props()
            write_topic_configs(self._dir, overrides)
            self._topic_configs[topic] = new_config
            for partition in self.partitions(topic):
                self._logs[(topic, partition)].update_config(self._live_config(new_config))
            return new_config

    def reconfigure_default_config(self, default_config: LogConfig) -> None:
        """A new default for every topic config (Kafka's ``reconfigureDefaultLogConfig``, after a
        dynamic broker config changed): each topic keeps its own overrides over it, and its live
        logs take the result at once. Every topic's new config is made before any is applied."""
        with self._lock:
            self._check_open()
            configs = {topic: LogConfig.from_props(config.overridden_props(), default_config)
                       for topic, config in self._topic_configs.items()}
            self._default_config = default_config
            for topic, config in configs.items():
                self._topic_configs[topic] = config
                for partition in self.partitions(topic):
                    self._logs[(topic, partition)].update_config(self._live_config(config))

    def describe_topic(self, topic: str) -> TopicDescription:
        with self._lock:
            self._check_open()
            descriptions = []
            for partition in self.partitions(topic):
                p = self._logs[(topic, partition)]
                descriptions.append(PartitionDescription(
                    partition=partition,
                    log_start_offset=p.log_start_offset,
                    log_end_offset=p.log_end_offset,
                    high_watermark=p.high_watermark,
                    last_stable_offset=p.last_stable_offset,
                    recovery_point=p.recovery_point,
                    size_in_bytes=p.size_in_bytes,
                    segment_count=len(p.segments),
                ))
            topic_id = self._topic_ids.get(topic)
            return TopicDescription(topic, None if topic_id is None else str(topic_id), tuple(descriptions),
                                    self._topic_configs[topic].overridden_props())

    # --- compaction -----------------------------------------------------------------------------

    def _logs_by_partition(self) -> dict[tuple[str, int], Log]:
        # A copy without taking self._lock: the cleaner calls this while LogManager may hold the lock
        # waiting for it to let go of a log (delete_topic), and a dict copy is atomic.
        return dict(self._logs)

    @property
    def cleaner(self) -> LogCleaner | None:
        """The log cleaner, once :meth:`start_cleaner` ran."""
        return self._cleaner

    def start_cleaner(self, config: CleanerConfig | None = None) -> LogCleaner | None:
        """Start compacting this directory's ``cleanup.policy=compact`` logs in the background
        (``log.cleaner.enable``; None when the config disables it). Stopped by :meth:`close`."""
        from kafkalog.storage.cleaner.cleaner_config import CleanerConfig
        from kafkalog.storage.cleaner.log_cleaner import LogCleaner

        with self._lock:
            self._check_writable("start the log cleaner")
            if self._cleaner is not None:
                return self._cleaner
            config = config if config is not None else CleanerConfig()
            if not config.enable_cleaner:
                return None
            self._cleaner = LogCleaner(config, self._dir, self._logs_by_partition, time=self._time)
            self._cleaner.start()
            return self._cleaner

    def reconfigure_cleaner(self, config: CleanerConfig) -> None:
        """The running cleaner takes new settings (dynamic ``log.cleaner.*`` configs); without one,
        nothing changes (``log.cleaner.enable`` is read at startup only, as in Kafka)."""
        cleaner = self._cleaner
        if cleaner is not None and cleaner.config != config:
            cleaner.reconfigure(config)

    def stop_cleaner(self) -> None:
        cleaner, self._cleaner = self._cleaner, None
        if cleaner is not None:
            cleaner.shutdown()

    # --- maintenance ----------------------------------------------------------------------------

    def cleanup_logs(self, *, compact_delete: bool = False) -> int:
        """Run retention (§10) over every partition whose ``cleanup.policy`` is not compact; returns the
        number of segments deleted (Kafka's ``LogManager.cleanupLogs``).

        Logs with ``compact`` in their policy are left alone: a ``compact,delete`` log's retention is
        the log cleaner's (``LogCleaner``), so without a cleaner it gets none, as in Kafka.
        ``compact_delete`` also runs retention over the ``compact,delete`` logs here, as a cleaner would
        (for one-off runs without a broker, ``kafkalog retention``); with a cleaner running they stay
        its own and the flag changes nothing.
        """
        with self._lock:
            self._check_writable("run retention")
            also_compacted = compact_delete and self._cleaner is None
            deleted = sum(p.delete_old_segments() for p in self.logs()
                          if not p.config.compact or (also_compacted and p.config.delete))
            if deleted:
                self.checkpoint()
            return deleted

    def set_file_delete_listener(self, listener: Callable[[int], None] | None) -> None:
        """Every log, loaded now or created later, calls ``listener(due_ms)`` when it renames a segment
        ``.deleted`` (``Log.set_file_delete_listener``); the caller then runs :meth:`delete_pending_files`
        at ``due_ms``, as Kafka's scheduler runs its one-shot ``delete-file`` task."""
        with self._lock:
            self._file_delete_listener = listener
            for p in self._logs.values():
                p.set_file_delete_listener(listener)

    def delete_pending_files(self) -> int:
        """Remove every ``.deleted`` segment whose ``file.delete.delay.ms`` has passed; returns how many."""
        # Without self._lock (see _logs_by_partition): a log's own lock suffices.
        return sum(p.delete_pending_files() for p in self._logs_by_partition().values())

    def next_file_delete_ms(self) -> int | None:
        """When the earliest ``.deleted`` segment of any log is due (None: nothing waits)."""
        logs = self._logs_by_partition().values()
        return min((t for p in logs if (t := p.next_file_delete_ms) is not None), default=None)

    def remove_expired_producers(self) -> int:
        """Forget, in every partition, the producers idle past ``producer.id.expiration.ms`` without an
        open transaction (what Kafka's PeriodicProducerExpirationCheck does); returns how many."""
        with self._lock:
            self._check_writable("expire producers")
            return sum(p.remove_expired_producers() for p in self.logs())

    def flush(self) -> None:
        with self._lock:
            self._check_open()
            if not self._read_only:
                for p in self.logs():
                    p.flush()

    def checkpoint(self) -> None:
        """Write the recovery points and log start offsets of every partition (§7.1)."""
        with self._lock:
            self.checkpoint_log_recovery_offsets()
            self.checkpoint_log_start_offsets()

    def _sorted_logs(self) -> dict[tuple[str, int], Log]:
        return {key: self._logs[key] for key in sorted(self._logs)}

    def checkpoint_log_recovery_offsets(self) -> None:
        """``recovery-point-offset-checkpoint`` (Kafka's ``checkpointLogRecoveryOffsets``, a broker task
        every ``log.flush.offset.checkpoint.interval.ms``)."""
        with self._lock:
            self._check_writable("write checkpoints")
            OffsetCheckpointFile(self._dir / RECOVERY_POINT_OFFSET_CHECKPOINT_FILE).write(
                {key: p.recovery_point for key, p in self._sorted_logs().items()})

    def checkpoint_log_start_offsets(self) -> None:
        """``log-start-offset-checkpoint`` (Kafka's ``checkpointLogStartOffsets``, a broker task every
        ``log.flush.start.offset.checkpoint.interval.ms``). Like Kafka, a log start offset is only
        recorded when it is above the first segment's base offset (otherwise loading derives it from
        the segments)."""
        with self._lock:
            self._check_writable("write checkpoints")
            start_offsets = {}
            for key, p in self._sorted_logs().items():
                first = p.segments.first_segment_base_offset
                if first is not None and p.log_start_offset > first:
                    start_offsets[key] = p.log_start_offset
            OffsetCheckpointFile(self._dir / LOG_START_OFFSET_CHECKPOINT_FILE).write(start_offsets)

    def close(self) -> None:
        """Flush, checkpoint and close every log, write the clean-shutdown marker, release the lock.
        A read-only manager only closes its logs. Idempotent."""
        self.stop_cleaner()  # outside the lock: its threads may be waiting for it
        with self._lock:
            if self._closed:
                return
            try:
                if not self._read_only:
                    for p in self.logs():
                        p.flush()
                    self.checkpoint()
                for p in self.logs():
                    end = p.log_end_offset
                    p.close()
                    if not self._read_only:
                        # Appenders that come after this owner may trust the tail it leaves.
                        write_append_state(p.dir, AppendState(True, end))
                self._logs.clear()
                if not self._read_only:
                    # Only after everything above succeeded: the marker promises consistent files.
                    CleanShutdownFile(self._dir).write()
            finally:
                self._closed = True
                for p in self._logs.values():
                    try:
                        p.close()
                    except Exception:
                        log.exception("Error closing %s", p.dir)
                self._logs.clear()
                if self._dir_lock is not None:
                    self._dir_lock.release()
                    self._dir_lock = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        mode = "read-only" if self._read_only else "writable"
        return f"LogManager({str(self._dir)!r}, {mode}, {len(self._logs)} partitions)"

    def __iter__(self) -> Iterator[Log]:
        return iter(self.logs())


def open_data_dir(path: Path | str, read_only: bool = False, **kwargs: Any) -> LogManager:
    """Open a data directory: ``LogManager(path, read_only=read_only, **kwargs)``."""
    return LogManager(path, read_only=read_only, **kwargs)


# --- recovery report ------------------------------------------------------------------------------


def _trimmed(data: bytes, entry_size: int) -> bytes:
    """Index content without a zero-filled preallocated tail (trimming alone is not a rebuild)."""
    end = len(data) - len(data) % entry_size
    while end >= entry_size and not any(data[end - entry_size:end]):
        end -= entry_size
    return data[:end]


def _partition_files(directory: Path) -> tuple[dict[str, int], dict[str, bytes]]:
    sizes: dict[str, int] = {}
    indexes: dict[str, bytes] = {}
    for path in directory.iterdir():
        if path.name.endswith(LOG_FILE_SUFFIX):
            sizes[path.name] = path.stat().st_size
        elif path.name.endswith(INDEX_FILE_SUFFIX):
            indexes[path.name] = _trimmed(path.read_bytes(), 8)
        elif path.name.endswith(TIME_INDEX_FILE_SUFFIX):
            indexes[path.name] = _trimmed(path.read_bytes(), 12)
        elif path.name.endswith(TXN_INDEX_FILE_SUFFIX):
            indexes[path.name] = _trimmed(path.read_bytes(), ABORTED_TXN_SIZE)
    return sizes, indexes


def recover_data_dir(path: Path | str, *, full: bool = False, default_config: LogConfig | None = None,
                     time: Time = SYSTEM_TIME, progress: ProgressCallback | None = None
                     ) -> list[PartitionRecovery]:
    """Open ``path`` as after a crash (the clean-shutdown marker is ignored and removed), let Kafka's
    recovery run from each recovery point (from offset 0 with ``full``), close cleanly, and report
    per partition what changed on disk: bytes truncated, segments deleted, indexes rebuilt."""
    data_dir = Path(path)
    if not data_dir.is_dir():
        raise KafkaStorageError(f"Data directory {data_dir} does not exist")
    before: dict[str, tuple[dict[str, int], dict[str, bytes]]] = {}
    for child in data_dir.iterdir():
        if child.is_dir() and not child.name.startswith("."):
            try:
                parsed = parse_partition_dir_name(child.name)
            except KafkaLogError:
                continue  # LogManager reports it
            if parsed.kind is PartitionDirKind.LIVE:
                before[child.name] = _partition_files(child)
    ends: dict[tuple[str, int], int] = {}
    reports: dict[tuple[str, int], RecoveryReport] = {}
    with LogManager(data_dir, default_config=default_config, time=time, force_recovery=True,
                    full_recovery=full, progress=progress) as manager:
        for p in manager.logs():
            ends[(p.topic, p.partition)] = p.log_end_offset
            reports[(p.topic, p.partition)] = p.recovery_report
    results = []
    for (topic, partition), end in sorted(ends.items()):
        name = topic_partition_dir_name(topic, partition)
        old_sizes, old_indexes = before.get(name, ({}, {}))
        new_sizes, new_indexes = _partition_files(data_dir / name)
        truncated = sum(size - new_sizes[f] for f, size in old_sizes.items() if f in new_sizes)
        deleted = tuple(sorted(f for f in old_sizes if f not in new_sizes))
        rebuilt = tuple(sorted(f for f, content in new_indexes.items()
                               if (f in old_indexes and old_indexes[f] != content)
                               or (f not in old_indexes and f.split(".")[0] + LOG_FILE_SUFFIX in old_sizes)))
        results.append(PartitionRecovery(topic, partition, end, truncated, deleted, rebuilt,
                                         reports[(topic, partition)]))
    return results

