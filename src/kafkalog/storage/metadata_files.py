"""The small metadata files of a data directory and a partition, and Kafka's ``Uuid`` they carry.

* ``meta.properties`` (data directory, Kafka's ``MetaProperties``): ``java.util.Properties`` text;
* ``partition.metadata`` (partition, Kafka's ``PartitionMetadataFile``, spec §7.3):
  ``version: 0\\ntopic_id: <base64url uuid>`` with no trailing newline;
* ``.kafka_cleanshutdown`` (data directory, Kafka's ``CleanShutdownFileHandler``, spec §7.5):
  ``{"version":0,"brokerEpoch":N}``.

Readers follow Kafka's parsing rules and report every failure as one ``KafkaStorageError`` that
names the file.
"""

from __future__ import annotations

import base64
import json
import re
import struct
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from kafkalog.errors import InvalidConfigError, KafkaStorageError
from kafkalog.storage._java_text import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    JAVA_WS,
    check_int,
    java_int,
    java_lines,
    read_text,
)
from kafkalog.storage.files import delete_file_if_exists, fsync_directory, write_file, write_file_atomically
from kafkalog.storage.java_properties import read_properties_file, write_properties_file

__all__ = [
    "CLEAN_SHUTDOWN_FILE",
    "METADATA_TOPIC_ID",
    "META_PROPERTIES_FILE",
    "ONE_UUID",
    "PARTITION_METADATA_FILE",
    "ZERO_UUID",
    "CleanShutdownFile",
    "MetaProperties",
    "PartitionMetadata",
    "PartitionMetadataFile",
    "Uuid",
    "read_meta_properties",
    "write_meta_properties",
]

PARTITION_METADATA_FILE = "partition.metadata"
META_PROPERTIES_FILE = "meta.properties"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"

# --- Kafka's Uuid and partition.metadata (§7.3) ----------------------------------------------------

_BASE64URL = re.compile(r"[A-Za-z0-9_-]*={0,2}")


@dataclass(frozen=True, slots=True)
class Uuid:
    """Kafka's ``org.apache.kafka.common.Uuid``: 16 bytes, printed as unpadded base64url (22 chars)."""

    bytes: bytes

    def __post_init__(self) -> None:
        if not isinstance(self.bytes, bytes) or len(self.bytes) != 16:
            raise InvalidConfigError(f"A Uuid needs exactly 16 bytes, got {self.bytes!r}")

    def __str__(self) -> str:
        return base64.urlsafe_b64encode(self.bytes).rstrip(b"=").decode("ascii")

    @property
    def most_significant_bits(self) -> int:
        return int.from_bytes(self.bytes[:8], "big", signed=True)

    @property
    def least_significant_bits(self) -> int:
        return int.from_bytes(self.bytes[8:], "big", signed=True)

    @classmethod
    def from_bits(cls, most_significant_bits: int, least_significant_bits: int) -> Uuid:
        return cls(struct.pack(">qq", most_significant_bits, least_significant_bits))

    @classmethod
    def from_string(cls, text: str) -> Uuid:
        """Kafka's ``Uuid.fromString``: at most 24 chars of base64url (padding optional) -> 16 bytes."""
        if not isinstance(text, str):
            raise InvalidConfigError(f"Uuid string expected, got {text!r}")
        if len(text) > 24:
            raise InvalidConfigError(
                f"Input string with prefix `{text[:24]}` is too long to be decoded as a base64 UUID"
            )
        if not _BASE64URL.fullmatch(text):
            raise InvalidConfigError(f"Input string `{text}` is not base64url")
        padded = text if "=" in text else text + "=" * (-len(text) % 4)
        try:
            raw = base64.b64decode(padded, altchars=b"-_", validate=True)
        except ValueError as e:
            raise InvalidConfigError(f"Input string `{text}` is not valid base64url: {e}") from None
        if len(raw) != 16:
            raise InvalidConfigError(
                f"Input string `{text}` decoded as {len(raw)} bytes, which is not equal to the expected "
                "16 bytes of a base64-encoded UUID"
            )
        return cls(raw)

    @classmethod
    def random(cls) -> Uuid:
        """Kafka's ``Uuid.randomUuid``: a version-4 UUID that is not reserved (all-zero, 1) and whose
        string form does not start with '-' (it would look like a command-line option)."""
        while True:
            candidate = cls(uuid.uuid4().bytes)
            if candidate not in _RESERVED_UUIDS and not str(candidate).startswith("-"):
                return candidate


