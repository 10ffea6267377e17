"""Cost-ordered checks through `modstream replay` (issue 12, item 4): an upload that matches a
BLOCK hash bank gets no scan request, and image models wait for media_check."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from modstream.demo.workload import generate, write
from modstream.testing.policies import GLOBAL_YAML
from modstream.testing.stack import run_replay

pytestmark = pytest.mark.integration
KEY = "scan-cost-test-key"
BANKED = "banked-1"  # modstream/demo/workload.py: the upload matching its known_bad entry


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    base = tmp_path_factory.mktemp("scan-cost")
    events = base / "events.jsonl"
    policy = yaml.safe_load(GLOBAL_YAML.read_text())
    write(generate(seed=5, versions=30, policy_document=policy, policy_key=KEY.encode()), events)
    return run_replay(
        events, base / "out", GLOBAL_YAML, KEY, timeout_s=400, extra_args=("--scan-requests",)
    )


def test_an_upload_matching_the_bank_gets_no_scan_request(
    outputs: dict[str, list[dict[str, Any]]],
) -> None:
    scan_topics = [topic for topic in outputs if topic.startswith("scan.requests.")]
    assert scan_topics, f"no scan request file among {sorted(outputs)}"
    scan_requests = [r for topic in scan_topics for r in outputs[topic]]
    assert scan_requests, "replay produced no scan request at all"
    assert [r for r in scan_requests if r["content_id"] == BANKED] == []
    banked = [d for d in outputs["moderation.decisions"] if d["content_id"] == BANKED]
    assert banked and banked[-1]["outcome"] == "BLOCK" and banked[-1]["state"] == "blocked"


def test_no_image_model_request_comes_before_its_media_check_passed(
    outputs: dict[str, list[dict[str, Any]]],
) -> None:
    images = outputs.get("scan.requests.image", [])
    checks = {(r["content_id"], r["content_version"]): r["ts"] for r in images
              if r["detector"] == "media_check"}  # fmt: skip
    for request in images:
        if request["detector"] == "nsfw_image":
            key = (request["content_id"], request["content_version"])
            assert key not in checks or checks[key] < request["ts"], request
