"""``kafkalog serve``: run a broker in the foreground until SIGTERM/SIGINT.

    kafkalog serve --data-dir DIR [--host 127.0.0.1] [--port 9092] [--config key=value ...]
                   [--config-file server.properties]
    kafkalog serve --config-file server.properties      # the data directory from log.dirs

Configs use Kafka's broker names; ``--config`` wins over the file, ``--host``/``--port`` over both,
and ``--data-dir`` over the configs' ``log.dirs`` (or ``log.dir``), which name the data directory
when it is not given -- one directory: kafkalog serves a single one.
Data that opening a damaged partition cuts is reported on stderr, one line per partition, as every
writing command reports it. On SIGTERM or SIGINT requests in flight are answered, then the logs are
flushed and closed and Kafka's clean-shutdown marker is written.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kafkalog.errors import InvalidConfigError

__all__ = ["add_serve_command", "cmd_serve"]

log = logging.getLogger(__name__)


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected key=value, got {text!r}")
    return key.strip(), value.strip()


def add_serve_command(commands: Any) -> None:
    p = commands.add_parser("serve", help="serve the data directory over Kafka's wire protocol (blocks)")
    p.add_argument("--data-dir", default=None, type=Path, metavar="DIR",
                   help="the data directory (default: log.dirs, or log.dir, of the configs)")
    p.add_argument(
        "--host", default=None, help="address to listen on (default 127.0.0.1, or the listeners config)"
    )
    p.add_argument(
        "--port", type=int, default=None, help="port to listen on (default 9092; 0 = any free port)"
    )
    p.add_argument(
        "--config",
        action="append",
        type=_key_value,
        default=[],
        metavar="KEY=VALUE",
        help="a broker config by Kafka's name, e.g. num.partitions=3 (repeatable)",
    )
    p.add_argument("--config-file", default=None, metavar="FILE", help="a Kafka server.properties file")
    p.set_defaults(func=cmd_serve)


def cmd_serve(args: argparse.Namespace) -> int:
    from kafkalog.broker.config import KafkaConfig
    from kafkalog.broker.kafka_server import KafkaServer

    props = dict(args.config)
    config = KafkaConfig.from_props(props, file=args.config_file)
    if args.host is not None or args.port is not None:
        host, port = config.listener
        if args.port is not None and not 0 <= args.port <= 65535:
            raise InvalidConfigError(f"Invalid port {args.port}")
        host = (
            args.host if args.host is not None else (host if "listeners" in config.originals else "127.0.0.1")
        )
        port = args.port if args.port is not None else port
        # --host/--port move the first listener; it keeps its name (so SSL stays SSL), and the
        # other listeners stay where they are.
        listeners = [f"{config.listener_name}://{host}:{port}"]
        listeners += [
            f"{spec.name}://{f'[{spec.host}]' if ':' in spec.host else spec.host}:{spec.port}"
            for spec in config.listeners[1:]
        ]
        config = config.with_overrides({"listeners": ",".join(listeners)})
    if args.verbose == 0:
        logging.getLogger("kafkalog.broker").setLevel(logging.INFO)
    server = KafkaServer(data_dir_of(args.data_dir, config.originals), config)
    asyncio.run(_serve(server))
    return 0


def data_dir_of(given: Path | None, originals: Mapping[str, str]) -> Path:
    """The directory to serve: ``--data-dir``, else the configs' ``log.dirs``, else their ``log.dir``
    (Kafka's precedence; its default ``/tmp/kafka-logs`` is not assumed). kafkalog serves one
    directory, so a ``log.dirs`` listing several is refused."""
    if given is not None:
        return given
    for name in ("log.dirs", "log.dir"):
        value = originals.get(name, "").strip()
        if not value:
            continue
        dirs = [d.strip() for d in value.split(",") if d.strip()]
        if len(dirs) != 1:
            raise InvalidConfigError(
                f"{name} lists {len(dirs)} directories ({', '.join(dirs)}): kafkalog serves one data "
                "directory; name it in log.dirs or with --data-dir")
        return Path(dirs[0])
    raise InvalidConfigError("No data directory: give --data-dir, or log.dirs in --config-file or --config")


async def _serve(server: Any) -> None:
    from kafkalog.cli import _report_cuts  # imported here: kafkalog.cli imports this module

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    try:
        await server.startup()
    finally:
        # What opening the data directory cut is reported as by every writing command, also when
        # a later startup step fails (the cut is done by then).
        _report_cuts(server.recovery_reports)
    # One line on stdout that scripts can wait for.
    print(f"kafkalog: serving {server.data_dir} on {server.bootstrap_servers}", flush=True)
    try:
        await stop.wait()
    finally:
        await server.shutdown()
        print("kafkalog: stopped cleanly", file=sys.stderr, flush=True)
