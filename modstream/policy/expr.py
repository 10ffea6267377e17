"""The `when` language: parsed with Python's `ast`, checked against a whitelist, compiled to
closures. Policy text is never evaluated as Python: only the node types below are accepted, and
each becomes a small closure over constants.

Grammar (docs/policy-language.md):  `and or not`, comparisons (chains allowed), `in` / `not in`
over a literal tuple, numbers, strings, `true` / `false`; names `modality surface region audience
mime_type language account_risk size_bytes report_count`; functions `score(detector, label)`,
`unknown(detector)`, `hash_match(bank)` with string-literal arguments.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Collection
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from modstream.contract.common import UNDETERMINED
from modstream.policy.guards import Guard, guards_of, score_key

MAX_EXPRESSION_CHARS = 4_000
MAX_NODES = 400

STR, NUM, BOOL = "text", "number", "condition"

FIELD_TYPES: dict[str, str] = {
    "modality": STR,
    "surface": STR,
    "region": STR,
    "audience": STR,
    "mime_type": STR,
    "language": STR,
    "account_risk": NUM,
    "size_bytes": NUM,
    "report_count": NUM,
}
# name -> (argument count, result type); every argument is a string literal.
FUNCTIONS: dict[str, tuple[int, str]] = {
    "score": (2, NUM),
    "unknown": (1, BOOL),
    "hash_match": (1, BOOL),
}
LITERALS = {"true": True, "false": False}

_ORDER_OPS: dict[type[ast.cmpop], Callable[[Any, Any], bool]] = {
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}
_EQUALITY_OPS: dict[type[ast.cmpop], Callable[[Any, Any], bool]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
}
OP_TEXT = {
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.In: "in",
    ast.NotIn: "not in",
}


class EvalContext:
    """What an expression can read: the content's fields and the evidence view."""

    __slots__ = (
        "account_risk",
        "audience",
        "hash_matches",
        "language",
        "mime_type",
        "modality",
        "region",
        "report_count",
        "scores",
        "size_bytes",
        "surface",
        "unknown",
    )

    def __init__(
        self,
        *,
        modality: str = "",
        surface: str = "",
        region: str = "",
        audience: str = "",
        mime_type: str = "",
        account_risk: float = 0.0,
        size_bytes: int = 0,
        report_count: float = 0,
        language: str = UNDETERMINED,
        scores: dict[tuple[str, str], float] | None = None,
        unknown: Collection[str] = frozenset(),
        hash_matches: Collection[str] = frozenset(),
    ) -> None:
        self.modality = modality
        self.surface = surface
        self.region = region
        self.audience = audience
        self.mime_type = mime_type
        self.account_risk = account_risk
        self.size_bytes = size_bytes
        self.report_count = report_count
        self.language = language
        self.scores = scores or {}
        self.unknown = unknown
        self.hash_matches = hash_matches


Evaluator = Callable[[EvalContext], Any]


class ExpressionError(ValueError):
    """A `when` outside the language; says where (1-based line and column) and what."""

    def __init__(self, message: str, line: int = 1, column: int = 1) -> None:
        super().__init__(f"line {line}, column {column}: {message}")
        self.line = line
        self.column = column
        self.detail = message


@dataclass(frozen=True)
class CompiledExpression:
    text: str
    evaluate: Evaluator
    detectors: frozenset[str]
    fields: frozenset[str]
    banks: frozenset[str]
    guards: tuple[Guard, ...] | None  # alternatives; None: no cheap necessary condition


def _fail(node: ast.AST, message: str) -> ExpressionError:
    return ExpressionError(message, getattr(node, "lineno", 1), getattr(node, "col_offset", 0) + 1)


_NODE_NAMES = {
    ast.Attribute: "attribute access",
    ast.Subscript: "subscripts",
    ast.Lambda: "lambdas",
    ast.ListComp: "comprehensions",
    ast.SetComp: "comprehensions",
    ast.DictComp: "comprehensions",
    ast.GeneratorExp: "comprehensions",
    ast.BinOp: "arithmetic",
    ast.IfExp: "if-expressions",
    ast.NamedExpr: "assignments",
    ast.Await: "await",
    ast.Yield: "yield",
    ast.Starred: "unpacking",
    ast.List: "lists",
    ast.Dict: "dicts",
    ast.Set: "sets",
    ast.JoinedStr: "f-strings",
}


