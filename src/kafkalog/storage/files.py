"""Deleting, renaming and atomically writing a storage file (Kafka's ``Files.deleteIfExists``,
``Utils.atomicMoveWithFallback`` and ``Utils.flushDir``).

One place for the two steps ``.log``, ``.index``, ``.timeindex`` and ``.txnindex`` files share, so
they fail the same way: any ``OSError`` becomes a ``KafkaStorageError`` naming the file. The callers
keep what differs: their own locks, closing the handle first, and taking the new path even when the
move fails (as Kafka does). Side files (checkpoints, ``partition.metadata``, ``meta.properties``,
topic configs) are replaced whole with ``write_file_atomically``.
"""

from __future__ import annotations

import os
from pathlib import Path

from kafkalog.errors import KafkaStorageError

__all__ = [
    "create_empty_file",
    "delete_file_if_exists",
    "fsync_directory",
    "replace_file",
    "write_file",
    "write_file_atomically",
]


def _describe(what: str, path: Path) -> str:
    # "offset index /d/0.index", or just the path for the ``.log`` file, whose messages never named it.
    return f"{what} {path}" if what else str(path)


def create_empty_file(path: Path, what: str = "") -> bool:
    """Create ``path`` empty unless it exists; True if it did. Kafka creates its checkpoint files so
    (``CheckpointFile``), and an index that never had an entry is an empty file too."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return False
    except OSError as e:
        raise KafkaStorageError(f"Cannot create {_describe(what, path)}: {e}") from e
    os.close(fd)
    return True


def delete_file_if_exists(path: Path, what: str = "") -> bool:
    """Delete ``path``; False if it was not there. ``what`` ("time index", …) prefixes the path in errors."""
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    except OSError as e:
        raise KafkaStorageError(f"Cannot delete {_describe(what, path)}: {e}") from e
    return True


def replace_file(src: Path, dst: Path, what: str = "", *, missing_ok: bool = False) -> None:
    """Atomically move ``src`` to ``dst`` (replacing it). With ``missing_ok`` a ``src`` that does not
    exist (a file never created) is not an error and nothing moves; a missing target directory still is.
    """
    try:
        os.replace(src, dst)
    except OSError as e:
        # ENOENT does not say which side is missing: only a missing source is the allowed case.
        if missing_ok and isinstance(e, FileNotFoundError) and not src.exists():
            return
        raise KafkaStorageError(f"Cannot rename {_describe(what, src)} to {dst}: {e}") from e


def fsync_directory(path: Path) -> None:
    """Make a rename or file creation in ``path`` durable (Kafka's ``Utils.flushDir``)."""
    if os.name != "posix":  # Windows cannot open directories; Kafka skips it too.
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_file(path: Path, data: bytes, *, sync: bool = True, mode: int = 0o666) -> None:
    """Write ``data`` to ``path`` in place, fsync'ed when ``sync``, created with ``mode`` (less the
    umask); ``OSError`` is the caller's to word."""
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode), "wb") as f:
        f.write(data)
        f.flush()
        if sync:
            os.fsync(f.fileno())


def write_file_atomically(path: Path | str, data: bytes, *, sync: bool = True, mode: int = 0o666) -> None:
    """Write ``<path>.tmp`` (created with ``mode``), fsync it, rename it over ``path`` and fsync the
    directory.

    A crash leaves either the old or the new content, never a mixture (Kafka's checkpoint writes).
    """
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        if mode != 0o666:
            delete_file_if_exists(tmp)  # a leftover .tmp would keep its wider mode
        write_file(tmp, data, sync=sync, mode=mode)
        os.replace(tmp, path)
        if sync:
            fsync_directory(path.parent)
    except OSError as e:
        raise KafkaStorageError(f"Error while writing file {path}: {e}") from e
