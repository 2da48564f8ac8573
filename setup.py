"""Only the C extensions live here; everything else is in pyproject.toml.

The extensions are optional: without a C compiler kafkalog still installs and runs on its
pure-Python code (``kafkalog.records.native`` says which one is in use).
"""

from setuptools import Extension, setup

_RECORDS = "src/kafkalog/records"

setup(
    ext_modules=[
        Extension(
            "kafkalog.records._native",
            sources=[f"{_RECORDS}/_native.c"],
            depends=[f"{_RECORDS}/_walk.h"],
            extra_compile_args=["-O2", "-std=c11"],
            optional=True,
        ),
        Extension(
            "kafkalog.records._compact",
            sources=[f"{_RECORDS}/_compact.c"],
            depends=[f"{_RECORDS}/_walk.h", f"{_RECORDS}/_compact_api.h"],
            extra_compile_args=["-O2", "-std=c11"],
            optional=True,
        ),
        # The cleaner's reads on two threads; borrows _compact's walks through its capsule.
        Extension(
            "kafkalog.storage.cleaner._map_pass",
            sources=["src/kafkalog/storage/cleaner/_map_pass.c"],
            depends=[f"{_RECORDS}/_compact_api.h"],
            include_dirs=[_RECORDS],
            extra_compile_args=["-O2", "-std=c11", "-pthread"],
            extra_link_args=["-pthread"],
            optional=True,
        ),
    ]
)
