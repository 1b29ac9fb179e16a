"""The compiled parts of the package (everything else is in pyproject.toml), both optional: where they
cannot be built (no C compiler) the install goes on and the broker runs the same code in Python.

- broker.log._native: the produce path's record walk (broker/log/_native.c; Python: broker/log/streaming.py)
  and syncfs (Python: ctypes, broker/log/manager.py)
- broker.coordinator._replay: the start-up replay's walk of the coordinator log
  (broker/coordinator/_replay.c; Python: broker/coordinator/loader.py)
- broker.dispatch._offset_commit: the common OffsetCommit request's parse
  (broker/dispatch/_offset_commit.c; Python: broker/dispatch/offset_commit.py)
- broker.dispatch._produce: the Produce request of one partition's parse
  (broker/dispatch/_produce.c; Python: broker/dispatch/produce.py)"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "broker.log._native", ["broker/log/_native.c"], depends=["broker/log/_varint.h"], optional=True
        ),
        Extension(
            "broker.coordinator._replay",
            ["broker/coordinator/_replay.c"],
            depends=["broker/log/_varint.h"],
            optional=True,
        ),
        Extension(
            "broker.dispatch._offset_commit",
            ["broker/dispatch/_offset_commit.c"],
            depends=["broker/dispatch/_slots.h"],
            optional=True,
        ),
        Extension(
            "broker.dispatch._produce",
            ["broker/dispatch/_produce.c"],
            depends=["broker/dispatch/_slots.h"],
            optional=True,
        ),
    ]
)
