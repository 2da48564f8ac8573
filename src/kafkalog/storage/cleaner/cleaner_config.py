"""``CleanerConfig``: the broker's ``log.cleaner.*`` settings, with Kafka's names and defaults."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from kafkalog.errors import InvalidConfigError

__all__ = ["CleanerConfig"]

MIN_DEDUPE_BUFFER_PER_THREAD: Final = 1024 * 1024


@dataclass(frozen=True, slots=True)
class CleanerConfig:
    num_threads: int = 1                         # log.cleaner.threads
    dedupe_buffer_size: int = 128 * 1024 * 1024  # log.cleaner.dedupe.buffer.size (shared by the threads)
    dedupe_buffer_load_factor: float = 0.9       # log.cleaner.io.buffer.load.factor
    io_buffer_size: int = 512 * 1024             # log.cleaner.io.buffer.size
    backoff_ms: int = 15_000                     # log.cleaner.backoff.ms
    enable_cleaner: bool = True                  # log.cleaner.enable

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

    @property
    def map_memory_per_thread(self) -> int:
        return min(self.dedupe_buffer_size // self.num_threads, 2**31 - 1)

    @classmethod
    def from_broker_props(cls, props: Mapping[str, str | int | float | bool]) -> CleanerConfig:
        """From ``server.properties`` names; others are ignored."""
        d = cls()

        def text(name: str) -> str | None:
            raw = props.get(name)
            return None if raw is None else str(raw).strip()

        def integer(name: str, default: int) -> int:
            raw = text(name)
            try:
                return default if raw is None else int(raw)
            except ValueError:
                raise InvalidConfigError(f"Invalid value {raw} for configuration {name}") from None

        def number(name: str, default: float) -> float:
            raw = text(name)
            try:
                return default if raw is None else float(raw)
            except ValueError:
                raise InvalidConfigError(f"Invalid value {raw} for configuration {name}") from None

        enable = text("log.cleaner.enable")
        if enable is not None and enable.lower() not in ("true", "false"):
            raise InvalidConfigError(f"Invalid value {enable} for configuration log.cleaner.enable")
        return cls(
            num_threads=integer("log.cleaner.threads", d.num_threads),
            dedupe_buffer_size=integer("log.cleaner.dedupe.buffer.size", d.dedupe_buffer_size),
            dedupe_buffer_load_factor=number("log.cleaner.io.buffer.load.factor",
                                             d.dedupe_buffer_load_factor),
            io_buffer_size=integer("log.cleaner.io.buffer.size", d.io_buffer_size),
            backoff_ms=integer("log.cleaner.backoff.ms", d.backoff_ms),
            enable_cleaner=d.enable_cleaner if enable is None else enable.lower() == "true",
        )
