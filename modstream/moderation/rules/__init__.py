"""The contract's rules, a module each, and the table that says where each is implemented and
which tests prove it (docs/architecture.md, "Contract rules: where each is implemented and
proved").

Every module in `RULE_MODULES` opens its docstring with the rule in a line, then a paragraph
`Contract: docs/CONTRACT.md, "<section>" ...` quoting or citing the contract, then `Proved by:`
and one `tests/<file>.py::<test>` a line. `render_table` builds the Markdown table from those
docstrings alone, so the table cannot drift from the code: tests/operators/test_rule_table.py
checks that the table in the docs is the one rendered, that every test named exists, and that
every module of this package is listed. `python -m modstream.moderation.rules` rewrites the table
in the docs.

The moderation rules live in this package; a rule enforced elsewhere (signatures, idempotent
enforcement, the DLQ, policy versions, sanctions, admission) keeps its module and the same header.
The modules are named here, not imported, so listing them creates no import ring: the package is
imported by the step's own modules.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path

from modstream.core.native import source

RULE_MODULES = (
    "modstream.moderation.rules.fast_gate",
    "modstream.moderation.rules.evidence",
    "modstream.moderation.rules.deadline",
    "modstream.moderation.rules.provisional",
    "modstream.moderation.decide",
    "modstream.moderation.rules.reports",
    "modstream.moderation.rules.appeals",
    "modstream.moderation.rules.reviews",
    "modstream.moderation.rules.human_input",
    "modstream.moderation.rules.reevaluation",
    "modstream.moderation.rules.deletion",
    "modstream.moderation.rules.retention",
    "modstream.moderation.rules.retro",
    "modstream.moderation.admission",
    "modstream.trust.signing",
    "modstream.policy.document",
    "modstream.policy.store",
    "modstream.enforcement.apply",
    "modstream.enforcement.sanctions",
    "modstream.contract.dlq",
)
BEGIN = "<!-- rules:begin -->"
END = "<!-- rules:end -->"
PROJECT_ROOT = Path(__file__).resolve().parents[3]
CONTRACT = PROJECT_ROOT / "docs" / "CONTRACT.md"
ARCHITECTURE = PROJECT_ROOT / "docs" / "architecture.md"


@dataclass(frozen=True)
class RuleHeader:
    """What a rule module's docstring says of the rule: its name, the contract sections it
    cites, and the tests that prove it."""

    module: str
    path: str  # relative to the project root
    rule: str
    sections: tuple[str, ...]
    tests: tuple[str, ...]


def module_path(module: str) -> Path:
    """The source file of `module`, found without importing it (beside its compiled form when
    mypyc built one: modstream/core/native.py)."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise LookupError(f"rule module {module} not found")
    origin = Path(spec.origin)
    return origin if origin.suffix == ".py" else source(module)


def contract_sections(contract: str) -> dict[str, str]:
    """The names a rule may cite, each with how the table shows it: the contract's headings,
    and its v1.1 additions' bold items (shown as `v1.1: <item>`)."""
    headings = [line.lstrip("#").strip() for line in contract.splitlines() if line[:2] == "##"]
    items = re.findall(r"^- \*\*(.+?)\.?\*\*", contract, flags=re.MULTILINE)
    named = {heading: heading.split(" (", 1)[0] for heading in headings}
    return named | {item: f"v1.1: {item}" for item in items}


def _cited(quoted: list[str], sections: dict[str, str]) -> tuple[str, ...]:
    """The sections `quoted` names (a whole heading, or the heading before its parenthesis:
    `"moderation.reports"` for "moderation.reports (user reports; ...)"), as the table shows
    them; "v1.1 additions" only when no item of it is named."""
    shown = dict(sections)
    shown |= {show: show for name, show in sections.items() if not show.startswith("v1.1: ")}
    cited = list(dict.fromkeys(shown[q] for q in quoted if q in shown))
    if any(name.startswith("v1.1: ") for name in cited):
        cited = [name for name in cited if name != "v1.1 additions"]
    return tuple(cited)


def header(module: str, sections: dict[str, str]) -> RuleHeader:
    """The rule header of `module`'s docstring; ValueError when it has none."""
    path = module_path(module)
    docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    paragraphs = docstring.split("\n\n")
    first = " ".join(paragraphs[0].split())
    rule = first.split(": ", 1)[0]
    contract = next((p for p in paragraphs if p.startswith("Contract: docs/CONTRACT.md")), None)
    proved = next((p for p in paragraphs if p.startswith("Proved by:")), None)
    if contract is None or proved is None:
        raise ValueError(f"{module}: the docstring has no `Contract:` or `Proved by:` paragraph")
    quoted = [" ".join(q.split()) for q in re.findall(r'"([^"]+)"', contract)]
    cited = _cited(quoted, sections)
    if not cited:
        raise ValueError(f"{module}: the `Contract:` paragraph cites no section of the contract")
    tests = tuple(line.strip() for line in proved.splitlines()[1:] if line.strip())
    if not tests:
        raise ValueError(f"{module}: `Proved by:` names no test")
    relative = path.resolve().relative_to(PROJECT_ROOT).as_posix()
    return RuleHeader(module, relative, rule, cited, tests)


def headers(contract: str | None = None) -> list[RuleHeader]:
    """Every rule module's header, in `RULE_MODULES` order."""
    text = CONTRACT.read_text(encoding="utf-8") if contract is None else contract
    sections = contract_sections(text)
    return [header(module, sections) for module in RULE_MODULES]


def render_table(contract: str | None = None) -> str:
    """The Markdown table: rule, the contract sections it cites, its module, its tests."""
    rows = [
        "| rule | contract (docs/CONTRACT.md) | module | proved by |",
        "|---|---|---|---|",
    ]
    for rule in headers(contract):
        cited = "; ".join(f'"{section}"' for section in rule.sections)
        tests = "<br>".join(f"`{test}`" for test in rule.tests)
        rows.append(f"| {rule.rule} | {cited} | `{rule.path}` | {tests} |")
    return "\n".join(rows) + "\n"


def splice(document: str, table: str) -> str:
    """`document` with the text between the markers replaced by `table`."""
    start, end = document.index(BEGIN) + len(BEGIN), document.index(END)
    return document[:start] + "\n" + table + document[end:]


def write_docs(path: Path = ARCHITECTURE) -> bool:
    """Rewrite the table in `path`; whether it changed."""
    before = path.read_text(encoding="utf-8")
    after = splice(before, render_table())
    if after != before:
        path.write_text(after, encoding="utf-8")
    return after != before
