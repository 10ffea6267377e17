"""Pydantic models of the modstream wire contract (docs/CONTRACT.md).

Every record that crosses modstream's boundary has a strict model here; `registry.parse`
validates raw bytes for a topic and `dlq.dead_letter` turns any failure into a DLQ record.
"""

from __future__ import annotations

from modstream.contract.dlq import DlqRecord, dead_letter
from modstream.contract.registry import (
    INPUT_TOPICS,
    OUTPUT_TOPICS,
    TOPIC_MODELS,
    SchemaError,
    parse,
)

__all__ = [
    "INPUT_TOPICS",
    "OUTPUT_TOPICS",
    "TOPIC_MODELS",
    "DlqRecord",
    "SchemaError",
    "dead_letter",
    "parse",
]
