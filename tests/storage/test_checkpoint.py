"""Kafka's side files: golden files written by Kafka, byte-exact rewrites, and Kafka's error cases."""

from __future__ import annotations

import struct
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import crc32c
import pytest

from kafkalog.errors import CorruptSnapshotError, InvalidConfigError, InvalidTopicError, KafkaStorageError
from kafkalog.storage.checkpoint import (
    CLEAN_SHUTDOWN_FILE,
    ONE_UUID,
    ZERO_UUID,
    CleanShutdownFile,
    EpochEntry,
    LeaderEpochCheckpointFile,
    MetaProperties,
    OffsetCheckpointFile,
    PartitionDirKind,
    PartitionDirName,
    PartitionMetadata,
    PartitionMetadataFile,
    ProducerSnapshot,
    ProducerSnapshotEntry,
    Uuid,
    is_valid_topic_name,
    load_properties,
    log_delete_dir_name,
    log_future_dir_name,
    log_stray_dir_name,
    parse_partition_dir_name,
    parse_topic_partition,
    read_meta_properties,
    store_properties,
    topic_partition_dir_name,
    validate_topic_name,
    write_meta_properties,
)

T0 = 1700000000000

# --- golden files written by Kafka -----------------------------------------------------------------


def test_golden_recovery_point_checkpoint_reads_and_rewrites_identically(
    kafka_golden_dir: Path, tmp_path: Path
) -> None:
    golden = kafka_golden_dir / "s6_recovery-point-offset-checkpoint"
    offsets = OffsetCheckpointFile(golden).read()
    assert offsets == {("orders", 0): 108, ("my-topic", 3): 0}
    assert list(offsets) == [("orders", 0), ("my-topic", 3)]  # file order kept
    out = tmp_path / "recovery-point-offset-checkpoint"
    OffsetCheckpointFile(out).write(offsets)
    assert out.read_bytes() == golden.read_bytes()


def test_golden_leader_epoch_checkpoint_reads_and_rewrites_identically(
    kafka_golden_dir: Path, tmp_path: Path
) -> None:
    golden = kafka_golden_dir / "s6_leader-epoch-checkpoint"
    entries = LeaderEpochCheckpointFile(golden).read()
    assert entries == [EpochEntry(0, 0), EpochEntry(3, 100), EpochEntry(5, 108)]
    out = tmp_path / "leader-epoch-checkpoint"
    LeaderEpochCheckpointFile(out).write(entries)
    assert out.read_bytes() == golden.read_bytes()


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


def test_golden_producer_snapshot_reads_and_rewrites_identically(
    kafka_golden_dir: Path, tmp_path: Path
) -> None:
    golden = kafka_golden_dir / "s6_00000000000000000108.snapshot"
    snapshot = ProducerSnapshot.read(golden)
    assert snapshot.entries == (
        ProducerSnapshotEntry(77, 0, 4, 114, 4, T0 + 60, -1, 110),
        ProducerSnapshotEntry(4242, 7, 1, 106, 1, T0 + 40, 11, -1),
    )
    assert snapshot.to_bytes() == golden.read_bytes()
    out = tmp_path / "00000000000000000108.snapshot"
    snapshot.write(out)
    assert out.read_bytes() == golden.read_bytes()


# --- offset checkpoint files -----------------------------------------------------------------------


def test_missing_and_empty_checkpoints_read_as_no_entries(tmp_path: Path) -> None:
    path = tmp_path / "replication-offset-checkpoint"
    checkpoint = OffsetCheckpointFile(path)
    assert checkpoint.read() == {}
    assert not path.exists()  # reading never creates files (read-only openers rely on it)
    path.write_bytes(b"")
    assert checkpoint.read() == {}
    path.write_bytes(b"0\n")
    assert checkpoint.read() == {}


def test_offset_checkpoint_write_format_and_no_tmp_left(tmp_path: Path) -> None:
    path = tmp_path / "log-start-offset-checkpoint"
    OffsetCheckpointFile(path).write({("b", 1): 5, ("a.x-y_z", 0): -1, ("a", 2147483647): 2**63 - 1})
    assert path.read_bytes() == b"0\n3\nb 1 5\na.x-y_z 0 -1\na 2147483647 9223372036854775807\n"
    assert [p.name for p in tmp_path.iterdir()] == [path.name]
    OffsetCheckpointFile(path).write({})
    assert path.read_bytes() == b"0\n0\n"
    assert OffsetCheckpointFile(path).read() == {}


