"""``LogCleaner``: background threads that compact the logs of a data directory (Kafka's ``LogCleaner``).

``log.cleaner.threads`` threads, each with its own :class:`Cleaner` and an offset map of
``log.cleaner.dedupe.buffer.size / threads`` bytes, loop: take the filthiest compacted log from the
:class:`LogCleanerManager`, clean it, checkpoint; then run retention on ``compact,delete`` logs
(which the cleaner owns, as in Kafka); sleep ``log.cleaner.backoff.ms`` when there was nothing to
do. Every wait is bounded and :meth:`LogCleaner.shutdown` stops the threads at the next check
(a clean in progress is aborted; its ``.cleaned`` files are removed).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

from kafkalog.clock import SYSTEM_TIME, Time
from kafkalog.errors import KafkaLogError
from kafkalog.storage.cleaner.cleaner import Cleaner, LogCleaningAbortedError
from kafkalog.storage.cleaner.cleaner_config import CleanerConfig
from kafkalog.storage.cleaner.cleaner_stats import CleanerStats
from kafkalog.storage.cleaner.log_cleaner_manager import LogCleanerManager, TopicPartition
from kafkalog.storage.cleaner.log_to_clean import LogToClean
from kafkalog.storage.cleaner.offset_map import OffsetMap
from kafkalog.storage.cleaner.throttler import Throttler
from kafkalog.storage.log import Log

__all__ = ["CleanerThread", "LogCleaner"]

log = logging.getLogger(__name__)


class _Shutdown(LogCleaningAbortedError):
    """The cleaner is shutting down (Kafka's ``ThreadShutdownException``)."""


class CleanerThread:
    """One cleaner thread: its cleaner and offset map."""

    def __init__(self, cleaner_id: int, owner: LogCleaner) -> None:
        self._owner = owner
        self._cleaner_id = cleaner_id
        self._cleaner: Cleaner | None = None
        self._making = threading.Lock()
        self.thread = threading.Thread(target=self._run, name=f"kafka-log-cleaner-thread-{cleaner_id}",
                                       daemon=True)

    @property
    def cleaner(self) -> Cleaner:
        """This thread's cleaner, made when first needed: its offset map commits the whole dedupe
        buffer (128 MiB by default), which a broker whose logs are never compacted need not hold."""
        with self._making:
            if self._cleaner is None:
                owner = self._owner
                config = owner.config
                # Kafka shares log.cleaner.io.buffer.size between the threads, as it does the dedupe buffer.
                self._cleaner = Cleaner(OffsetMap(config.map_memory_per_thread),
                                        io_buffer_size=config.io_buffer_size // config.num_threads,
                                        dup_buffer_load_factor=config.dedupe_buffer_load_factor,
                                        time=owner.time, check_done=owner.check_done,
                                        cleaner_id=self._cleaner_id, throttler=owner.throttler)
            return self._cleaner

    @property
    def has_cleaner(self) -> bool:
        """Whether the cleaner (and its offset map) was made."""
        return self._cleaner is not None

    def _run(self) -> None:
        owner = self._owner
        while not owner.stopping:
            try:
                cleaned = self.try_clean_filthiest_log()
            except _Shutdown:
                return
            except Exception:  # a broken log must not end the thread (Kafka marks it uncleanable)
                log.exception("Unexpected error in %s", self.thread.name)
                cleaned = False
            if not cleaned:
                owner.wait_backoff()

    def try_clean_filthiest_log(self) -> bool:
        """One pass: clean the filthiest log, then retention of compact,delete logs. True if cleaned."""
        manager = self._owner.manager
        cleanable = manager.grab_filthiest_compacted_log()
        cleaned = False
        if cleanable is not None:
            self.clean_log(cleanable)
            cleaned = True
        deletable = manager.deletable_logs()
        try:
            for _, target in deletable:
                try:
                    target.delete_old_segments()
                except KafkaLogError as e:
                    log.error("Retention of %s failed: %s", target.dir.name, e)
        finally:
            manager.done_deleting([tp for tp, _ in deletable])
        return cleaned

    def clean_log(self, cleanable: LogToClean) -> CleanerStats | None:
        tp = (cleanable.topic, cleanable.partition)
        end_offset: int | None = None
        try:
            end_offset, stats = self.cleaner.clean(cleanable)
            self._owner.record_stats(stats)
            return stats
        except _Shutdown:
            raise
        except LogCleaningAbortedError:
            log.info("Cleaning of %s-%d aborted", *tp)
            return None
        except (KafkaLogError, OSError) as e:
            # Kafka marks the partition uncleanable and goes on with the others.
            log.error("Cleaning of %s-%d failed; it is not cleaned again until the directory is reloaded: %s",
                      tp[0], tp[1], e)
            self._owner.manager.mark_uncleanable(tp)
            return None
        finally:
            self._owner.manager.done_cleaning(tp, end_offset)


class LogCleaner:
    """The cleaner of one data directory. ``start()`` runs it in the background; ``shutdown()`` stops it."""

    def __init__(self, config: CleanerConfig, data_dir: Path, logs: Callable[[], dict[TopicPartition, Log]],
                 *, time: Time = SYSTEM_TIME) -> None:
        self.config = config
        self.time = time
        self.manager = LogCleanerManager(data_dir, logs, time=time)
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._lifecycle = threading.Lock()  # no reconfigure restarts the threads of a shut-down cleaner
        self._shut_down = False
        self._stats_lock = threading.Lock()
        self.throttler = self._throttler(config)
        self.total_stats = CleanerStats(time)
        self.rounds = 0
        self.threads = [CleanerThread(i, self) for i in range(config.num_threads)]
        self._started = False

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def check_done(self, topic_partition: str) -> None:
        """Called by the cleaners between reads: stop promptly on shutdown or abort."""
        if self._stop.is_set():
            raise _Shutdown(f"The log cleaner is shutting down (cleaning {topic_partition})")
        topic, _, partition = topic_partition.rpartition("-")
        self.manager.check_cleaning_aborted((topic, int(partition)))

    def wait_backoff(self) -> None:
        self._wake.wait(self.config.backoff_ms / 1000)
        self._wake.clear()

    def wake(self) -> None:
        """Skip the current backoff (tests, and the CLI after appends)."""
        self._wake.set()

    def record_stats(self, stats: CleanerStats) -> None:
        with self._stats_lock:
            self.total_stats.add(stats)
            self.rounds += 1

    def start(self) -> None:
        if self._started:
            return
        self._started = True
        log.info("Starting the log cleaner with %d thread(s)", len(self.threads))
        for thread in self.threads:
            thread.thread.start()

    def shutdown(self, timeout_s: float = 30.0) -> None:
        """Stop every thread (waiting up to ``timeout_s`` for each); a clean in progress is abandoned."""
        with self._lifecycle:
            self._shut_down = True
        self._stop_threads(timeout_s)

    def _stop_threads(self, timeout_s: float) -> None:
        self._stop.set()
        self._wake.set()
        for thread in self.threads:
            if thread.thread.is_alive():
                thread.thread.join(timeout_s)
                if thread.thread.is_alive():
                    log.warning("%s did not stop within %.0f s", thread.thread.name, timeout_s)

    def reconfigure(self, config: CleanerConfig, timeout_s: float = 30.0) -> None:
        """New settings, as Kafka's ``LogCleaner.reconfigure``: the threads stop (a clean in progress
        is abandoned, its ``.cleaned`` files removed) and new ones start with the new config, its
        throttle rate and maps; which logs are being cleaned, paused or uncleanable is kept."""
        self.config.check_reconfiguration(config)
        with self._lifecycle:
            if self._shut_down:
                return
            self._restart(config, timeout_s)

    def _restart(self, config: CleanerConfig, timeout_s: float) -> None:
        self._stop_threads(timeout_s)
        log.info("Reconfiguring the log cleaner: %d thread(s), %s", config.num_threads, config)
        self.config = config
        self._stop = threading.Event()
        self._wake.clear()
        self.throttler = self._throttler(config)
        self.threads = [CleanerThread(i, self) for i in range(config.num_threads)]
        if self._started:
            for thread in self.threads:
                thread.thread.start()

    def _throttler(self, config: CleanerConfig) -> Throttler | None:
        # One for every thread, as Kafka's; its sleeps end at shutdown (then check_done stops the clean).
        return config.throttler(time=self.time, sleep=lambda ms: self._stop.wait(ms / 1000))

    def abort_and_pause_cleaning(self, tp: TopicPartition) -> None:
        self.manager.abort_and_pause_cleaning(tp)

    def resume_cleaning(self, tp: TopicPartition) -> None:
        self.manager.resume_cleaning(tp)

    def update_checkpoints_for_removed(self, tp: TopicPartition) -> None:
        self.manager.update_checkpoints(remove=tp)
