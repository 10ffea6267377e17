"""modstream: streaming content moderation on Apache Flink (PyFlink)."""

from __future__ import annotations

__version__ = "0.1.0"
