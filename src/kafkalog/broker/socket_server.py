"""The network layer (Kafka's ``SocketServer`` + ``Processor``), on one asyncio loop.

Per connection, Kafka's discipline: read one frame (size checked before the body is read), handle it
to completion, write the response, then read the next — so at most one request is in flight and
responses leave in request order ("muting", as Kafka's selector does). The write buffer is bounded
(``drain``), a connection idle for ``connections.max.idle.ms`` is closed, and a frame that cannot be
parsed, an unknown API key or an unsupported version costs one log line and that connection only.
Fetch responses carry file regions, sent with ``loop.sendfile`` (``os.sendfile``: zero copy).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import ipaddress
import itertools
import logging
import socket
import ssl
import time
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any, cast

from kafkalog.broker.connection_quotas import ConnectionQuotas, TooManyConnectionsError
from kafkalog.broker.file_region import FileRegion
from kafkalog.broker.request import ANONYMOUS
from kafkalog.broker.sasl_authenticator import MAX_RECEIVE_SIZE, SaslServerAuthenticator
from kafkalog.broker.ssl_factory import ssl_principal
from kafkalog.broker.ssl_principal_mapper import SslPrincipalMapper
from kafkalog.errors import InvalidRequestError, SslPrincipalMappingError
from kafkalog.protocol.fetch_response import Chunk, chunks_size
from kafkalog.protocol.framing import SIZE_PREFIX, check_frame_size, size_prefix

if TYPE_CHECKING:
    from kafkalog.broker.kafka_apis import KafkaApis

__all__ = ["SocketServer"]

log = logging.getLogger(__name__)

WRITE_BUFFER_HIGH = 4 * 1024 * 1024
HANDSHAKE_TIMEOUT_S = 10.0  # a TLS client that never finishes its handshake is dropped after this
STREAM_LIMIT = 64 * 1024
_ExceptionHandler = Callable[[asyncio.AbstractEventLoop, dict[str, Any]], object]


class _AcceptFailureLog:
    """When file handles run out, asyncio reports every failed accept with a traceback — up to a
    backlog's worth per readiness event, and again at each retry: tens of thousands of lines a
    minute. One warning per ``interval_s`` instead (with how many were folded into it); asyncio
    itself pauses accepting for a second and retries. Anything else goes to the previous handler."""

    MESSAGE = "socket.accept() out of system resource"

    def __init__(self, previous: _ExceptionHandler | None, interval_s: float = 5.0) -> None:
        self._previous = previous
        self._interval_s = interval_s
        self._last = -interval_s
        self._folded = 0

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if context.get("message") != self.MESSAGE:
            if self._previous is not None:
                self._previous(loop, context)
            else:
                loop.default_exception_handler(context)
            return
        now = time.monotonic()
        if now - self._last < self._interval_s:
            self._folded += 1
            return
        log.warning(
            "Cannot accept connections: %s (%d more such failures since the last warning); retrying",
            context.get("exception"),
            self._folded,
        )
        self._last, self._folded = now, 0


class _TlsHandshake(asyncio.Protocol):
    """A TLS connection's first protocol: it holds the socket's reading until asyncio's TLS layer
    takes the connection over (``SocketServer._handshake``), so that the ClientHello reaches it. The
    handshake is the server's own to await, so its failure is logged as Kafka does — asyncio's own
    TLS server (``start_server(ssl=…)``) reports a failed handshake only in debug mode."""

    def __init__(self, server: SocketServer, context: ssl.SSLContext) -> None:
        self._server = server
        self._context = context

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport = cast(asyncio.Transport, transport)
        transport.pause_reading()  # before the loop's first read of the socket
        self._server._start_handshake(transport, self._context)

    def connection_lost(self, exc: Exception | None) -> None:
        pass  # the handshake then fails, and says so


def java_host_address(host: str) -> str:
    """A client address as Java's ``InetAddress.getHostAddress`` writes it, which ACL host rules,
    group member hosts and logs are compared with: IPv6 in eight groups without leading zeros
    (``0:0:0:0:0:0:0:1``, not ``::1``), an IPv4-mapped IPv6 address as the IPv4 one, a scope kept."""
    address, sep, scope = host.partition("%")
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return host
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return ":".join(f"{int(group, 16):x}" for group in ip.exploded.split(":")) + sep + scope
    return str(ip)


class SocketServer:
    def __init__(
        self,
        apis: KafkaApis,
        *,
        max_request_bytes: int,
        idle_ms: int,
        quotas: ConnectionQuotas,
        listener_name: str = "",
        authenticator: Callable[[], SaslServerAuthenticator] | None = None,
        principal_mapper: SslPrincipalMapper | None = None,
    ) -> None:
        self._listener_name = listener_name
        self._principal_mapper = principal_mapper  # an SSL listener's ssl.principal.mapping.rules
        self._authenticator = authenticator  # a SASL listener: one per connection
        self._apis = apis
        self._max_request_bytes = max_request_bytes
        self._idle_s = idle_ms / 1000 if idle_ms >= 0 else None
        self._quotas = quotas
        self._server: asyncio.Server | None = None
        self._connections: dict[asyncio.Task[None], asyncio.StreamWriter] = {}
        self._busy: set[asyncio.Task[None]] = set()  # connections with a request in flight
        self._handshakes: set[asyncio.Task[None]] = set()  # TLS handshakes under way
        self._ids = itertools.count()
        self._stopping = False

    @property
    def port(self) -> int:
        assert self._server is not None
        sockname = self._server.sockets[0].getsockname()
        return int(sockname[1])

    async def start(self, host: str, port: int, ssl_context: ssl.SSLContext | None = None, *,
                    backlog: int = 50) -> None:
        """Listen on ``host``:``port``; with ``ssl_context``, every connection is TLS (an SSL
        listener), its handshake bounded by ``HANDSHAKE_TIMEOUT_S``."""
        loop = asyncio.get_running_loop()
        handler = loop.get_exception_handler()
        if not isinstance(handler, _AcceptFailureLog):  # one per loop, however many listeners
            loop.set_exception_handler(_AcceptFailureLog(handler))
        if ssl_context is None:
            self._server = await asyncio.start_server(
                self._serve_connection, host or None, port, reuse_address=True, backlog=backlog,
                limit=STREAM_LIMIT,
            )
        else:
            context = ssl_context
            self._server = await loop.create_server(
                lambda: _TlsHandshake(self, context), host or None, port, reuse_address=True, backlog=backlog
            )

    def _start_handshake(self, transport: asyncio.Transport, context: ssl.SSLContext) -> None:
        task = asyncio.get_running_loop().create_task(self._handshake(transport, context))
        self._handshakes.add(task)
        task.add_done_callback(self._handshakes.discard)

    async def _handshake(self, transport: asyncio.Transport, context: ssl.SSLContext) -> None:
        """The TLS handshake of a new connection, then the connection served as any other. A failed
        handshake is one INFO line, as Kafka's Selector logs its SslAuthenticationException; a
        client gone during it (or too slow, HANDSHAKE_TIMEOUT_S) only a DEBUG one."""
        peer = transport.get_extra_info("peername") or ("?", 0)
        host = java_host_address(str(peer[0]))
        connection_id = f"{host}:{peer[1]}-{next(self._ids)}"
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=STREAM_LIMIT, loop=loop)
        # Once told of the TLS transport, the stream protocol starts _serve_connection, as start_server does.
        protocol = asyncio.StreamReaderProtocol(
            reader, functools.partial(self._serve_connection, connection_id=connection_id), loop=loop
        )
        if self._stopping:
            transport.close()
            return
        try:
            tls = await loop.start_tls(
                transport, protocol, context, server_side=True, ssl_handshake_timeout=HANDSHAKE_TIMEOUT_S
            )
            if tls is None:  # the connection closed as the handshake ended
                transport.close()
                return
            # start_tls leaves connection_made to the caller (it upgrades a connected protocol).
            protocol.connection_made(tls)
        except ssl.SSLError as e:  # (cancelled by stop(), start_tls closes the connection itself)
            if isinstance(e, ssl.SSLEOFError | ssl.SSLZeroReturnError):
                log.debug("Connection with /%s (channelId=%s) disconnected during the TLS handshake",
                          host, connection_id)
            else:
                log.info("Failed authentication with /%s (channelId=%s) (SSL handshake failed)",
                         host, connection_id)
                log.debug("TLS handshake of %s: %s", connection_id, e)
        except (OSError, EOFError, TimeoutError) as e:
            log.debug("Connection with /%s (channelId=%s) disconnected during the TLS handshake: %s",
                      host, connection_id, e)

    async def stop(self, grace_s: float = 5.0) -> None:
        """Stop accepting; let requests in flight finish (up to ``grace_s``); close every connection."""
        self._stopping = True
        if self._server is not None:
            self._server.close()
        for handshake in list(self._handshakes):
            handshake.cancel()
        busy = [t for t in self._busy if not t.done()]
        if busy:
            await asyncio.wait(busy, timeout=grace_s)
        for task, writer in list(self._connections.items()):
            writer.close()
            task.cancel()
        if self._connections:
            await asyncio.wait(list(self._connections), timeout=grace_s)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), grace_s)

    async def _serve_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                                connection_id: str | None = None) -> None:
        task = asyncio.current_task()
        assert task is not None
        peer = writer.get_extra_info("peername") or ("?", 0)
        client = (java_host_address(str(peer[0])), int(peer[1]))
        if connection_id is None:  # a TLS connection's was given when its handshake began
            connection_id = f"{client[0]}:{client[1]}-{next(self._ids)}"
        if self._stopping:
            writer.close()
            return
        self._connections[task] = writer  # from now on stop() closes it, waiting for a slot or not
        try:
            await self._quotas.inc(self._listener_name, client[0], self._idle_s)
        except (TooManyConnectionsError, TimeoutError, asyncio.CancelledError) as e:
            if isinstance(e, TooManyConnectionsError):
                log.info("Closing connection %s: %s", connection_id, e)
            elif isinstance(e, TimeoutError):
                log.info("Closing connection %s: no free slot under max.connections %s", connection_id,
                         str(e) or "within connections.max.idle.ms")
            self._connections.pop(task, None)
            writer.close()
            return
        try:
            await self._serve_counted(reader, writer, client, connection_id, task)
        finally:
            self._quotas.dec(self._listener_name, client[0])

    async def _serve_counted(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                             client: tuple[str, int], connection_id: str, task: asyncio.Task[None]) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        writer.transport.set_write_buffer_limits(high=WRITE_BUFFER_HIGH)
        try:
            await self._process(reader, writer, client, connection_id, task)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away
        except InvalidRequestError as e:
            log.warning("Closing connection %s: %s", connection_id, e)
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("Closing connection %s after an unexpected error", connection_id)
        finally:
            self._connections.pop(task, None)
            self._busy.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.wait_closed(), 1.0)

    async def _process(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        client: tuple[str, int],
        connection_id: str,
        task: asyncio.Task[None],
    ) -> None:
        idle = self._idle_s
        auth = self._authenticator() if self._authenticator is not None else None
        principal, mapping_error = ANONYMOUS, None
        ssl_object = writer.get_extra_info("ssl_object")
        if auth is None and ssl_object is not None:  # SASL_SSL's principal is SASL's
            try:
                principal = ssl_principal(ssl_object.getpeercert(binary_form=True), self._principal_mapper)
            except SslPrincipalMappingError as e:
                mapping_error = e  # Kafka builds the principal at the first request, and fails it
        while not self._stopping:
            try:
                async with asyncio.timeout(idle):  # no task per read, unlike wait_for
                    prefix = await reader.readexactly(SIZE_PREFIX)
            except TimeoutError:
                log.info(
                    "Closing connection %s: idle for more than %s ms (connections.max.idle.ms)",
                    connection_id,
                    int((idle or 0) * 1000),
                )
                return
            except asyncio.IncompleteReadError as e:
                if e.partial:
                    raise InvalidRequestError(f"Truncated size prefix ({len(e.partial)} bytes)") from None
                return  # clean close between requests
            authenticating = auth is not None and not auth.complete
            # Before authentication a request is bounded by sasl.server.max.receive.size, as in Kafka.
            limit = self._max_request_bytes
            if authenticating:
                limit = min(limit, MAX_RECEIVE_SIZE)
            size = check_frame_size(prefix, limit)
            try:
                async with asyncio.timeout(idle):
                    frame = await reader.readexactly(size)
            except asyncio.IncompleteReadError as e:
                raise InvalidRequestError(f"Truncated request: {len(e.partial)} of {size} bytes") from None
            except TimeoutError:
                raise InvalidRequestError(
                    f"Request body of {size} bytes not received within the idle time"
                ) from None
            if mapping_error is not None:
                log.error("Closing socket for %s because of error: %s", connection_id, mapping_error)
                return
            self._busy.add(task)
            try:
                if auth is not None and authenticating:
                    chunks = await auth.handle(memoryview(frame), client, connection_id, self._listener_name)
                    if auth.complete:
                        principal = auth.principal
                else:
                    chunks = await self._apis.handle(
                        memoryview(frame), client, connection_id, self._listener_name, principal
                    )
                if chunks is not None:
                    await self._send(writer, chunks)
            finally:
                self._busy.discard(task)
            if auth is not None and auth.close_after_response:
                log.info("Closing connection %s: SASL authentication failed", connection_id)
                return

    async def _send(self, writer: asyncio.StreamWriter, chunks: list[Chunk]) -> None:
        regions: list[FileRegion] = []
        try:
            writer.write(size_prefix(chunks_size(chunks)))
            loop = asyncio.get_running_loop()
            for chunk in chunks:
                if writer.transport.is_closing():  # the client went away: writing on only logs
                    raise ConnectionResetError("The client closed the connection during a response")
                if isinstance(chunk, bytes):
                    writer.write(chunk)
                elif isinstance(chunk, FileRegion):
                    regions.append(chunk)
                    # Waits for the transport's buffer to empty first, so the bytes before go out first.
                    file = cast(IO[bytes], chunk)  # it has what sendfile uses of a file
                    sent = await loop.sendfile(writer.transport, file, chunk.position, chunk.size)
                    if sent != chunk.size:  # the size prefix promised more: the stream is unusable
                        raise ConnectionError(f"Sent {sent} of {chunk.size} bytes of {chunk!r}")
                else:
                    raise TypeError(f"Cannot send a chunk of type {type(chunk).__name__}")
            await writer.drain()
        finally:
            for region in regions:
                region.close()
            for chunk in chunks:
                if isinstance(chunk, FileRegion) and chunk not in regions:
                    chunk.close()
