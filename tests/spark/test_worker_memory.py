"""The executor's allocator setting (no Spark session needed)."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

_PROBE = "from kafkalog.spark.worker_memory import keep_freed_memory as k; print(k(), k())"


def _run(env_extra: dict[str, str]) -> str:
    import os

    env = {**os.environ, **env_extra}
    out = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True,
                         timeout=60, check=True)
    return out.stdout.strip()


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the setting is glibc's")
def test_set_once_per_process_with_glibc():
    # glibc (this machine's C library) accepts both thresholds; the second call is a no-op
    assert _run({}) == "True True"


def test_the_users_own_malloc_settings_are_left_alone():
    assert _run({"MALLOC_TRIM_THRESHOLD_": "1000000"}) == "False False"
