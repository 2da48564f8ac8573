"""``partition.metadata``, Kafka's ``Uuid``, ``meta.properties`` and the clean-shutdown marker."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from kafkalog.errors import InvalidConfigError, KafkaStorageError
from kafkalog.storage.metadata_files import (
    CLEAN_SHUTDOWN_FILE,
    ONE_UUID,
    ZERO_UUID,
    CleanShutdownFile,
    MetaProperties,
    PartitionMetadata,
    PartitionMetadataFile,
    Uuid,
    read_meta_properties,
    write_meta_properties,
)


def test_golden_partition_metadata_reads_and_rewrites_identically(
    kafka_golden_dir: Path, tmp_path: Path
) -> None:
    golden = kafka_golden_dir / "s6_partition.metadata"
    metadata = PartitionMetadataFile(golden).read()
    assert metadata == PartitionMetadata(0, ONE_UUID)
    assert str(metadata.topic_id) == "AAAAAAAAAAAAAAAAAAAAAQ"
    out = tmp_path / "partition.metadata"
    PartitionMetadataFile(out).write(metadata.topic_id)
    assert out.read_bytes() == golden.read_bytes()
    assert not out.read_bytes().endswith(b"\n")


def test_uuid_string_form_is_unpadded_base64url() -> None:
    uid = Uuid(bytes.fromhex("fbffffffffffffff0000000000000001"))
    assert str(uid).startswith("-___") and len(str(uid)) == 22  # url-safe alphabet, no '=' padding
    assert str(Uuid(bytes(range(16)))) == "AAECAwQFBgcICQoLDA0ODw"
    assert Uuid.from_string("AAECAwQFBgcICQoLDA0ODw") == Uuid(bytes(range(16)))
    assert Uuid.from_string("AAECAwQFBgcICQoLDA0ODw==") == Uuid(bytes(range(16)))  # padding optional
    assert str(Uuid(b"\xff" * 16)) == "_____________________w"
    assert Uuid.from_bits(0, 1) == ONE_UUID
    assert Uuid.from_bits(-1, -1) == Uuid(b"\xff" * 16)
    assert Uuid(b"\xff" * 16).most_significant_bits == -1
    assert ONE_UUID.least_significant_bits == 1


@pytest.mark.parametrize(
    "text",
    [
        "",
        "AAECAwQFBgcICQoLDA0ODwAA",  # 18 bytes
        "AAECAwQFBgcICQoLDA0O",  # 15 bytes
        "AAECAwQFBgcICQoLDA0OD+",  # standard alphabet, not url-safe
        "AAECAwQFBgcICQoLDA0OD/",
        "AAECAwQFBgcICQoLDA0ODw===",
        "A" * 25,
        "AAECAwQFBgcICQoLDA0OD",  # a dangling 6-bit unit
    ],
)
def test_bad_uuid_strings_are_rejected(text: str) -> None:
    with pytest.raises(InvalidConfigError):
        Uuid.from_string(text)


def test_uuid_needs_16_bytes() -> None:
    with pytest.raises(InvalidConfigError, match="16 bytes"):
        Uuid(b"short")


def test_random_uuid_follows_kafka_rules() -> None:
    seen = set()
    for _ in range(300):
        uid = Uuid.random()
        text = str(uid)
        assert len(text) == 22 and not text.startswith("-")
        assert uid not in (ZERO_UUID, ONE_UUID)
        assert uid.bytes[6] >> 4 == 4  # version-4 UUID, as java.util.UUID.randomUUID makes
        assert Uuid.from_string(text) == uid
        seen.add(uid)
    assert len(seen) == 300


def test_partition_metadata_file_write_read_exists_delete(tmp_path: Path) -> None:
    path = tmp_path / "partition.metadata"
    file = PartitionMetadataFile(path)
    assert not file.exists()
    with pytest.raises(KafkaStorageError, match="partition metadata file"):
        file.read()
    uid = Uuid(bytes(range(16)))
    file.write(uid)
    assert path.read_bytes() == b"version: 0\ntopic_id: AAECAwQFBgcICQoLDA0ODw"
    assert file.exists()
    assert file.read() == PartitionMetadata(0, uid)
    assert not (tmp_path / "partition.metadata.tmp").exists()
    file.delete()
    assert not file.exists()


@pytest.mark.parametrize(
    ("content", "expected_version"),
    [
        ("version: 0\ntopic_id: AAECAwQFBgcICQoLDA0ODw\n", 0),  # a trailing newline is fine
        ("version:  0\r\ntopic_id:\tAAECAwQFBgcICQoLDA0ODw", 0),
        ("version: 3\ntopic_id: AAECAwQFBgcICQoLDA0ODw", 3),  # newer versions are read (downgrade)
    ],
)
def test_partition_metadata_lenient_forms(tmp_path: Path, content: str, expected_version: int) -> None:
    path = tmp_path / "partition.metadata"
    path.write_text(content)
    assert PartitionMetadataFile(path).read() == PartitionMetadata(expected_version, Uuid(bytes(range(16))))


@pytest.mark.parametrize(
    ("content", "pattern"),
    [
        ("", r"Malformed line 1"),
        ("version 0\ntopic_id: AAECAwQFBgcICQoLDA0ODw", r"Malformed line 1"),
        ("version: x\ntopic_id: AAECAwQFBgcICQoLDA0ODw", r"Malformed line 1"),
        ("version: -1\ntopic_id: AAECAwQFBgcICQoLDA0ODw", r"Unrecognized version"),
        ("version: 0\n", r"Malformed line 2"),
        ("version: 0\ntopic_id: nope", r"Malformed line 2"),
        ("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA", r"Invalid topic ID"),
    ],
)
def test_partition_metadata_errors(tmp_path: Path, content: str, pattern: str) -> None:
    path = tmp_path / "partition.metadata"
    path.write_text(content)
    with pytest.raises(KafkaStorageError, match=pattern) as info:
        PartitionMetadataFile(path).read()
    assert str(path) in str(info.value)


DATE = datetime(2024, 10, 25, 3, 33, 1, tzinfo=UTC)


def test_meta_properties_written_as_kafka_does(tmp_path: Path) -> None:
    path = tmp_path / "meta.properties"
    directory_id = Uuid(bytes(range(16)))
    meta = MetaProperties(
        version=1, cluster_id="J8qXRwI-Qyi2G0guFTiuYw", node_id=1, directory_id=directory_id
    )
    write_meta_properties(path, meta, date=DATE)
    assert path.read_text() == (
        "#\n"
        "#Fri Oct 25 03:33:01 UTC 2024\n"
        "cluster.id=J8qXRwI-Qyi2G0guFTiuYw\n"
        "directory.id=AAECAwQFBgcICQoLDA0ODw\n"
        "node.id=1\n"
        "version=1\n"
    )
    assert read_meta_properties(path) == meta
    assert not (tmp_path / "meta.properties.tmp").exists()


def test_meta_properties_as_a_jdk17_kafka_broker_writes_it(tmp_path: Path) -> None:
    # Hash-ordered entries, as Properties.store wrote them before JDK 18.
    path = tmp_path / "meta.properties"
    path.write_text(
        "#\n#Tue Mar 12 10:20:31 UTC 2024\nnode.id=3\ndirectory.id=AAECAwQFBgcICQoLDA0ODw\n"
        "version=1\ncluster.id=MkU3OEVBNTcwNTJENDM2Qk\n"
    )
    expected = MetaProperties(1, "MkU3OEVBNTcwNTJENDM2Qk", 3, Uuid(bytes(range(16))))
    assert read_meta_properties(path) == expected


def test_meta_properties_v0_uses_broker_id(tmp_path: Path) -> None:
    path = tmp_path / "meta.properties"
    path.write_text("#\n#Mon Jan 01 00:00:00 UTC 2024\nversion=0\nbroker.id=5\ncluster.id=abc\n")
    assert read_meta_properties(path) == MetaProperties(0, "abc", 5, None)
    path.write_text("cluster.id=abc\n")  # no version: v0, everything optional
    assert read_meta_properties(path) == MetaProperties(0, "abc", None, None)
    write_meta_properties(path, MetaProperties(0, None, 7), date=DATE)
    assert path.read_text().splitlines()[2:] == ["broker.id=7", "version=0"]


@pytest.mark.parametrize(
    ("content", "pattern"),
    [
        ("version=1\ncluster.id=c\n", "node.id was not found"),
        ("version=1\nnode.id=1\n", "cluster.id was not found"),
        ("version=2\n", "unknown version number 2"),
        ("version=one\n", "invalid version string"),
        ("version=1\ncluster.id=c\nnode.id=x\n", "node.id"),
        ("version=1\ncluster.id=c\nnode.id=1\ndirectory.id=zz\n", "directory.id"),
    ],
)
def test_meta_properties_errors(tmp_path: Path, content: str, pattern: str) -> None:
    path = tmp_path / "meta.properties"
    path.write_text(content)
    with pytest.raises(KafkaStorageError, match=pattern) as info:
        read_meta_properties(path)
    assert str(path) in str(info.value)


def test_meta_properties_value_rules() -> None:
    with pytest.raises(InvalidConfigError, match=r"cluster\.id"):
        MetaProperties(1, None, 1)
    with pytest.raises(InvalidConfigError, match="version"):
        MetaProperties(3, "c", 1)
    with pytest.raises(InvalidConfigError, match="node id"):
        MetaProperties(1, "c", 2**31)


def test_missing_meta_properties_is_a_storage_error(tmp_path: Path) -> None:
    with pytest.raises(KafkaStorageError, match=r"meta\.properties"):
        read_meta_properties(tmp_path / "meta.properties")


def test_clean_shutdown_marker(tmp_path: Path) -> None:
    marker = CleanShutdownFile(tmp_path)
    assert marker.path == tmp_path / CLEAN_SHUTDOWN_FILE
    assert not marker.exists()
    assert marker.read() is None
    marker.write()
    assert marker.path.read_bytes() == b'{"version":0,"brokerEpoch":-1}'
    assert marker.exists() and marker.read() == -1
    marker.write(42)
    assert marker.path.read_bytes() == b'{"version":0,"brokerEpoch":42}'
    assert marker.read() == 42
    marker.delete()
    assert not marker.exists()
    marker.delete()  # deleting twice is fine


@pytest.mark.parametrize(
    "content", [b"", b"garbage", b'{"version":0}', b'{"version":0,"brokerEpoch":null}', b"[1]"]
)
def test_unreadable_clean_shutdown_marker_reads_as_no_epoch(tmp_path: Path, content: bytes) -> None:
    (tmp_path / CLEAN_SHUTDOWN_FILE).write_bytes(content)
    marker = CleanShutdownFile(tmp_path)
    assert marker.exists()
    assert marker.read() is None


def test_clean_shutdown_marker_tolerates_unknown_fields(tmp_path: Path) -> None:
    (tmp_path / CLEAN_SHUTDOWN_FILE).write_text('{"brokerEpoch": 9, "version": 0, "extra": true}')
    assert CleanShutdownFile(tmp_path).read() == 9
