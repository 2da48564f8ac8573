"""Only the C extension lives here; everything else is in pyproject.toml.

The extension is optional: without a C compiler kafkalog still installs and runs on its
pure-Python record walk (``kafkalog.records.native`` says which one is in use).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "kafkalog.records._native",
            sources=["src/kafkalog/records/_native.c"],
            extra_compile_args=["-O2", "-std=c11"],
            optional=True,
        )
    ]
)
