"""Swapping new segments in for old ones (Kafka's ``LocalLog.replaceSegments``), the one protocol
both the log cleaner (cleaned groups) and the loader (a split overflowed segment) use, crash-safe
at every step together with the loader's handling of leftover files:

1. the new segments' files are renamed ``.cleaned`` -> ``.swap``, highest base offset first (a
   crash before every file is renamed leaves ``.cleaned`` files below a ``.swap``: the loader drops
   them all and the old segments stand, KAFKA-6264);
2. they take the old ones' places in the segment map, and the old ones are renamed ``.deleted``
   (a crash here: the loader deletes whatever old segment files the swap segments cover and
   renames the swaps);
3. the ``.swap`` suffixes are dropped and the directory is fsynced -- once, as Kafka does
   (journaling filesystems write the renames in their order).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from kafkalog.storage.files import fsync_directory
from kafkalog.storage.log_file_utils import CLEANED_FILE_SUFFIX, DELETED_FILE_SUFFIX, SWAP_FILE_SUFFIX
from kafkalog.storage.log_segment import LogSegment, LogSegments

__all__ = ["swap_segments"]


def swap_segments(directory: Path, segments: LogSegments, new_sorted: list[LogSegment],
                  old_sorted: list[LogSegment], retire: Callable[[LogSegment], None]) -> list[LogSegment]:
    """Swap ``new_sorted`` (``.cleaned`` files, by base offset) in for ``old_sorted`` in ``segments``.
    Each old segment, its files renamed ``.deleted``, goes to ``retire`` (which deletes it, at once or
    later). Returns the old segments no new segment of the same base offset replaced."""
    for segment in reversed(new_sorted):
        segment.change_file_suffixes(CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX)
    for segment in reversed(new_sorted):
        segments.add(segment)
    new_bases = {s.base_offset for s in new_sorted}
    not_replaced = []
    for segment in old_sorted:
        if segment.base_offset not in new_bases:  # else the new segment took its place
            segments.remove(segment.base_offset)
            not_replaced.append(segment)
        segment.change_file_suffixes("", DELETED_FILE_SUFFIX)
        retire(segment)
    for segment in new_sorted:
        segment.change_file_suffixes(SWAP_FILE_SUFFIX, "")
    fsync_directory(directory)
    return not_replaced
