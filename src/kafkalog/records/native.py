"""The optional C modules, or None: the record walker (``_native.c``) and the log cleaner's byte
work (``_compact.c``).

``make`` builds them (setuptools compiles them with the machine's C compiler); without a
compiler the build still succeeds and every caller uses the pure-Python code, which applies the
same rules. Set ``KAFKALOG_PURE_PYTHON=1`` to force the Python code (the parity tests run both
side by side regardless).
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

__all__ = ["compact_native", "native", "native_disabled"]


def native_disabled() -> bool:
    return os.environ.get("KAFKALOG_PURE_PYTHON", "").strip() not in ("", "0")


def _load(name: str) -> ModuleType | None:
    if native_disabled():
        return None
    try:
        # Through importlib: the extension may not be built, and the type checker cannot see it.
        return importlib.import_module(name)
    except ImportError:
        return None


native: ModuleType | None = _load("kafkalog.records._native")
compact_native: ModuleType | None = _load("kafkalog.records._compact")
