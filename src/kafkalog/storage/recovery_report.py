"""What loading a partition cut from its data: the report behind "data cut is always reported".

Recovery (``LogLoader``, spec §8) truncates a segment at its first invalid or torn batch and deletes
the segments after it; a log whose end is below its start offset loses every segment. Each such cut
is a ``DataCut``; a partition's cuts form its ``RecoveryReport``, which ``Log.recovery_report`` keeps,
``LogManager.recovery_reports()`` and ``PartitionAppender.recovery_reports`` collect, the loader logs
as one WARNING, and the CLI prints as one line on stderr per partition.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

__all__ = ["CutKind", "DataCut", "RecoveryReport"]


class CutKind(enum.Enum):
    TRUNCATED = "truncated"
    DELETED = "deleted"


@dataclass(frozen=True, slots=True)
class DataCut:
    """Bytes of one segment file removed by recovery.

    ``position`` is where the cut starts in the file (0 for a deleted file); ``first_offset`` is the
    first offset that was not kept: everything from it on in this file is gone (the exact offsets
    of unreadable bytes are unknowable).
    """

    kind: CutKind
    file: str
    bytes: int
    position: int
    first_offset: int
    reason: str

    def describe(self) -> str:
        if self.kind is CutKind.TRUNCATED:
            return (f"truncated {self.bytes} bytes of {self.file} at byte {self.position} "
                    f"(offsets {self.first_offset} and later)")
        return f"deleted {self.file} ({self.bytes} bytes, offsets {self.first_offset} and later)"

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind.value, "file": self.file, "bytes": self.bytes, "position": self.position,
                "firstOffset": self.first_offset, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class RecoveryReport:
    """The data one partition lost when it was loaded (``cuts`` empty: nothing)."""

    topic: str
    partition: int
    cuts: tuple[DataCut, ...] = ()

    @property
    def cut_bytes(self) -> int:
        return sum(c.bytes for c in self.cuts)

    def describe(self) -> str:
        """One line: partition, what was cut from which file, and why (the first cut's reason)."""
        what = "; ".join(c.describe() for c in self.cuts)
        return f"{self.topic}-{self.partition}: recovery cut data: {what} ({self.cuts[0].reason})"

    def to_json(self) -> dict[str, Any]:
        return {"topic": self.topic, "partition": self.partition, "cuts": [c.to_json() for c in self.cuts]}
