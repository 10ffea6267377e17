"""modstream: streaming content moderation on Apache Flink (PyFlink)."""

from __future__ import annotations

from modstream.core import native

__version__ = "0.1.0"

# The per-version code as mypyc built it, when the build matches the sources (core/native.py).
native.install()
