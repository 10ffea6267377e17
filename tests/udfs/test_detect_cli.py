"""`modstream detect`: a JSON line in, a detector.results-shaped line out, exit 0."""

from __future__ import annotations

import json
from pathlib import Path

from modstream.contract import parse
from modstream.detectors.detect_cli import run
from modstream.testing.media import GENERATED, encode


def test_images_and_a_corrupt_file(tmp_path: Path) -> None:
    good, bad = tmp_path / "noise.png", tmp_path / "broken.png"
    good.write_bytes(encode(GENERATED["noise"]))
    bad.write_bytes(b"\x89PNG\r\n\x1a\n truncated")
    lines = tmp_path / "in.jsonl"
    lines.write_text(
        "\n".join(json.dumps({"path": str(p)}) for p in (good, bad, tmp_path / "missing.png"))
        + "\nnot json\n"
    )
    out: list[str] = []
    assert run("nsfw_image", lines, out.append) == 0
    records = [json.loads(line) for line in out]
    assert [r["status"] for r in records] == ["ok", "error", "error", "error"]
    for record in records:
        parse("detector.results", json.dumps(record))  # the contract's shape
    assert 0.0 <= records[0]["scores"]["nsfw"] <= 1.0


def test_texts(tmp_path: Path) -> None:
    lines = tmp_path / "in.jsonl"
    lines.write_text(json.dumps({"text": "have a lovely day"}) + "\n")
    out: list[str] = []
    assert run("offensive_text", lines, out.append) == 0
    [record] = [json.loads(line) for line in out]
    assert record["detector"] == "offensive_text" and record["scores"]["offensive"] < 0.5
