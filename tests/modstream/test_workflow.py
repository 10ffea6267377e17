"""The workflow version follows the workflow (modstream/contract/workflow.py,
modstream/ops/workflow.py): this tree's fingerprint is the current version's, so changing the jobs'
operators or the detectors fails here until a new version is added with the new fingerprint; and
each part of the definition moves the fingerprint."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from modstream.contract.dlq import dead_letter
from modstream.contract.workflow import WORKFLOW_FINGERPRINTS, WORKFLOW_VERSION
from modstream.ops import workflow

# The versions released so far: an entry may be added to modstream/contract/workflow.py, never
# changed.
RELEASED = {
    2: "eb320b2b5f5fdfe8e5ca49fc3c2b2eee14e0c72f81a213d658c2c2e3155c4309",
    3: "39f4a25117e85414e0fc133db0b5c4cd3b6362f637e00c53346b7df86f6b9a89",
    4: "eb5f8b0b49dada0be62f95247cd515d1b0941761e27b87799bc005990f0b4767",
}


def test_this_trees_workflow_is_the_current_version() -> None:
    found = workflow.fingerprint()
    assert found == WORKFLOW_FINGERPRINTS[WORKFLOW_VERSION], (
        f"the workflow changed (fingerprint {found}): add version {WORKFLOW_VERSION + 1} with "
        "it to modstream/contract/workflow.py WORKFLOW_FINGERPRINTS (and to RELEASED here)"
    )


def test_released_versions_keep_their_fingerprints_and_none_repeats() -> None:
    assert RELEASED.items() <= WORKFLOW_FINGERPRINTS.items()
    assert WORKFLOW_VERSION == max(WORKFLOW_FINGERPRINTS) == max(RELEASED)
    known = [found for found in WORKFLOW_FINGERPRINTS.values() if found is not None]
    assert len(known) == len(set(known))


def _changed(described: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    changed = copy.deepcopy(described)
    target = changed
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return changed


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("operator_uids", "moderation"), ["moderation_source", "moderation_moderate_v2"]),
        (("operator_uids", "scan"), []),
        (("detectors", "nsfw_image", "adapter"), "a2"),
        (("detectors", "offensive_text", "labels"), ["offensive", "hate"]),
        (("model_pins",), [["alt-profanity-check", "1.9.2"]]),
        (("model_files", "udfs/rules/malware.yar"), "0" * 64),
    ],
)
def test_every_part_of_the_definition_moves_the_fingerprint(
    path: tuple[str, ...], value: Any
) -> None:
    described = workflow.definition()
    assert workflow.fingerprint(_changed(described, path, value)) != workflow.fingerprint(described)


def test_the_definition_reads_the_jobs_operators_and_every_registered_detector() -> None:
    described = workflow.definition()
    assert {"moderation_moderate", "moderation_decode"} <= set(
        described["operator_uids"]["moderation"]
    )
    assert "scan" in described["operator_uids"]["scan"]
    assert set(described["detectors"]) == {
        "nsfw_image",
        "offensive_text",
        "media_check",
        "ocr_text",
        "speech_text",
    }
    assert ("pocketsphinx", "5.1.1") in described["model_pins"]
    assert ("py3langid", "0.4.0") in described["model_pins"]  # the language identifier


def test_dead_letters_carry_the_current_workflow_version() -> None:
    letter = dead_letter("content.versions", "k", "{}", "schema", ts=1, error_class="schema")
    assert letter.workflow_version == WORKFLOW_VERSION == 4
