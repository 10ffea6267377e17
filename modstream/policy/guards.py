"""Guards: a cheap necessary condition for a rule's `when` to hold, found at compile time, so
the compiled policy indexes rules by them (modstream/policy/compiler.py) and evaluation reads
only the rules that can match. A guard never hides a match: when none is certain, there is none.
"""

from __future__ import annotations

import ast
from typing import Any

# ("score", (detector, label), threshold) | ("modality", value) | ("bank", name).
Guard = tuple[Any, ...]

# `0.9 <= score(...)` read as `score(...) >= 0.9`; `1 >= score(...)` is an upper bound: no guard.
_MIRRORED: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.LtE: ast.GtE,
    ast.Lt: ast.Gt,
    ast.GtE: ast.LtE,
    ast.Gt: ast.Lt,
}


def score_key(node: ast.expr) -> tuple[str, str] | None:
    """(detector, label) when `node` is `score('detector', 'label')`, else None."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "score"
        and len(node.args) == 2
        and all(isinstance(a, ast.Constant) for a in node.args)
    ):
        return (node.args[0].value, node.args[1].value)  # type: ignore[attr-defined]
    return None


def _number(node: ast.expr) -> float | None:
    if (
        isinstance(node, ast.Constant)
        and isinstance(node.value, int | float)
        and not isinstance(node.value, bool)
    ):
        return float(node.value)
    return None


def guards_of(node: ast.expr) -> tuple[Guard, ...] | None:
    """Alternatives, one of which must hold for `node` to be true; None when there are none."""
    if isinstance(node, ast.BoolOp):
        return _bool_guards(node)
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        return _score_guard(node) or _modality_guard(node)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "hash_match"
        and node.args
    ):
        return (("bank", node.args[0].value),)  # type: ignore[attr-defined]
    return None


def _bool_guards(node: ast.BoolOp) -> tuple[Guard, ...] | None:
    """`or`: every alternative's guards (none if one has none); `and`: the most selective
    conjunct's, fewest alternatives first, then the highest score threshold."""
    parts = [guards_of(value) for value in node.values]
    if isinstance(node.op, ast.Or):
        if any(part is None for part in parts):
            return None
        return tuple(g for part in parts for g in part)  # type: ignore[union-attr]
    known = [part for part in parts if part is not None]
    if not known:
        return None
    return min(
        known,
        key=lambda gs: (len(gs), -max((g[2] for g in gs if g[0] == "score"), default=0.0)),
    )


def _score_guard(node: ast.Compare) -> tuple[Guard, ...] | None:
    """`score(d, l) >= t` (t > 0) or `> t` (t >= 0), either way round: a score guard. Returns
    None for a comparison that is not a score threshold, or one with no lower bound."""
    left, right = node.left, node.comparators[0]
    op: type[ast.cmpop] = type(node.ops[0])
    key, number = score_key(left), _number(right)
    if key is None:  # threshold on the left: 0.9 <= score(...)
        key, number = score_key(right), _number(left)
        op = _MIRRORED.get(op, op)
    if key is None or number is None:
        return None
    if (op is ast.GtE and number > 0) or (op is ast.Gt and number >= 0):
        return (("score", key, number),)
    return None


def _modality_guard(node: ast.Compare) -> tuple[Guard, ...] | None:
    """`modality == 'image'` or `modality in ('image', 'video')`: a guard per modality."""
    left, right, op = node.left, node.comparators[0], node.ops[0]
    if not (isinstance(left, ast.Name) and left.id == "modality"):
        return None
    if isinstance(op, ast.Eq) and isinstance(right, ast.Constant):
        return (("modality", right.value),)
    if isinstance(op, ast.In) and isinstance(right, ast.Tuple):
        values = tuple(("modality", e.value) for e in right.elts if isinstance(e, ast.Constant))
        return values or None
    return None
