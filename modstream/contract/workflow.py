"""The workflow version: which moderation workflow (the jobs' operator graphs and the detectors
they call) made a record, so cost and outcomes can be compared across workflows as they are
across policy versions (issue 29 item 5; docs/contract-notes.md, "Workflow version").

`WORKFLOW_FINGERPRINTS` maps each version to the fingerprint of what defined it
(modstream/ops/workflow.py: the moderation and scan jobs' operator uids, the detectors' names,
modalities, labels and adapter versions, the pinned model packages and rules). A change to any
of them changes the fingerprint, and tests/modstream/test_workflow.py fails until a new version
is added here with it: a workflow change cannot keep the old number. Version 1 predates the
fingerprint (the DLQ's constant).
"""

from __future__ import annotations

WORKFLOW_FINGERPRINTS: dict[int, str | None] = {
    1: None,
    2: "eb320b2b5f5fdfe8e5ca49fc3c2b2eee14e0c72f81a213d658c2c2e3155c4309",
    # 3: the readers of text in media registered, ocr_text and speech_text (issue 28), and
    # their model packages pinned (rapidocr-onnxruntime, pocketsphinx).
    3: "39f4a25117e85414e0fc133db0b5c4cd3b6362f637e00c53346b7df86f6b9a89",
    # 4: the text detectors name the language of what they read (issue 28 item 3), with the
    # language identifier's package pinned (py3langid).
    4: "eb5f8b0b49dada0be62f95247cd515d1b0941761e27b87799bc005990f0b4767",
}
WORKFLOW_VERSION = max(WORKFLOW_FINGERPRINTS)
