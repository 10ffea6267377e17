"""Rule-level differences between two policy documents, for authors and the audit trail."""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import Any

from modstream.policy.expr import OP_TEXT


def _thresholds(when: str) -> dict[str, list[float]]:
    """`score('d', 'l') >= 0.9` -> {"score('d', 'l') >=": [0.9]}; empty when unparsable."""
    try:
        tree = ast.parse(when.strip(), mode="eval")
    except SyntaxError:
        return {}
    found: dict[str, list[float]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            left, right = node.left, node.comparators[0]
            if isinstance(right, ast.Constant) and isinstance(right.value, int | float):
                op = OP_TEXT.get(type(node.ops[0]))
                if op:
                    found.setdefault(f"{ast.unparse(left)} {op}", []).append(float(right.value))
    return found


def _rule_changes(rule_id: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    changes = []
    old_when, new_when = str(old.get("when", "")), str(new.get("when", ""))
    if old_when != new_when:
        before, after = _thresholds(old_when), _thresholds(new_when)
        same_shape = set(before) == set(after) and all(
            len(before[k]) == len(after[k]) for k in before
        )
        if same_shape and before:
            for term in sorted(before):
                for was, now in zip(before[term], after[term], strict=True):
                    if was != now:
                        changes.append(f"~ {rule_id}: threshold {term} {was:g} -> {now:g}")
        if not changes:
            changes.append(f"~ {rule_id}: when {old_when!r} -> {new_when!r}")
    for name in sorted(set(old) | set(new)):
        if name in ("id", "when"):
            continue
        if old.get(name) != new.get(name):
            changes.append(f"~ {rule_id}: {name} {old.get(name)!r} -> {new.get(name)!r}")
    return changes


def diff(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """Lines `+ rule`, `- rule`, `~ rule: …` and `~ section …`, in a stable order."""

    def by_id(document: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
        rules = document.get("rules") or []
        return {str(rule.get("id")): rule for rule in rules if isinstance(rule, Mapping)}

    old_rules, new_rules = by_id(old), by_id(new)
    lines = [
        f"+ {rule_id}: {new_rules[rule_id].get('outcome')} when {new_rules[rule_id].get('when')!r}"
        for rule_id in new_rules
        if rule_id not in old_rules
    ]
    lines += [f"- {rule_id}" for rule_id in old_rules if rule_id not in new_rules]
    for rule_id in old_rules:
        if rule_id in new_rules:
            lines += _rule_changes(rule_id, old_rules[rule_id], new_rules[rule_id])
    for section in sorted((set(old) | set(new)) - {"rules", "version"}):
        if old.get(section) != new.get(section):
            lines.append(f"~ section {section} changed")
    return lines
