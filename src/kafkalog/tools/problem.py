"""A finding of ``dump-log`` or ``verify``: which file, where in it, and what."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Problem"]


@dataclass(frozen=True, slots=True)
class Problem:
    """One inconsistency: which file, where in it (byte position and/or offset), and what."""

    file: Path
    message: str
    position: int | None = None
    offset: int | None = None

    def __str__(self) -> str:
        where = []
        if self.position is not None:
            where.append(f"position {self.position}")
        if self.offset is not None:
            where.append(f"offset {self.offset}")
        location = f" ({', '.join(where)})" if where else ""
        return f"{self.file}{location}: {self.message}"

    def to_json(self) -> dict[str, Any]:
        return {"file": str(self.file), "position": self.position, "offset": self.offset,
                "message": self.message}
