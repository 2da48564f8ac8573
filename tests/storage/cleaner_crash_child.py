"""The cleaning process of the cleaner crash test: cleans one partition, and SIGKILLs itself at the
N-th file rename (``--kill-at-rename N``) or is killed by the parent at a random moment.

Renames are the steps of the swap (``.cleaned`` -> ``.swap``, old segments -> ``.deleted``, ``.swap``
-> ``""``), so killing at each one exercises every crash point of ``Log.replace_segments``. Without
a kill it prints ``RENAMES <count>`` after cleaning.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from kafkalog.storage.log import Log
from tests.storage._cleaning import clean
from tests.storage.conftest import config

CONFIG = {"cleanup_policy": "compact", "segment_bytes": 1_000_000, "file_delete_delay_ms": 0}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--partition-dir", required=True, type=Path)
    parser.add_argument("--kill-at-rename", type=int, default=0)
    args = parser.parse_args()
    log = Log.open(args.partition_dir, config(**CONFIG))
    renames = 0
    real_replace = os.replace

    def counting_replace(src: object, dst: object) -> None:
        nonlocal renames
        renames += 1
        if renames == args.kill_at_rename:
            os.kill(os.getpid(), signal.SIGKILL)
        real_replace(src, dst)  # type: ignore[arg-type]

    os.replace = counting_replace  # type: ignore[assignment]
    sys.stdout.write("STARTED\n")
    sys.stdout.flush()
    clean(log)
    os.replace = real_replace
    log.close()
    sys.stdout.write(f"RENAMES {renames}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
