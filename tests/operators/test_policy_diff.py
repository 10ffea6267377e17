"""Rule-level policy diffs."""

from __future__ import annotations

from modstream.policy.diff import diff
from modstream.testing.policies import global_document


def test_added_removed_changed_threshold_and_sections() -> None:
    old = global_document(1)
    new = global_document(2)
    new["rules"] = [rule for rule in new["rules"] if rule["id"] != "malware"]
    new["rules"][0]["outcome"] = "BLOCK"
    blocking = next(rule for rule in new["rules"] if rule["id"] == "nsfw-block-public")
    blocking["when"] = blocking["when"].replace("0.95", "0.9")
    new["rules"].append({"id": "spam-text", "when": "report_count >= 5", "outcome": "PENDING"})
    new["default"] = "PROVISIONAL_ALLOW"
    lines = diff(old, new)
    assert "+ spam-text: PENDING when 'report_count >= 5'" in lines
    assert "- malware" in lines
    assert "~ nsfw-block-public: threshold score('nsfw_image', 'nsfw') >= 0.95 -> 0.9" in lines
    assert "~ media-corrupt: outcome 'PENDING' -> 'BLOCK'" in lines
    assert "~ section default changed" in lines
    assert diff(old, global_document(2)) == []  # the version number alone is no difference


def test_a_rewritten_condition_is_shown_whole() -> None:
    old = global_document(1)
    new = global_document(2)
    new["rules"][0]["when"] = "hash_match('known_bad')"
    assert diff(old, new) == [
        "~ malware: when \"score('media_check', 'malware') >= 0.5\" -> \"hash_match('known_bad')\""
    ]
