"""modstream.demo.workload's mixes: the benchmarks' mix holds the shares issue 14 names."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from modstream.demo.workload import BENCH_MIX, generate


def test_the_bench_mix_has_the_issues_shares_of_modalities_segments_and_human_input() -> None:
    lines = generate(seed=3, versions=5000, extras=False, malformed=False, mix=BENCH_MIX)
    uploads = [line["value"] for line in lines if line["topic"] == "content.versions"]
    shares = Counter(upload["modality"] for upload in uploads)
    for modality, share in {"text": 0.60, "image": 0.30, "video": 0.08, "audio": 0.02}.items():
        assert abs(shares[modality] / len(uploads) - share) < 0.02, (modality, shares)
    segments = {upload["segments"] for upload in uploads if upload["modality"] == "video"}
    assert min(segments) == 4 and max(segments) == 16
    topics = Counter(line["topic"] for line in lines)
    assert 0.002 < topics["moderation.reports"] / len(uploads) < 0.01
    assert 0 < topics["review.decisions"] / len(uploads) < 0.004
    results = [line["value"] for line in lines if line["topic"] == "detector.results"]
    duplicates = sum(result["event_id"].endswith("-dup") for result in results)
    assert 0.01 < duplicates / len(results) < 0.03
    authors = Counter(upload["author_id"] for upload in uploads)
    assert len(authors) > 3000 and max(authors.values()) < 10, authors.most_common(3)


def test_the_bench_mix_spreads_authors_and_changes_nothing_else() -> None:
    """Only `author_id` differs from the default authors: every other draw is the same."""
    few = replace(BENCH_MIX, authors=40)
    spread = generate(seed=3, versions=300, extras=False, malformed=False, mix=BENCH_MIX)
    kept = generate(seed=3, versions=300, extras=False, malformed=False, mix=few)
    assert len(spread) == len(kept)
    for one, other in zip(spread, kept, strict=True):
        assert {**one["value"], "author_id": None} == {**other["value"], "author_id": None}
    assert len({line["value"].get("author_id") for line in kept}) <= 41


def test_the_default_mix_has_no_reports_or_reviews_beyond_the_scripted_extras() -> None:
    lines = generate(seed=3, versions=500, extras=False, malformed=False)
    assert not {"moderation.reports", "review.decisions"} & {line["topic"] for line in lines}