class _Compiler:
    def __init__(self, known_banks: Collection[str] | None) -> None:
        self.known_banks = known_banks
        self.detectors: set[str] = set()
        self.fields: set[str] = set()
        self.banks: set[str] = set()

    def compile(self, node: ast.expr) -> tuple[Evaluator, str]:
        if isinstance(node, ast.BoolOp):
            return self._bool_op(node)
        if isinstance(node, ast.UnaryOp):
            return self._unary(node)
        if isinstance(node, ast.Compare):
            return self._compare(node)
        if isinstance(node, ast.Call):
            return self._call(node)
        if isinstance(node, ast.Name):
            return self._name(node)
        if isinstance(node, ast.Constant):
            value, kind = self._constant(node)
            return (lambda _c, v=value: v), kind
        if isinstance(node, ast.Tuple):
            raise _fail(node, "a tuple is only allowed after `in` / `not in`")
        name = _NODE_NAMES.get(type(node), type(node).__name__)
        raise _fail(node, f"{name} not allowed")

    def _bool_op(self, node: ast.BoolOp) -> tuple[Evaluator, str]:
        parts = [self._condition(value) for value in node.values]
        if isinstance(node.op, ast.And):
            if len(parts) == 2:
                first, second = parts
                return (lambda c: bool(first(c)) and bool(second(c))), BOOL
            return (lambda c: all(part(c) for part in parts)), BOOL
        if len(parts) == 2:
            first, second = parts
            return (lambda c: bool(first(c)) or bool(second(c))), BOOL
        return (lambda c: any(part(c) for part in parts)), BOOL

    def _condition(self, node: ast.expr) -> Evaluator:
        evaluate, kind = self.compile(node)
        if kind != BOOL:
            raise _fail(node, f"expected a condition, got a {kind}")
        return evaluate

    def _unary(self, node: ast.UnaryOp) -> tuple[Evaluator, str]:
        if isinstance(node.op, ast.Not):
            operand = self._condition(node.operand)
            return (lambda c: not operand(c)), BOOL
        if isinstance(node.op, ast.USub | ast.UAdd) and isinstance(node.operand, ast.Constant):
            value, kind = self._constant(node.operand)
            if kind == NUM:
                value = -value if isinstance(node.op, ast.USub) else value
                return (lambda _c, v=value: v), NUM
        raise _fail(node, "only `not`, and a sign before a number, are allowed")

    def _constant(self, node: ast.Constant) -> tuple[Any, str]:
        value = node.value
        if isinstance(value, bool) or value is None:
            raise _fail(node, f"{value!r} is not allowed (write true / false)")
        if isinstance(value, int | float):
            if not math.isfinite(value):
                raise _fail(node, "numbers must be finite")
            return value, NUM
        if isinstance(value, str):
            return value, STR
        raise _fail(node, f"{type(value).__name__} literals are not allowed")

    def _name(self, node: ast.Name) -> tuple[Evaluator, str]:
        if node.id in LITERALS:
            value = LITERALS[node.id]
            return (lambda _c, v=value: v), BOOL
        kind = FIELD_TYPES.get(node.id)
        if kind is None:
            known = ", ".join(sorted(FIELD_TYPES))
            raise _fail(node, f"unknown name {node.id!r} (known: {known}, true, false)")
        self.fields.add(node.id)
        return attrgetter(node.id), kind

    def _string_args(self, node: ast.Call, name: str) -> list[str]:
        arity, _ = FUNCTIONS[name]
        if node.keywords:
            raise _fail(node, f"{name}() takes no keyword arguments")
        if len(node.args) != arity:
            raise _fail(
                node,
                f"{name}() takes {arity} argument{'s' if arity > 1 else ''}, got {len(node.args)}",
            )
        values = []
        for arg in node.args:
            if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value):
                raise _fail(arg, f"{name}() arguments must be non-empty string literals")
            values.append(arg.value)
        return values

    def _call(self, node: ast.Call) -> tuple[Evaluator, str]:
        if isinstance(node.func, ast.Attribute):
            raise _fail(node.func, "attribute access not allowed")
        if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
            raise _fail(node, "only score(), unknown() and hash_match() may be called")
        name = node.func.id
        args = self._string_args(node, name)
        if name == "score":
            key = (args[0], args[1])
            self.detectors.add(args[0])
            return (lambda c: c.scores.get(key, 0.0)), NUM
        if name == "unknown":
            detector = args[0]
            self.detectors.add(detector)
            return (lambda c: detector in c.unknown), BOOL
        bank = args[0]
        if self.known_banks is not None and bank not in self.known_banks:
            raise _fail(node.args[0], f"unknown hash bank {bank!r} (not in hash_banks)")
        self.banks.add(bank)
        return (lambda c: bank in c.hash_matches), BOOL

    def _compare(self, node: ast.Compare) -> tuple[Evaluator, str]:
        if any(isinstance(op, ast.Is | ast.IsNot) for op in node.ops):
            raise _fail(node, "`is` / `is not` are not allowed (use == / !=)")
        if any(isinstance(op, ast.In | ast.NotIn) for op in node.ops):
            return self._membership(node)
        left, left_kind = self.compile(node.left)
        steps, constants = self._steps(node, left_kind)
        if len(steps) == 1 and constants[0] is not None:
            # The common shape, `score(d, l) >= 0.9` or `surface == 'dm'`: one closure, no calls
            # for the constant side.
            compare, value = steps[0][0], constants[0][0]
            key = score_key(node.left)
            if key is not None:
                return (lambda c: compare(c.scores.get(key, 0.0), value)), BOOL
            return (lambda c: compare(left(c), value)), BOOL
        return _chain(left, steps), BOOL

    def _membership(self, node: ast.Compare) -> tuple[Evaluator, str]:
        """`x in (...)` / `x not in (...)`, alone (never chained)."""
        if len(node.ops) != 1:
            raise _fail(node, "`in` / `not in` cannot be chained with other comparisons")
        left, left_kind = self.compile(node.left)
        members = self._members(node.comparators[0], left_kind)
        if isinstance(node.ops[0], ast.In):
            return (lambda c: left(c) in members), BOOL
        return (lambda c: left(c) not in members), BOOL

    def _steps(
        self, node: ast.Compare, left_kind: str
    ) -> tuple[list[tuple[Callable[[Any, Any], bool], Evaluator]], list[tuple[Any] | None]]:
        """Each comparison of a (possibly chained) compare, type-checked: its operator and
        right side, and the right side's literal value where it is one."""
        steps: list[tuple[Callable[[Any, Any], bool], Evaluator]] = []
        constants: list[tuple[Any] | None] = []
        for op, comparator in zip(node.ops, node.comparators, strict=True):
            right, right_kind = self.compile(comparator)
            if left_kind != right_kind:
                raise _fail(comparator, f"cannot compare a {left_kind} with a {right_kind}")
            if type(op) in _ORDER_OPS:
                if left_kind != NUM:
                    raise _fail(
                        comparator, f"`{OP_TEXT[type(op)]}` needs numbers, got a {left_kind}"
                    )
                steps.append((_ORDER_OPS[type(op)], right))
            else:
                steps.append((_EQUALITY_OPS[type(op)], right))
            constants.append(_literal(comparator))
            left_kind = right_kind
        return steps, constants

    def _members(self, node: ast.expr, kind: str) -> frozenset[Any]:
        if not isinstance(node, ast.Tuple):
            raise _fail(node, "`in` needs a literal tuple, e.g. ('a', 'b') or ('a',)")
        values = set()
        for element in node.elts:
            if not isinstance(element, ast.Constant):
                raise _fail(element, "tuple elements must be literals")
            value, element_kind = self._constant(element)
            if element_kind != kind:
                raise _fail(element, f"a {element_kind} in a tuple tested against a {kind}")
            values.add(value)
        return frozenset(values)


