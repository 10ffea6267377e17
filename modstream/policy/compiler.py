"""Policy compilation, once per version: each rule's `when` compiled (modstream/policy/expr.py)
and the rules indexed by their guards, so evaluation (modstream/policy/evaluate.py) reads only the
rules whose cheap necessary condition can hold.
"""

from __future__ import annotations

from dataclasses import dataclass

from modstream.policy.document import PolicyDocument, PolicyError, Rule
from modstream.policy.expr import CompiledExpression, ExpressionError, compile_expression


@dataclass(frozen=True)
class CompiledRule:
    index: int
    rule: Rule
    condition: CompiledExpression


def compile_rules(document: PolicyDocument) -> list[CompiledRule]:
    """Every rule's condition compiled, or PolicyError naming each bad or duplicate rule."""
    problems: list[str] = []
    seen: set[str] = set()
    compiled: list[CompiledRule] = []
    for index, rule in enumerate(document.rules):
        where = f"rule {rule.id!r} (rules[{index}])"
        if rule.id in seen:
            problems.append(f"{where}: duplicate rule id")
        seen.add(rule.id)
        try:
            condition = compile_expression(rule.when, known_banks=document.hash_banks.keys())
        except ExpressionError as error:
            problems.append(f"{where}.when: {error}")
            continue
        compiled.append(CompiledRule(index, rule, condition))
    if problems:
        raise PolicyError(problems)
    return compiled


# Rule index: rules with no guard, by modality, by hash bank, and per (detector, label) the
# score thresholds ascending with their rule indices.
RuleIndex = tuple[
    list[int],
    dict[str, list[int]],
    dict[str, list[int]],
    dict[tuple[str, str], tuple[list[float], list[int]]],
]


def index_rules(rules: list[CompiledRule]) -> RuleIndex:
    """Index rules by their guards (modstream/policy/guards.py), so `candidates` reads only
    the rules whose cheap necessary condition can hold."""
    always: list[int] = []
    by_modality: dict[str, list[int]] = {}
    by_bank: dict[str, list[int]] = {}
    thresholds: dict[tuple[str, str], list[tuple[float, int]]] = {}
    for compiled in rules:
        guards = compiled.condition.guards
        if guards is None:
            always.append(compiled.index)
            continue
        for guard in guards:
            if guard[0] == "score":
                thresholds.setdefault(guard[1], []).append((guard[2], compiled.index))
            elif guard[0] == "modality":
                by_modality.setdefault(guard[1], []).append(compiled.index)
            else:
                by_bank.setdefault(guard[1], []).append(compiled.index)
    by_score = {
        key: ([t for t, _ in sorted(entries)], [i for _, i in sorted(entries)])
        for key, entries in thresholds.items()
    }
    return always, by_modality, by_bank, by_score
