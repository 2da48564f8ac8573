"""The optional C record walker (``_native.c``), or None.

``make`` builds it (setuptools compiles ``_native.c`` with the machine's C compiler); without a
compiler the build still succeeds and every caller uses the pure-Python walk, which applies the
same rules. Set ``KAFKALOG_PURE_PYTHON=1`` to force the Python walk (the parity tests run both
side by side regardless).
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

__all__ = ["native", "native_disabled"]


def native_disabled() -> bool:
    return os.environ.get("KAFKALOG_PURE_PYTHON", "").strip() not in ("", "0")


def _load() -> ModuleType | None:
    if native_disabled():
        return None
    try:
        # Through importlib: the extension may not be built, and the type checker cannot see it.
        return importlib.import_module("kafkalog.records._native")
    except ImportError:
        return None


native: ModuleType | None = _load()
