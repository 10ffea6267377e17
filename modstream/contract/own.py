"""Records this job admitted and wrote on between its own operators, read back without being
validated again: msgspec Structs with the contract's field names, built from the pydantic
models of schemas/ (so a field added there is read here), every value as it was written.

Decode validated each record against its model (modstream/moderation/admission.py) and wrote it with
`model_dump_json`, which writes every field: reading it back needs no second validation. A
text that does not decode into its Struct (a field missing: never one this job wrote) is read
by pydantic instead, which words the refusal (`modstream.contract.registry.parse_own`). About a
quarter of pydantic's time on a detector result (docs/BENCHMARKS.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import msgspec
from pydantic import BaseModel

from modstream.contract.content import ContentDelete, ContentUpsert
from modstream.contract.detector import DetectorResult
from modstream.contract.signals import Appeal, Reevaluate, ReviewDecision, UserReport


def _struct(name: str, models: Iterable[type[BaseModel]]) -> type[msgspec.Struct]:
    """A frozen Struct with every field of `models`: required where each model requires it,
    else the model's default (None for a field only some of the models have)."""
    models = list(models)
    fields: dict[str, tuple[Any, ...]] = {}
    for model in models:
        for field, info in model.model_fields.items():
            shared = all(field in other.model_fields for other in models)
            if info.is_required() and shared:
                fields.setdefault(field, (field, Any))
            else:
                fields[field] = (field, Any, None if info.is_required() else info.default)
    return msgspec.defstruct(name, list(fields.values()), frozen=True, kw_only=True)


_READERS: dict[str, Callable[[str | bytes], Any]] = {
    topic: msgspec.json.Decoder(_struct(name, models)).decode
    for topic, name, models in (
        ("content.versions", "ContentVersionRecord", (ContentUpsert, ContentDelete)),
        ("detector.results", "DetectorResultRecord", (DetectorResult,)),
        ("moderation.reports", "UserReportRecord", (UserReport,)),
        ("review.decisions", "ReviewDecisionRecord", (ReviewDecision,)),
        ("moderation.appeals", "AppealRecord", (Appeal,)),
        ("moderation.reevaluate", "ReevaluateRecord", (Reevaluate,)),
    )
}


def reader(topic: str) -> Callable[[str | bytes], Any] | None:
    """The Struct decoder of `topic`'s records (None: not a record this job reads back)."""
    return _READERS.get(topic)
