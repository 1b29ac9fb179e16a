"""The one compiled part of the package (everything else is in pyproject.toml): broker.log._native, the
produce path's record walk (broker/log/_native.c). Optional: where it cannot be built (no C compiler)
the install goes on and the broker uses the same walk in Python (broker/log/streaming.py)."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("broker.log._native", ["broker/log/_native.c"], optional=True)])