ZERO_UUID = Uuid(bytes(16))
ONE_UUID = Uuid(bytes(15) + b"\x01")
METADATA_TOPIC_ID = ONE_UUID
_RESERVED_UUIDS = frozenset({ZERO_UUID, ONE_UUID})


@dataclass(frozen=True, slots=True)
class PartitionMetadata:
    """Content of ``partition.metadata``."""

    version: int
    topic_id: Uuid

    def encode(self) -> str:
        return f"version: {self.version}\ntopic_id: {self.topic_id}"


_COLON_WS = re.compile(f":[{JAVA_WS}]+")


def _split_colon(line: str) -> list[str]:
    parts = _COLON_WS.split(line)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


class PartitionMetadataFile:
    """A partition's ``partition.metadata`` (topic id), read and written like Kafka does."""

    CURRENT_VERSION = 0

    def __init__(self, path: Path | str) -> None:
        self._path = Path(path)

    @property
    def path(self) -> Path:
        return self._path

    def exists(self) -> bool:
        return self._path.exists()

    def delete(self) -> None:
        delete_file_if_exists(self._path, "partition metadata file")

    def write(self, topic_id: Uuid) -> None:
        """Write version 0 and ``topic_id`` (tmp + fsync + rename, no trailing newline)."""
        if not isinstance(topic_id, Uuid):
            raise KafkaStorageError(f"Cannot write {topic_id!r} to {self._path}: a Uuid is required")
        text = PartitionMetadata(self.CURRENT_VERSION, topic_id).encode()
        write_file_atomically(self._path, text.encode("utf-8"))

    def read(self) -> PartitionMetadata:
        text = read_text(self._path, "partition metadata file")
        lines = java_lines(text)

        def malformed(line_no: int, reason: str) -> KafkaStorageError:
            line = lines[line_no - 1] if line_no <= len(lines) else "<missing>"
            return KafkaStorageError(
                f"Malformed line {line_no} in partition metadata file {self._path}: {line!r} ({reason})"
            )

        # Like Kafka, only the values after ':' are checked, not the key names.
        version_parts = _split_colon(lines[0]) if lines else []
        if len(version_parts) != 2:
            raise malformed(1, "expected 'version: <n>'")
        version = java_int(version_parts[1], INT32_MIN, INT32_MAX)
        if version is None:
            raise malformed(1, "version is not an int")
        # Newer versions are accepted (downgrade compatibility); only negative ones are unknown.
        if version < self.CURRENT_VERSION:
            raise KafkaStorageError(
                f"Unrecognized version of partition metadata file {self._path}: {version}"
            )
        id_parts = _split_colon(lines[1]) if len(lines) > 1 else []
        if len(id_parts) != 2:
            raise malformed(2, "expected 'topic_id: <uuid>'")
        try:
            topic_id = Uuid.from_string(id_parts[1])
        except InvalidConfigError as e:
            raise malformed(2, str(e)) from None
        if topic_id == ZERO_UUID:
            raise KafkaStorageError(f"Invalid topic ID in partition metadata file ({self._path})")
        return PartitionMetadata(version, topic_id)


