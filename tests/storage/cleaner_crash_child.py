"""The cleaning process of the cleaner crash test: cleans one partition, and SIGKILLs itself at the
N-th file rename (``--kill-at-rename N``) or is killed by the parent at a random moment.

Renames are the steps of the swap (``.cleaned`` -> ``.swap``, old segments -> ``.deleted``, ``.swap``
-> ``""``), so killing at each one exercises every crash point of ``Log.replace_segments``. Without
a kill it prints ``RENAMES <count>`` after cleaning, and ``OVERLAPPED <rounds>``: the rounds that
mapped and cleaned at once (``--io-buffer`` of 64 KiB or more lets them).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from kafkalog.storage.cleaner.cleaner import Cleaner
from kafkalog.storage.log import Log
from tests.storage._cleaning import clean
from tests.storage.conftest import config

CONFIG = {"cleanup_policy": "compact", "segment_bytes": 1_000_000, "file_delete_delay_ms": 0}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--partition-dir", required=True, type=Path)
    parser.add_argument("--kill-at-rename", type=int, default=0)
    parser.add_argument("--io-buffer", type=int, default=4096)  # 64 KiB and more: the overlapped round
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
    overlapped = 0
    newest_first = Cleaner._clean_newest_first

    def counting_rounds(self: Cleaner, *rest: Any) -> int | None:
        nonlocal overlapped
        end: int | None = newest_first(self, *rest)
        overlapped += end is not None
        return end

    Cleaner._clean_newest_first = counting_rounds  # type: ignore[method-assign]
    sys.stdout.write("STARTED\n")
    sys.stdout.flush()
    clean(log, io_buffer_size=args.io_buffer)
    os.replace = real_replace
    log.close()
    sys.stdout.write(f"OVERLAPPED {overlapped}\nRENAMES {renames}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
