"""The scan job's modality pools (issue 28 item 6): which modalities share one batching,
admission and model chain, with its own Kafka source and group. modstream/jobs/scan/job.py runs
them; the demo and deploy/k8s name them (docs/scanning.md, "Pools"). No Flink here, so the CLI and
the demo read it without a JVM.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

MODALITIES = ("text", "image", "video", "audio")


@dataclass(frozen=True)
class Pool:
    """Modalities served by one batching, admission and model chain, with its own source and
    Kafka group: a modality pool (issue 28 item 6)."""

    name: str
    modalities: tuple[str, ...]

    def topics(self) -> list[str]:
        """Every topic the pool reads: its live topics, then their backfill topics
        (modstream/scanning/plan.py: request_topic), both through the pool's admission, which
        serves live first; then the reports, which bump their versions' waiting requests."""
        live = [f"scan.requests.{m}" for m in self.modalities]
        return [*live, *(f"{topic}.backfill" for topic in live), REPORTS]


# Read by every pool: a report moves its version's waiting requests to the front
# (docs/scanning.md, "Reports").
REPORTS = "moderation.reports"

# Every shipped deployment (demo, cluster demo, deploy/k8s) runs these three pools, one cost
# class each: text (tens of microseconds a request), images (tens to hundreds of ms), and
# video with audio (seconds of decoding and reading per file). docs/scanning.md, "Pools".
POOLS = (Pool("text", ("text",)), Pool("image", ("image",)), Pool("av", ("video", "audio")))


def parse_pool(spec: str) -> Pool:
    """`NAME=MODALITY[,MODALITY]`, or `MODALITY[,MODALITY]` (named by its modalities)."""
    name, _, listed = spec.rpartition("=")
    modalities = tuple(m.strip() for m in listed.split(",") if m.strip())
    unknown = sorted(set(modalities) - set(MODALITIES))
    if not modalities or unknown:
        raise ValueError(
            f"scan: pool {spec!r}: unknown modalities {', '.join(unknown) or '(none)'}"
        )
    return Pool(name.strip() or "-".join(modalities), modalities)


def serving(modalities: Iterable[str], pools: Iterable[Pool] = POOLS) -> list[Pool]:
    """The pools that serve any of `modalities`, in their order."""
    wanted = set(modalities)
    return [pool for pool in pools if wanted & set(pool.modalities)]


def as_options(pools: Iterable[Pool]) -> list[str]:
    """`--pool NAME=MODALITIES` for each pool, as modstream/jobs/scan/job.py reads them."""
    return [
        part for pool in pools for part in ("--pool", f"{pool.name}={','.join(pool.modalities)}")
    ]
