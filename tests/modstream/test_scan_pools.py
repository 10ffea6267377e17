"""The scan pools (modstream/scanning/pools.py) and the ones the demo runs
(modstream/demo/run.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from modstream.demo.run import _job_options, demo_pools
from modstream.scanning import pools as scan_pools


def upload(content_id: str, modality: str) -> dict[str, Any]:
    return {
        "topic": "content.versions",
        "value": {"type": "upsert", "content_id": content_id, "modality": modality},
    }


def test_the_shipped_pools_serve_every_modality_once() -> None:
    served = [m for pool in scan_pools.POOLS for m in pool.modalities]
    assert sorted(served) == sorted(scan_pools.MODALITIES)


def test_the_demo_runs_the_pools_of_the_modalities_it_gives_real_content() -> None:
    lines = [upload("t", "text"), upload("i", "image"), upload("v", "video"), upload("a", "audio")]
    assert [p.name for p in demo_pools(lines, {"t", "i"})] == ["text", "image"]
    assert [p.name for p in demo_pools(lines, {"t", "i", "a"})] == ["text", "image", "av"]


def test_the_demos_scan_job_gets_one_pool_option_each() -> None:
    pools = scan_pools.serving(["text", "video"])
    options = _job_options(Path("p"), Path("m"), real=True, pools=pools)["scan"]
    assert options[:4] == ["--pool", "text=text", "--pool", "av=video,audio"]
