"""``kafkalog recover``: Kafka's crash recovery, made to repair what ``verify`` finds.

Kafka's recovery re-reads only the segments after each partition's recovery point, so damage below
it (an index entry that points into the middle of a batch, a flipped byte in an old batch) is found
by ``verify`` and left alone by a plain recovery. ``recover_and_verify`` therefore verifies first and
recovers every segment (as ``--full``) when anything was found, then verifies again: what is still
reported is what recovery cannot repair, and the caller must say so.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kafkalog.storage.log_manager import PartitionRecovery, recover_data_dir
from kafkalog.tools.problem import Problem
from kafkalog.tools.verify import ProgressCallback, verify_data_dir

__all__ = ["RepairReport", "recover_and_verify"]


@dataclass(frozen=True, slots=True)
class RepairReport:
    """What recovery changed per partition, whether it recovered every segment, and what ``verify``
    found before (``found``) and still finds after (``remaining``)."""

    partitions: list[PartitionRecovery]
    full: bool
    found: list[Problem]
    remaining: list[Problem]


def recover_and_verify(data_dir: Path | str, *, full: bool = False,
                       verify_progress: ProgressCallback | None = None,
                       recover_progress: ProgressCallback | None = None) -> RepairReport:
    """Verify ``data_dir``, recover it (every segment if ``full`` or if verify found anything), verify
    again. Raises what ``verify_data_dir`` and ``recover_data_dir`` raise."""
    before = verify_data_dir(data_dir, verify_progress)
    full = full or not before.ok
    partitions = recover_data_dir(data_dir, full=full, progress=recover_progress)
    after = verify_data_dir(data_dir, verify_progress)
    return RepairReport(partitions, full, before.problems, after.problems)