def test_offset_checkpoint_accepts_any_whitespace_and_line_ends(tmp_path: Path) -> None:
    path = tmp_path / "cp"
    path.write_bytes(b"0\r\n3\r\norders\t0   7  \r\nx 1 8\ry\x0b2\x0c9")
    assert OffsetCheckpointFile(path).read() == {("orders", 0): 7, ("x", 1): 8, ("y", 2): 9}


def test_offset_checkpoint_repeated_partition_last_line_wins(tmp_path: Path) -> None:
    path = tmp_path / "cp"
    path.write_text("0\n2\nt 0 1\nt 0 9\n")
    assert OffsetCheckpointFile(path).read() == {("t", 0): 9}


@pytest.mark.parametrize(
    ("content", "pattern"),
    [
        ("1\n0\n", r"Unrecognised version 1 \(expected 0\)"),
        ("zero\n0\n", r"Malformed line 1 .*'zero'"),
        (" 0\n0\n", r"Malformed line 1"),
        ("0\n2\nt 0 1\n", r"Expected \[2\] entries .* found only \[1\]"),
        ("0\n1\nt 0 1\nu 1 2\n", r"Expected \[1\] entries .* found only \[2\]"),
        ("0\nmany\nt 0 1\n", r"Malformed line 2 .*'many'"),
        ("0\n-1\n", r"Malformed line 2"),
        ("0\n2\nt 0 1\nt 0\n", r"Malformed line 4 .*'t 0'"),
        ("0\n1\nt 0 1 2\n", r"Malformed line 3"),
        ("0\n1\n t 0 1\n", r"Malformed line 3"),  # Java's split gives a leading empty field
        ("0\n1\nt x 1\n", r"Malformed line 3 .*'t x 1'"),
        ("0\n1\nt 0 1.5\n", r"Malformed line 3"),
        ("0\n1\nt 2147483648 1\n", r"Malformed line 3"),
        ("0\n1\nt 0 9223372036854775808\n", r"Malformed line 3"),
        ("0\n2\nt 0 1\n\n", r"Malformed line 4"),
    ],
)
def test_offset_checkpoint_errors_name_file_and_line(tmp_path: Path, content: str, pattern: str) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    path.write_text(content)
    with pytest.raises(KafkaStorageError, match=pattern) as info:
        OffsetCheckpointFile(path).read()
    assert str(path) in str(info.value)


def test_offset_checkpoint_rejects_non_utf8(tmp_path: Path) -> None:
    path = tmp_path / "cp"
    path.write_bytes(b"0\n1\n\xff 0 1\n")
    with pytest.raises(KafkaStorageError, match="UTF-8"):
        OffsetCheckpointFile(path).read()


@pytest.mark.parametrize(
    "mapping",
    [
        {("has space", 0): 1},
        {("", 0): 1},
        {("t", 2**31): 1},
        {("t", 0): 2**63},
        {("t", 0): "1"},
        {"t-0": 1},
    ],
)
def test_offset_checkpoint_write_refuses_unreadable_entries(tmp_path: Path, mapping: dict) -> None:
    path = tmp_path / "cp"
    path.write_text("0\n0\n")
    with pytest.raises(KafkaStorageError, match="Cannot write"):
        OffsetCheckpointFile(path).write(mapping)
    assert path.read_text() == "0\n0\n"


def test_failed_write_keeps_the_old_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "cp"
    OffsetCheckpointFile(path).write({("t", 0): 1})
    (tmp_path / "cp.tmp").mkdir()  # the temp file cannot be created
    with pytest.raises(KafkaStorageError, match="Error while writing"):
        OffsetCheckpointFile(path).write({("t", 0): 2})
    assert OffsetCheckpointFile(path).read() == {("t", 0): 1}