# --- meta.properties ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MetaProperties:
    """``meta.properties`` of a data directory (Kafka's ``MetaProperties``).

    Version 0 (ZooKeeper era) stores the node id as ``broker.id`` and makes every field optional;
    version 1 (KRaft) requires ``cluster.id`` and ``node.id``.
    """

    version: int = 1
    cluster_id: str | None = None
    node_id: int | None = None
    directory_id: Uuid | None = None

    def __post_init__(self) -> None:
        if self.version not in (0, 1):
            raise InvalidConfigError(f"Unknown meta.properties version number {self.version!r}")
        if self.node_id is not None and (
            isinstance(self.node_id, bool) or not isinstance(self.node_id, int)
            or not INT32_MIN <= self.node_id <= INT32_MAX
        ):
            raise InvalidConfigError(f"meta.properties node id must be a 32-bit int, got {self.node_id!r}")
        if self.version == 1:
            if self.cluster_id is None:
                raise InvalidConfigError("cluster.id was not found (required by meta.properties version 1)")
            if self.node_id is None:
                raise InvalidConfigError("node.id was not found (required by meta.properties version 1)")

    def to_properties(self) -> dict[str, str]:
        props = {"version": str(self.version)}
        if self.cluster_id is not None:
            props["cluster.id"] = self.cluster_id
        if self.node_id is not None:
            props["broker.id" if self.version == 0 else "node.id"] = str(self.node_id)
        if self.directory_id is not None:
            props["directory.id"] = str(self.directory_id)
        return props

    @classmethod
    def from_properties(cls, props: Mapping[str, str], where: str = "meta.properties") -> MetaProperties:
        def fail(reason: str) -> KafkaStorageError:
            return KafkaStorageError(f"Invalid {where}: {reason}")

        version_text = props.get("version", "0").strip()
        version = java_int(version_text, INT32_MIN, INT32_MAX)
        if version is None:
            raise fail(f"invalid version string {props.get('version')!r}")
        if version not in (0, 1):
            raise fail(f"unknown version number {version}")
        id_key = "broker.id" if version == 0 else "node.id"
        node_id = None
        if id_key in props:
            node_id = java_int(props[id_key], INT32_MIN, INT32_MAX)
            if node_id is None:
                raise fail(f"unable to read {id_key} {props[id_key]!r} as a base-10 number")
        elif version == 1:
            raise fail("node.id was not found")
        directory_id = None
        if "directory.id" in props:
            try:
                directory_id = Uuid.from_string(props["directory.id"])
            except InvalidConfigError as e:
                raise fail(f"unable to read directory.id as a Uuid: {e}") from None
        try:
            return cls(version, props.get("cluster.id"), node_id, directory_id)
        except InvalidConfigError as e:
            raise fail(str(e)) from None


def read_meta_properties(path: Path | str) -> MetaProperties:
    """Read a ``meta.properties`` file (give the file's path)."""
    path = Path(path)
    return MetaProperties.from_properties(read_properties_file(path), str(path))


def write_meta_properties(path: Path | str, meta: MetaProperties, *, date: datetime | None = None) -> None:
    """Write ``meta.properties`` as Kafka does (``#``, ``#<date>``, then the entries)."""
    write_properties_file(path, meta.to_properties(), date=date)

# --- .kafka_cleanshutdown (§7.5) ---------------------------------------------------------------------


class CleanShutdownFile:
    """The clean-shutdown marker of a data directory (Kafka's ``CleanShutdownFileHandler``)."""

    CURRENT_VERSION = 0

    def __init__(self, data_dir: Path | str) -> None:
        self._path = Path(data_dir) / CLEAN_SHUTDOWN_FILE

    @property
    def path(self) -> Path:
        return self._path

    def write(self, broker_epoch: int = -1) -> None:
        """Write ``{"version":0,"brokerEpoch":N}`` and fsync it (-1 = no broker epoch, as without KRaft)."""
        check_int(broker_epoch, INT64_MIN, INT64_MAX, "broker epoch", self._path)
        data = f'{{"version":{self.CURRENT_VERSION},"brokerEpoch":{broker_epoch}}}'.encode("ascii")
        try:
            write_file(self._path, data)
            fsync_directory(self._path.parent)
        except OSError as e:
            raise KafkaStorageError(f"Error while writing clean shutdown file {self._path}: {e}") from e

    def read(self) -> int | None:
        """The broker epoch recorded in the marker, or None when it is absent or unreadable (Kafka
        treats every read failure as "no epoch")."""
        try:
            content = json.loads(self._path.read_text("utf-8"))
        except (OSError, ValueError):
            return None
        epoch = content.get("brokerEpoch") if isinstance(content, dict) else None
        if isinstance(epoch, bool) or not isinstance(epoch, int) or not INT64_MIN <= epoch <= INT64_MAX:
            return None
        return epoch

    def exists(self) -> bool:
        return self._path.exists()

    def delete(self) -> None:
        delete_file_if_exists(self._path, "clean shutdown file")

