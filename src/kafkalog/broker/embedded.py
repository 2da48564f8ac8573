"""``Broker``: a ``KafkaServer`` on its own event-loop thread, for tests and embedding.

    with Broker(tmp_path / "data", configs={"num.partitions": 3}) as broker:
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)

Port 0 (the default) picks a free port; the host defaults to 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from kafkalog.broker.config import KafkaConfig
from kafkalog.broker.kafka_server import KafkaServer
from kafkalog.errors import BrokerNotAvailableError

__all__ = ["Broker"]

START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 60.0


class Broker:
    def __init__(
        self,
        data_dir: Path | str,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        configs: Mapping[str, Any] | None = None,
    ) -> None:
        props = {"listeners": f"PLAINTEXT://{host}:{port}"}
        props.update({str(k): str(v) for k, v in (configs or {}).items()})
        self.server = KafkaServer(data_dir, KafkaConfig.from_props(props))
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._started = threading.Event()
        self._error: BaseException | None = None

    @property
    def bootstrap_servers(self) -> str:
        if self.server.bound_port is None:
            raise BrokerNotAvailableError("The broker is not running")
        return self.server.bootstrap_servers

    @property
    def port(self) -> int:
        if self.server.bound_port is None:
            raise BrokerNotAvailableError("The broker is not running")
        return self.server.bound_port

    def start(self) -> Self:
        if self._thread is not None:
            raise BrokerNotAvailableError("The broker was started already")
        self._thread = threading.Thread(target=self._run, name="kafkalog-broker", daemon=True)
        self._thread.start()
        if not self._started.wait(START_TIMEOUT_S):
            raise BrokerNotAvailableError(f"The broker did not start within {START_TIMEOUT_S} s")
        if self._error is not None:
            self._thread.join(STOP_TIMEOUT_S)
            raise self._error
        return self

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._main())
        except BaseException as e:  # reported to start(), or lost only after a clean start
            if not self._started.is_set():
                self._error = e
        finally:
            self._started.set()
            loop.close()

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        await self.server.startup()
        self._started.set()
        try:
            await self._stop.wait()
        finally:
            await self.server.shutdown()

    def run_coroutine(self, coro: Any, timeout: float = 30.0) -> Any:
        """Run ``coro`` on the broker's loop (where the logs may be touched) and return its result."""
        if self._loop is None:
            raise BrokerNotAvailableError("The broker is not running")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def stop(self) -> None:
        """Shut down cleanly (in-flight requests answered, logs closed with the clean-shutdown marker)."""
        thread = self._thread
        if thread is None:
            return
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(stop.set)
            except RuntimeError:
                pass  # the loop finished already
        thread.join(STOP_TIMEOUT_S)
        if thread.is_alive():
            raise BrokerNotAvailableError(f"The broker did not stop within {STOP_TIMEOUT_S} s")
        self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