def test_leader_epoch_checkpoint_round_trip_and_errors(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    checkpoint = LeaderEpochCheckpointFile(path)
    assert checkpoint.read() == []
    checkpoint.write([EpochEntry(1, 0), EpochEntry(7, 2**40)])
    assert path.read_text() == "0\n2\n1 0\n7 1099511627776\n"
    assert checkpoint.read() == [EpochEntry(1, 0), EpochEntry(7, 2**40)]
    path.write_text("0\n1\n1 2 3\n")
    with pytest.raises(KafkaStorageError, match=r"Malformed line 3 .*leader-epoch-checkpoint"):
        checkpoint.read()
    path.write_text("0\n1\n2147483648 0\n")
    with pytest.raises(KafkaStorageError, match="Malformed line 3"):
        checkpoint.read()
    with pytest.raises(KafkaStorageError, match="epoch"):
        checkpoint.write([EpochEntry(2**31, 0)])


# --- Uuid and partition.metadata -------------------------------------------------------------------


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


# --- meta.properties and java.util.Properties --------------------------------------------------------

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


def test_load_properties_follows_java_rules() -> None:
    text = (
        "# comment\n"
        "! another comment\n"
        "   \n"
        "a=1\n"
        "  b : 2\n"
        "c 3\n"
        "d\t=\t4 with trailing space \n"
        "e\\:key=5\n"
        "f=six \\\n"
        "    continued\n"
        "g=\\u0041\\t\\n\\=\n"
        "h\n"
        "i=x=y\n"
        "# not a continuation \\\n"
        "j=\\\\\n"
    )
    assert load_properties(text) == {
        "a": "1",
        "b": "2",
        "c": "3",
        "d": "4 with trailing space ",
        "e:key": "5",
        "f": "six continued",
        "g": "A\t\n=",
        "h": "",
        "i": "x=y",
        "j": "\\",
    }


def test_store_properties_escapes_and_round_trips() -> None:
    props = {"k e=y:": " lead#!", "tabs": "a\tb\nc", "uni": "é€😀", "empty": ""}
    text = store_properties(props, date=DATE)
    assert text.isascii()
    assert "k\\ e\\=y\\:=\\ lead\\#\\!" in text
    assert "uni=\\u00E9\\u20AC\\uD83D\\uDE00" in text
    assert load_properties(text) == props


def test_bad_unicode_escape_is_a_storage_error() -> None:
    with pytest.raises(KafkaStorageError, match="uxxxx"):
        load_properties("a=\\u12x4\n")


# --- clean shutdown marker ---------------------------------------------------------------------------


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


# --- producer snapshots ------------------------------------------------------------------------------


def test_empty_snapshot_layout() -> None:
    data = ProducerSnapshot().to_bytes()
    assert len(data) == 10
    assert data[:2] == b"\x00\x01" and data[6:] == b"\x00\x00\x00\x00"
    assert struct.unpack(">I", data[2:6])[0] == crc32c.crc32c(b"\x00\x00\x00\x00")
    assert ProducerSnapshot.from_bytes(data) == ProducerSnapshot()


def test_snapshot_entries_are_46_bytes_and_round_trip(tmp_path: Path) -> None:
    entries = tuple(ProducerSnapshotEntry(i, i % 3, i * 2, 1000 + i, 1, T0 + i, -1, -1) for i in range(5))
    snapshot = ProducerSnapshot(entries)
    data = snapshot.to_bytes()
    assert len(data) == 10 + 46 * 5
    path = tmp_path / "00000000000000001005.snapshot"
    snapshot.write(path)
    assert ProducerSnapshot.read(path) == snapshot


@pytest.mark.parametrize(
    ("mutate", "pattern"),
    [
        (lambda d: d[:40], "schema validation"),
        (lambda d: d[:1], "schema validation"),
        (lambda d: d[:8], "schema validation"),
        (lambda d: b"\x00\x02" + d[2:], "unknown file version 2"),
        (lambda d: d[:20] + bytes([d[20] ^ 1]) + d[21:], r"CRC is no longer valid"),
        (lambda d: d[:2] + b"\x00\x00\x00\x00" + d[6:], r"CRC is no longer valid"),
        (lambda d: d[:6] + b"\xff\xff\xff\xff" + d[10:], "schema validation"),
    ],
)
def test_corrupt_snapshots_name_the_file(
    kafka_golden_dir: Path, tmp_path: Path, mutate: Callable[[bytes], bytes], pattern: str
) -> None:
    path = tmp_path / "00000000000000000108.snapshot"
    path.write_bytes(mutate((kafka_golden_dir / "s6_00000000000000000108.snapshot").read_bytes()))
    with pytest.raises(CorruptSnapshotError, match=pattern) as info:
        ProducerSnapshot.read(path)
    assert str(path) in str(info.value)
    assert isinstance(info.value, KafkaStorageError)


def test_snapshot_entry_out_of_range_is_refused() -> None:
    with pytest.raises(KafkaStorageError, match="field sizes"):
        ProducerSnapshot((ProducerSnapshotEntry(1, 2**15, 0, 0, 0, 0, 0),)).to_bytes()


def test_missing_snapshot_is_a_storage_error(tmp_path: Path) -> None:
    with pytest.raises(KafkaStorageError, match="producer snapshot"):
        ProducerSnapshot.read(tmp_path / "00000000000000000000.snapshot")


# --- topic names and partition directories -----------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("orders-0", ("orders", 0)),
        ("my-topic-3", ("my-topic", 3)),
        ("a-b-c-12", ("a-b-c", 12)),
        ("__consumer_offsets-49", ("__consumer_offsets", 49)),
        ("t.with.dots-2147483647", ("t.with.dots", 2147483647)),
        ("x--1", ("x-", 1)),
    ],
)
def test_parse_topic_partition(name: str, expected: tuple[str, int]) -> None:
    assert parse_topic_partition(name) == expected
    assert parse_partition_dir_name(name) == PartitionDirName(*expected)


