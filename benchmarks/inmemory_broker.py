"""A minimal Kafka-wire responder for the broker benchmark's reference: the protocol floor on this
machine. asyncio, one node, no storage, no validation: it answers ApiVersions, Metadata, ListOffsets
and FindCoordinator, takes Produce (keeping the batches in memory with their base offsets patched,
nothing else checked) and serves Fetch from that memory. Requests are decoded with the same codec the
broker uses (kio's reader; kafkalog's Produce decoder and Fetch framing), so broker/floor is the cost
of everything the broker does beyond speaking the protocol.

Run: ``python benchmarks/inmemory_broker.py --port 0`` prints ``listening on 127.0.0.1:PORT`` and
serves until SIGTERM / SIGINT.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import re
import signal
import struct
import uuid
from datetime import timedelta
from typing import Any

from kio.schema.errors import ErrorCode

from kafkalog.protocol.codec import decode_request, encode_response, response_type
from kafkalog.protocol.fetch_response import FetchPartitionResult, FetchTopicResult, encode_fetch_response
from kafkalog.protocol.headers import encode_response_header, parse_request_header
from kafkalog.protocol.produce_request import decode_produce_request

_SIZE = struct.Struct(">i")
_BASE_OFFSET = struct.Struct(">q")
_RECORDS_COUNT_AT = 57  # int32 record count in a v2 batch header
ZERO = timedelta(0)
NODE = 1
MAX_FRAME = 100 * 1024 * 1024
# (key, min, max): the versions served; the clients pick the same ones they pick against kafkalog.
VERSIONS = {18: (0, 4), 3: (0, 12), 0: (3, 12), 1: (4, 16), 2: (1, 7), 10: (0, 4)}
DEFAULT_PARTITIONS = 1


class Partition:
    """Batches kept in memory: ``bases[i]`` is the base offset of ``batches[i]``."""

    __slots__ = ("bases", "batches", "end")

    def __init__(self) -> None:
        self.bases: list[int] = []
        self.batches: list[bytes] = []
        self.end = 0

    def append(self, records: memoryview) -> int:
        base = self.end
        batch = bytearray(records)
        _BASE_OFFSET.pack_into(batch, 0, base)
        (count,) = _SIZE.unpack_from(batch, _RECORDS_COUNT_AT)
        self.bases.append(base)
        self.batches.append(bytes(batch))
        self.end += count
        return base

    def read(self, offset: int, max_bytes: int) -> bytes:
        if offset >= self.end:
            return b""
        i = max(0, bisect.bisect_right(self.bases, offset) - 1)
        out = []
        size = 0
        while i < len(self.batches) and (not out or size + len(self.batches[i]) <= max_bytes):
            out.append(self.batches[i])
            size += len(self.batches[i])
            i += 1
        return b"".join(out)


class InMemoryBroker:
    def __init__(self, partitions: int) -> None:
        self.default_partitions = partitions
        self.topics: dict[str, list[Partition]] = {}
        self.ids: dict[str, uuid.UUID] = {}
        self.names: dict[uuid.UUID, str] = {}
        self.port = 0
        self.host = "127.0.0.1"
        self.waiters: list[asyncio.Future[None]] = []

    def topic(self, name: str) -> list[Partition]:
        found = self.topics.get(name)
        if found is None:
            # A topic named ``...-pN`` has N partitions (the benchmark creates them that way on kafkalog).
            suffix = re.search(r"-p(\d+)$", name)
            count = int(suffix.group(1)) if suffix else self.default_partitions
            found = self.topics[name] = [Partition() for _ in range(count)]
            self.ids[name] = uuid.uuid4()
            self.names[self.ids[name]] = name
        return found

    # --- handlers: each returns the response body chunks --------------------------------------

    def api_versions(self, version: int, body: Any) -> list[Any]:
        cls = response_type(18, version)
        mod = __import__(cls.__module__, fromlist=["x"])
        keys = tuple(
            mod.ApiVersion(api_key=k, min_version=lo, max_version=hi) for k, (lo, hi) in VERSIONS.items()
        )
        fields = cls.__dataclass_fields__
        values = {"error_code": ErrorCode.none, "api_keys": keys, "throttle_time": ZERO}
        return [encode_response(cls(**{k: v for k, v in values.items() if k in fields}))]

    def metadata(self, version: int, body: Any) -> list[Any]:
        cls = response_type(3, version)
        mod = __import__(cls.__module__, fromlist=["x"])
        names = list(self.topics) if body.topics is None else [t.name for t in body.topics]
        topics = []
        for name in names:
            partitions = self.topic(name)

            def build(t: type[Any], **values: Any) -> Any:
                return t(**{k: v for k, v in values.items() if k in t.__dataclass_fields__})

            topics.append(
                build(
                    mod.MetadataResponseTopic,
                    error_code=ErrorCode.none,
                    name=name,
                    topic_id=self.ids[name],
                    is_internal=False,
                    topic_authorized_operations=-(2**31),
                    partitions=tuple(
                        build(
                            mod.MetadataResponsePartition,
                            error_code=ErrorCode.none,
                            partition_index=i,
                            leader_id=NODE,
                            leader_epoch=0,
                            replica_nodes=(NODE,),
                            isr_nodes=(NODE,),
                            offline_replicas=(),
                        )
                        for i in range(len(partitions))
                    ),
                )
            )
        broker = mod.MetadataResponseBroker
        values = {
            "throttle_time": ZERO,
            "brokers": (
                broker(
                    **{
                        k: v
                        for k, v in {
                            "node_id": NODE,
                            "host": self.host,
                            "port": self.port,
                            "rack": None,
                        }.items()
                        if k in broker.__dataclass_fields__
                    }
                ),
            ),
            "cluster_id": "inmemory",
            "controller_id": NODE,
            "topics": tuple(topics),
            "cluster_authorized_operations": -(2**31),
        }
        return [encode_response(cls(**{k: v for k, v in values.items() if k in cls.__dataclass_fields__}))]

    def list_offsets(self, version: int, body: Any) -> list[Any]:
        cls = response_type(2, version)
        mod = __import__(cls.__module__, fromlist=["x"])
        topics = []
        for t in body.topics:
            partitions = self.topic(t.name)
            parts = []
            for p in t.partitions:
                offset = 0 if p.timestamp == -2 else partitions[p.partition_index].end
                values = {
                    "partition_index": p.partition_index,
                    "error_code": ErrorCode.none,
                    "timestamp": -1,
                    "offset": offset,
                    "leader_epoch": 0,
                }
                fields = mod.ListOffsetsPartitionResponse.__dataclass_fields__
                parts.append(
                    mod.ListOffsetsPartitionResponse(**{k: v for k, v in values.items() if k in fields})
                )
            topics.append(mod.ListOffsetsTopicResponse(name=t.name, partitions=tuple(parts)))
        values = {"throttle_time": ZERO, "topics": tuple(topics)}
        return [encode_response(cls(**{k: v for k, v in values.items() if k in cls.__dataclass_fields__}))]

    def find_coordinator(self, version: int, body: Any) -> list[Any]:
        cls = response_type(10, version)
        mod = __import__(cls.__module__, fromlist=["x"])
        common = {
            "error_code": ErrorCode.none,
            "error_message": None,
            "node_id": NODE,
            "host": self.host,
            "port": self.port,
        }
        if version >= 4:
            keys = tuple(mod.Coordinator(key=k, **common) for k in body.coordinator_keys)
            return [encode_response(cls(throttle_time=ZERO, coordinators=keys))]
        values = {"throttle_time": ZERO, **common}
        return [encode_response(cls(**{k: v for k, v in values.items() if k in cls.__dataclass_fields__}))]

    def produce(self, version: int, frame: memoryview, offset: int) -> list[Any] | None:
        request = decode_produce_request(frame, offset, version)
        cls = response_type(0, version)
        mod = __import__(cls.__module__, fromlist=["x"])
        topics = []
        for t in request.topics:
            name = t.name if t.name is not None else self.names[t.topic_id]
            partitions = self.topic(name)
            parts = []
            for p in t.partitions:
                base = partitions[p.partition_index].append(p.records) if p.records is not None else -1
                values = {
                    "index": p.partition_index,
                    "error_code": ErrorCode.none,
                    "base_offset": base,
                    "log_append_time": None,
                    "log_start_offset": 0,
                    "record_errors": (),
                    "error_message": None,
                }
                fields = mod.PartitionProduceResponse.__dataclass_fields__
                parts.append(mod.PartitionProduceResponse(**{k: v for k, v in values.items() if k in fields}))
            values = {"name": name, "topic_id": t.topic_id, "partition_responses": tuple(parts)}
            fields = mod.TopicProduceResponse.__dataclass_fields__
            topics.append(mod.TopicProduceResponse(**{k: v for k, v in values.items() if k in fields}))
        for waiter in self.waiters:
            if not waiter.done():
                waiter.set_result(None)
        self.waiters.clear()
        if request.acks == 0:
            return None
        values = {"responses": tuple(topics), "throttle_time": ZERO}
        return [encode_response(cls(**{k: v for k, v in values.items() if k in cls.__dataclass_fields__}))]

    async def fetch(self, version: int, body: Any) -> list[Any]:
        deadline = asyncio.get_running_loop().time() + body.max_wait.total_seconds()
        while True:
            topics = []
            total = 0
            for t in body.topics:
                name = self.names[t.topic_id] if version >= 13 else t.topic
                partitions = self.topic(name)
                parts = []
                for p in t.partitions:
                    partition = partitions[p.partition]
                    data = partition.read(p.fetch_offset, p.partition_max_bytes)
                    total += len(data)
                    parts.append(
                        FetchPartitionResult(p.partition, 0, partition.end, partition.end, 0, None, data)
                    )
                topics.append(FetchTopicResult(name, self.ids[name], parts))
            remaining = deadline - asyncio.get_running_loop().time()
            if total >= body.min_bytes or remaining <= 0:
                return encode_fetch_response(version, topics)
            waiter = asyncio.get_running_loop().create_future()
            self.waiters.append(waiter)
            try:
                await asyncio.wait_for(waiter, remaining)
            except TimeoutError:
                pass

    # --- connections ---------------------------------------------------------------------------

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                (size,) = _SIZE.unpack(await reader.readexactly(4))
                if not 0 < size <= MAX_FRAME:
                    return
                frame = memoryview(await reader.readexactly(size))
                header, offset = parse_request_header(frame)
                key, version = header.api_key, header.api_version
                if key == 0:
                    body_chunks = self.produce(version, frame, offset)
                    if body_chunks is None:
                        continue
                elif key not in VERSIONS:
                    return
                else:
                    body = decode_request(key, version, frame, offset)
                    if key == 1:
                        body_chunks = await self.fetch(version, body)
                    else:
                        handler = {
                            18: self.api_versions,
                            3: self.metadata,
                            2: self.list_offsets,
                            10: self.find_coordinator,
                        }[key]
                        body_chunks = handler(version, body)
                head = encode_response_header(key, version if key != 18 else 0, header.correlation_id)
                size = len(head) + sum(len(c) for c in body_chunks)
                writer.write(_SIZE.pack(size) + head)
                for chunk in body_chunks:
                    writer.write(chunk)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the client went away
        finally:
            writer.close()


async def main(host: str, port: int, partitions: int) -> None:
    broker = InMemoryBroker(partitions)
    server = await asyncio.start_server(broker.serve, host, port)
    broker.host, broker.port = host, server.sockets[0].getsockname()[1]
    print(f"listening on {host}:{broker.port}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with server:
        await stop.wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument(
        "--partitions", type=int, default=DEFAULT_PARTITIONS, help="partitions of a new topic"
    )
    args = parser.parse_args()
    asyncio.run(main(args.host, args.port, args.partitions))
