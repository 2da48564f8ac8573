"""``CleanerConfig``: the broker's ``log.cleaner.*`` settings, with Kafka's names and defaults."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from kafkalog.clock import SYSTEM_TIME, Time
from kafkalog.errors import InvalidConfigError
from kafkalog.storage.cleaner.throttler import UNLIMITED, Throttler
from kafkalog.storage.config_def import parse_boolean, parse_double, parse_int, parse_long

__all__ = ["CleanerConfig"]

MIN_DEDUPE_BUFFER_PER_THREAD: Final = 1024 * 1024
_JAVA_DOUBLE_MAX: Final = "1.7976931348623157E308"


@dataclass(frozen=True, slots=True)
class CleanerConfig:
    num_threads: int = 1                         # log.cleaner.threads
    dedupe_buffer_size: int = 128 * 1024 * 1024  # log.cleaner.dedupe.buffer.size (shared by the threads)
    dedupe_buffer_load_factor: float = 0.9       # log.cleaner.io.buffer.load.factor
    io_buffer_size: int = 512 * 1024             # log.cleaner.io.buffer.size
    backoff_ms: int = 15_000                     # log.cleaner.backoff.ms
    enable_cleaner: bool = True                  # log.cleaner.enable
    max_io_bytes_per_second: float = UNLIMITED   # log.cleaner.io.max.bytes.per.second (all threads)

    def __post_init__(self) -> None:
        if self.num_threads < 1:
            raise InvalidConfigError(f"Invalid value {self.num_threads} for configuration "
                                     "log.cleaner.threads: Value must be at least 1")
        if self.dedupe_buffer_size // self.num_threads < MIN_DEDUPE_BUFFER_PER_THREAD:
            raise InvalidConfigError(
                "log.cleaner.dedupe.buffer.size must be at least 1MB per cleaner thread.")
        if not self.dedupe_buffer_load_factor > 0:
            raise InvalidConfigError(f"Invalid value {self.dedupe_buffer_load_factor} for configuration "
                                     "log.cleaner.io.buffer.load.factor")
        if self.io_buffer_size < 0 or self.backoff_ms < 0:
            raise InvalidConfigError("log.cleaner.io.buffer.size and log.cleaner.backoff.ms must be >= 0")
        if not self.max_io_bytes_per_second > 0:  # 0 (or NaN) would stop the cleaner for good
            raise InvalidConfigError(f"Invalid value {self.max_io_bytes_per_second} for configuration "
                                     "log.cleaner.io.max.bytes.per.second: Value must be above 0")

    def throttler(self, *, time: Time = SYSTEM_TIME,
                  sleep: Callable[[int], object] | None = None) -> Throttler | None:
        """The throttler the cleaner threads share, or None when the rate is not limited."""
        if self.max_io_bytes_per_second >= UNLIMITED:
            return None
        return Throttler(self.max_io_bytes_per_second, time=time, sleep=sleep)

    @classmethod
    def broker_defaults(cls) -> dict[str, str]:
        """Kafka's defaults of these broker configs, as Kafka writes them (what DescribeConfigs says)."""
        d = cls()
        return {
            "log.cleaner.enable": "true" if d.enable_cleaner else "false",
            "log.cleaner.threads": str(d.num_threads),
            "log.cleaner.dedupe.buffer.size": str(d.dedupe_buffer_size),
            "log.cleaner.io.buffer.load.factor": str(d.dedupe_buffer_load_factor),
            "log.cleaner.io.buffer.size": str(d.io_buffer_size),
            "log.cleaner.io.max.bytes.per.second": _JAVA_DOUBLE_MAX,  # Java's Double.toString of it
            "log.cleaner.backoff.ms": str(d.backoff_ms),
        }

    def check_reconfiguration(self, new: CleanerConfig) -> None:
        """Whether a running cleaner may take ``new`` (Kafka's ``validateReconfiguration``: the thread
        count at least half and at most double the current one)."""
        current = self.num_threads
        if new.num_threads < current // 2:
            raise InvalidConfigError(
                f"Log cleaner threads cannot be reduced to less than half the current value {current}")
        if new.num_threads > current * 2:
            raise InvalidConfigError(
                f"Log cleaner threads cannot be increased to more than double the current value {current}")

    @property
    def map_memory_per_thread(self) -> int:
        return min(self.dedupe_buffer_size // self.num_threads, 2**31 - 1)

    @classmethod
    def from_broker_props(cls, props: Mapping[str, str | int | float | bool]) -> CleanerConfig:
        """From ``server.properties`` names (read as Kafka's ConfigDef reads them); others are ignored."""
        d = cls()

        def value(name: str, parse: Callable[[str, object], Any], default: object) -> Any:
            raw = props.get(name)
            return default if raw is None else parse(name, raw)

        return cls(
            num_threads=value("log.cleaner.threads", parse_int, d.num_threads),
            dedupe_buffer_size=value("log.cleaner.dedupe.buffer.size", parse_long, d.dedupe_buffer_size),
            dedupe_buffer_load_factor=value("log.cleaner.io.buffer.load.factor", parse_double,
                                            d.dedupe_buffer_load_factor),
            io_buffer_size=value("log.cleaner.io.buffer.size", parse_int, d.io_buffer_size),
            backoff_ms=value("log.cleaner.backoff.ms", parse_long, d.backoff_ms),
            max_io_bytes_per_second=value("log.cleaner.io.max.bytes.per.second", parse_double,
                                          d.max_io_bytes_per_second),
            enable_cleaner=value("log.cleaner.enable", parse_boolean, d.enable_cleaner),
        )
