"""Quality of decisions (issue 29, item 3): what in one firing's outputs is an appealable
decision, an appeal, an appeal's result, or a human review that agrees or disagrees with the
model. Counted by the moderation job (modstream/jobs/moderation/metrics.py); the rates are PromQL
over these counters (deploy/prometheus/alerts.yaml, group `modstream-quality`):
- appeal rate: appeals opened / appealable decisions (a BLOCK or RESTRICT the author was told
  about with `appeal_allowed`, i.e. every `user.notifications` record that allows one);
- overturn rate: appeals decided with another outcome than the decision appealed / appeals
  decided;
- model-human disagreement: human reviews of a model's decision (no human decision in force
  before) with another outcome / such reviews.
"The decision appealed" and "the model's decision" are the version's decision in force before
the firing (`InForce`, read from the stored state only when a human decision is in the
outputs). Each is sliced by the content's surface, region and language
(modstream/moderation/language.py: `und` when no text result named one), the models behind the
version's evidence and the policy version the record names.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from modstream.contract.common import UNDETERMINED

if TYPE_CHECKING:  # modstream/jobs/metrics.py imports SLICE: keep this module light
    from modstream.moderation.state import Output

# Labels of every quality counter (modstream/jobs/metrics.py), in this order.
SLICE = ("surface", "region", "language", "model_version", "policy_version")
HUMAN_TRIGGERS = frozenset({"review", "appeal"})
# The counters `counted` names (modstream/jobs/metrics.py registers them; the moderation job counts
# them).
COUNTERS = ("appealable_decisions", "appeals", "appeal_outcomes", "human_reviews")


@dataclass(frozen=True)
class InForce:
    """The decision in force on a version before a firing: its outcome, and whether a human
    decided it (a review or an appeal) rather than the model and policy."""

    outcome: str
    human: bool


@dataclass(frozen=True)
class Slice:
    """Who and what a counted decision is about (its labels, but `policy_version`)."""

    surface: str
    region: str
    model_version: str  # `detector@model_version` of the version's evidence, sorted, by `,`
    language: str = UNDETERMINED  # the version's (modstream/moderation/language.py)

    def labels(self, policy_version: object) -> dict[str, str]:
        return {
            "surface": self.surface,
            "region": self.region,
            "language": self.language,
            "model_version": self.model_version,
            "policy_version": str(policy_version if policy_version is not None else "unknown"),
        }


def models(evidence: Iterable[tuple[str, str]]) -> str:
    """The models behind a version's evidence, (detector, model_version) pairs, as one label
    value ("none" without evidence)."""
    names = sorted({f"{detector}@{model_version}" for detector, model_version in evidence})
    return ",".join(names) or "none"


def counted(
    outputs: list[Output], slice_of: Callable[[], Slice], earlier: Callable[[], InForce | None]
) -> list[tuple[str, dict[str, str]]]:
    """The quality counters one firing's `outputs` add to, with their labels. `slice_of` and
    `earlier` are each called at most once, and only when an output counts (`slice_of`) or a
    review or appeal decision is among the outputs (`earlier`): most firings count nothing."""
    slices: list[Slice] = []

    def slice_() -> Slice:
        if not slices:
            slices.append(slice_of())
        return slices[0]

    policy_of = {
        record.get("decision_revision"): record.get("policy_version")
        for topic, _key, record in outputs
        if topic == "moderation.decisions"
    }
    before: list[InForce | None] = []
    counts: list[tuple[str, dict[str, str]]] = []
    for topic, _key, record in outputs:
        if topic == "user.notifications" and record.get("appeal_allowed") is True:
            labels = slice_().labels(policy_of.get(record.get("decision_revision")))
            counts.append(("appealable_decisions", labels))
        elif topic == "review.tasks" and record.get("kind") == "appeal":
            counts.append(("appeals", slice_().labels(record.get("policy_version"))))
        elif topic == "moderation.decisions" and record.get("trigger") in HUMAN_TRIGGERS:
            if not before:
                before.append(earlier())
            judged = _judged(record, before[0], slice_)
            if judged is not None:
                counts.append(judged)
    return counts


def _judged(
    record: dict[str, Any], before: InForce | None, slice_: Callable[[], Slice]
) -> tuple[str, dict[str, str]] | None:
    """An appeal's result, or a review's agreement with the model's decision it replaced."""
    if before is None:  # nothing was in force: nothing to agree with
        return None
    labels = slice_().labels(record.get("policy_version"))
    changed = record.get("outcome") != before.outcome
    if record.get("trigger") == "appeal":
        return "appeal_outcomes", {**labels, "result": "overturned" if changed else "upheld"}
    if before.human:  # a human decision reviewed again: not the model's
        return None
    return "human_reviews", {**labels, "agreement": "disagree" if changed else "agree"}