def _literal(node: ast.expr) -> tuple[Any] | None:
    """(value,) when node is a literal number, string or true/false; else None."""
    if isinstance(node, ast.Constant) and not isinstance(node.value, bool):
        return (node.value,)
    if isinstance(node, ast.UnaryOp) and isinstance(node.operand, ast.Constant):
        value: Any = node.operand.value
        return (-value if isinstance(node.op, ast.USub) else value,)
    if isinstance(node, ast.Name) and node.id in LITERALS:
        return (LITERALS[node.id],)
    return None


def _chain(left: Evaluator, steps: list[tuple[Callable[[Any, Any], bool], Evaluator]]) -> Evaluator:
    """Python's chained comparison: a < b < c means a < b and b < c, each side evaluated once."""

    def evaluate(c: EvalContext) -> bool:
        current = left(c)
        for op, right in steps:
            following = right(c)
            if not op(current, following):
                return False
            current = following
        return True

    return evaluate


def compile_expression(text: str, known_banks: Collection[str] | None = None) -> CompiledExpression:
    """Parse, check and compile one `when`; raise ExpressionError naming the position."""
    if not isinstance(text, str) or not text.strip():
        raise ExpressionError("empty condition")
    if len(text) > MAX_EXPRESSION_CHARS:
        raise ExpressionError(f"longer than {MAX_EXPRESSION_CHARS} characters")
    source = text.strip()
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError as error:
        raise ExpressionError(
            f"syntax error: {error.msg}", error.lineno or 1, error.offset or 1
        ) from None
    except (RecursionError, MemoryError, ValueError):
        raise ExpressionError("expression too deeply nested or malformed") from None
    for count, _ in enumerate(ast.walk(tree), start=1):
        if count > MAX_NODES:
            raise ExpressionError(f"more than {MAX_NODES} syntax nodes")
    compiler = _Compiler(known_banks)
    try:
        evaluate, kind = compiler.compile(tree.body)
        guards = guards_of(tree.body)
    except RecursionError:
        raise ExpressionError("expression too deeply nested") from None
    if kind != BOOL:
        raise _fail(tree.body, f"the condition is a {kind}, not true/false")
    return CompiledExpression(
        text=text,
        evaluate=evaluate,
        detectors=frozenset(compiler.detectors),
        fields=frozenset(compiler.fields),
        banks=frozenset(compiler.banks),
        guards=guards,
    )
