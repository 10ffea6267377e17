"""policy.rules: signed policy versions and control records (rollback, pause, resume).

The rule document itself is validated by the policy engine (modstream/policy/document.py,
issue 3); here it is only required to be a JSON object.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Self

from pydantic import Discriminator, Field, Tag, TypeAdapter, model_validator

from modstream.contract.common import EventTime, Id, InputRecord

PolicyMode = Literal["active", "shadow", "canary"]
PolicyCommand = Literal["rollback", "pause_publication", "resume_publication"]
Signature = Annotated[str, Field(pattern=r"^hmac-sha256:[0-9a-f]{64}$")]


class PolicyVersion(InputRecord):
    """One version of a policy, with the rule document it carries."""

    event_id: Id
    policy_id: Id
    version: Annotated[int, Field(ge=1)]
    parent_version: Annotated[int, Field(ge=1)] | None = None
    mode: PolicyMode
    canary_percent: Annotated[float, Field(ge=0, le=100)] | None = None
    author: Id
    ts: EventTime
    signature: Signature
    document: dict[str, Any]

    @model_validator(mode="after")
    def _canary_percent_only_for_canary(self) -> Self:
        if self.mode == "canary" and self.canary_percent is None:
            raise ValueError("canary_percent is required when mode is canary")
        if self.mode != "canary" and self.canary_percent is not None:
            raise ValueError("canary_percent is only allowed when mode is canary")
        return self


class PolicyControl(InputRecord):
    """rollback (to an already-seen version) or the emergency pause/resume switch."""

    event_id: Id
    policy_id: Id
    command: PolicyCommand
    version: Annotated[int, Field(ge=1)] | None = None
    ts: EventTime
    signature: Signature

    @model_validator(mode="after")
    def _rollback_names_a_version(self) -> Self:
        if self.command == "rollback" and self.version is None:
            raise ValueError("version is required for command rollback")
        return self


def _policy_kind(value: Any) -> str:
    if isinstance(value, dict):
        return "control" if "command" in value else "version"
    return "control" if hasattr(value, "command") else "version"


PolicyRecord = Annotated[
    Annotated[PolicyVersion, Tag("version")] | Annotated[PolicyControl, Tag("control")],
    Discriminator(_policy_kind),
]
POLICY_RECORD_ADAPTER: TypeAdapter[PolicyVersion | PolicyControl] = TypeAdapter(PolicyRecord)