@pytest.mark.parametrize(
    "name", ["", "orders", "-0", "orders-", "orders-x", "orders-1.5", "orders-2147483648", "orders-delete",
             "orders-0-future", "orders-0.ab cd-stray"],
)
def test_bad_partition_dir_names(name: str) -> None:
    with pytest.raises(KafkaStorageError, match="not in the form of topic-partition"):
        parse_partition_dir_name(name)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("orders-0.0123456789abcdef0123456789abcdef-delete",
         PartitionDirName("orders", 0, PartitionDirKind.DELETE, "0123456789abcdef0123456789abcdef")),
        ("my.topic-7.abc-future", PartitionDirName("my.topic", 7, PartitionDirKind.FUTURE, "abc")),
        ("a-b-1.u-stray", PartitionDirName("a-b", 1, PartitionDirKind.STRAY, "u")),
    ],
)
def test_suffixed_partition_dirs_are_recognised_and_refused_as_live(
    name: str, expected: PartitionDirName
) -> None:
    assert parse_partition_dir_name(name) == expected
    with pytest.raises(KafkaStorageError, match=f"is a {expected.kind.value[1:]} directory"):
        parse_topic_partition(name)


def test_dir_name_builders_round_trip() -> None:
    assert topic_partition_dir_name("orders", 5) == "orders-5"
    name = log_delete_dir_name("orders", 5, "abc")
    assert name == "orders-5.abc-delete"
    assert parse_partition_dir_name(log_future_dir_name("orders", 5)).kind is PartitionDirKind.FUTURE
    assert parse_partition_dir_name(log_stray_dir_name("orders", 5)).kind is PartitionDirKind.STRAY
    generated = parse_partition_dir_name(log_delete_dir_name("orders", 5))
    assert generated.kind is PartitionDirKind.DELETE and len(generated.unique_id or "") == 32


def test_delete_dir_name_is_capped_at_255_characters() -> None:
    topic = "t" * 249
    name = log_delete_dir_name(topic, 123)
    assert len(name) == 255
    parsed = parse_partition_dir_name(name)
    assert parsed.partition == 123 and topic.startswith(parsed.topic)


@pytest.mark.parametrize(
    ("topic", "partition"), [("../x", 0), ("a b", 0), ("t", -1), ("t", 2**31), ("t", True)]
)
def test_dir_name_builders_validate(topic: str, partition: int) -> None:
    with pytest.raises(InvalidConfigError):
        topic_partition_dir_name(topic, partition)


@pytest.mark.parametrize("name", ["a", "A-Z_0.9", "-", "_" * 249, "..."])
def test_valid_topic_names(name: str) -> None:
    assert validate_topic_name(name) == name
    assert is_valid_topic_name(name)


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("", "empty string"),
        (".", "'.' is not allowed"),
        ("..", "'..' is not allowed"),
        ("x" * 250, "longer than the max allowed length 249"),
        ("a b", "characters other than ASCII alphanumerics"),
        ("a/b", "characters other than ASCII alphanumerics"),
        ("café", "characters other than ASCII alphanumerics"),
    ],
)
def test_invalid_topic_names(name: str, reason: str) -> None:
    assert not is_valid_topic_name(name)
    with pytest.raises(InvalidTopicError, match=reason):
        validate_topic_name(name)
