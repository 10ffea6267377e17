"""SQL text as `modstream sql` handles it, without a JVM: files split into statements, each
statement's place in its file, and Flink's errors turned into one readable message.

Why here and not in Flink: a file of ready queries holds several statements (a view, then the
query), and Flink's TableEnvironment takes one at a time; an error must name the file and line
the analyst wrote, not the line within one statement or a Java stack trace.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

# Java exceptions that mean the SQL itself is wrong (parse or validation): exit code 2.
SQL_ERRORS = (
    "SqlParserException",
    "SqlParseException",
    "ValidationException",
    "SqlValidateException",
    "SqlValidatorException",
    "CalciteContextException",
    "TableNotExistException",
)
_POSITION = re.compile(r"\b(line|Line) (\d+), column (\d+)")
_NOT_FOUND = re.compile(r"Object '([^']+)' not found|Table '?`?([^'`\s]+)`?'? (?:was )?not found")
_RANGE = re.compile(r"^From line \d+, column \d+ to line \d+, column \d+: ")
_AT = re.compile(r" at line \d+, column \d+")
_MAX_EXPECTED = 8  # "Was expecting one of:" alternatives shown
# Whitespace and comments before a statement's first token (not part of the statement).
_LEADING = re.compile(r"^(?:\s+|--[^\n]*|/\*.*?\*/)*", re.DOTALL)
_OPENING = re.compile(r"^(?:Caused by: )?([\w$.]+(?:Exception|Error|Throwable))(?::\s?(.*))?$")


@dataclass(frozen=True)
class Statement:
    text: str
    source: str  # the file, or "query" for the command line's
    line: int  # where the statement starts in its source, 1-based
    column: int


@dataclass(frozen=True)
class Script:
    source: str
    title: str  # the header comment: what the file answers
    statements: tuple[Statement, ...]


def read_script(path: Path) -> Script:
    """A file of statements; OSError and UnicodeDecodeError are the caller's to report."""
    text = path.read_text(encoding="utf-8")
    return Script(str(path), header(text) or path.stem, tuple(split(text, str(path))))


def inline_script(text: str) -> Script:
    return Script("query", header(text), tuple(split(text, "query")))


def header(text: str) -> str:
    """The leading `--` comment lines of `text`, joined: what a ready query answers."""
    lines: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped.startswith("--"):
            if stripped or lines:
                break
            continue
        lines.append(stripped[2:].strip())
    return " ".join(line for line in lines if line)


def split(text: str, source: str) -> list[Statement]:
    """The `;`-separated statements of `text` (quotes, backticks and comments respected); a
    part holding only comments is no statement."""
    statements: list[Statement] = []
    start, index, length = 0, 0, len(text)
    while index < length:
        char = text[index]
        if char in "'`\"":
            index = _past_quote(text, index, char)
        elif text.startswith("--", index):
            index = _line_end(text, index)
        elif text.startswith("/*", index):
            end = text.find("*/", index + 2)
            index = length if end < 0 else end + 2
        elif char == ";":
            _add(statements, text, start, index, source)
            start = index = index + 1
        else:
            index += 1
    _add(statements, text, start, length, source)
    return statements


def _past_quote(text: str, index: int, quote: str) -> int:
    """The index after the quoted part opened at `index` (a doubled quote stays inside)."""
    index += 1
    while index < len(text):
        if text[index] == quote:
            if text.startswith(quote * 2, index):
                index += 2
                continue
            return index + 1
        index += 1
    return index


def _line_end(text: str, index: int) -> int:
    end = text.find("\n", index)
    return len(text) if end < 0 else end


def _add(statements: list[Statement], text: str, start: int, end: int, source: str) -> None:
    part = text[start:end]
    if not _without_comments(part).strip():
        return
    offset = start + len(part) - len(_LEADING.sub("", part))
    part = text[offset:end]
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    statements.append(Statement(part.strip(), source, line, column))


def _without_comments(part: str) -> str:
    part = re.sub(r"/\*.*?\*/", " ", part, flags=re.DOTALL)
    return re.sub(r"--[^\n]*", " ", part)


@dataclass(frozen=True)
class Failure:
    """A Java exception as the analyst should read it."""

    message: str
    sql: bool  # the statement is wrong (exit 2), rather than its run (exit 1)
    missing_table: str | None = None


def explain(trace: str, statement: Statement | None = None) -> Failure:
    """One readable message from a Java stack trace (`Exception: message`, `at …` lines,
    `Caused by: …`): the top message for a wrong statement, with positions made file
    positions; the top and the root cause for a failed run. No class names, no frames."""
    causes = _messages(trace)
    if not causes:
        return Failure(trace.strip().splitlines()[0] if trace.strip() else "unknown error", False)
    sql = any(name.endswith(SQL_ERRORS) for name, _ in causes)
    message = _trimmed(causes[0][1])
    if sql:
        found = _NOT_FOUND.search(" ".join(text for _, text in causes))
        missing = (found.group(1) or found.group(2)) if found else None
        where = _place(statement, message)
        return Failure(f"{where}{_without_positions(message)}", True, missing)
    root = next((_trimmed(text) for _, text in reversed(causes) if text.strip()), "")
    deepest = causes[-1][0].rsplit(".", 1)[-1]
    if not causes[-1][1].strip() and len(causes) > 1:
        root = f"{deepest} after {root}" if root else deepest
    if root and root not in message:
        message = f"{message} (cause: {root})"
    where = f"{statement.source}:{statement.line}: " if statement else ""
    return Failure(where + message, False)


def _messages(trace: str) -> list[tuple[str, str]]:
    """(exception class, message) of the exception and each cause, outermost first."""
    found: list[tuple[str, list[str]]] = []
    for raw in trace.splitlines():
        line = raw.strip()
        if line.startswith(("at ", "... ")) or (not line and not found):
            continue
        opening = _OPENING.match(line)
        if opening and (raw.startswith("Caused by:") or not found):
            found.append((opening.group(1), [opening.group(2) or ""]))
        elif found and not raw.startswith("\t"):
            found[-1][1].append(line)
    return [(name, "\n".join(lines).strip()) for name, lines in found]


def _trimmed(message: str) -> str:
    """A message without Flink's wrapper prefixes and with at most a few expected tokens."""
    lines = message.splitlines()
    if "Was expecting" in message:
        cut = next(i for i, line in enumerate(lines) if "Was expecting" in line)
        alternatives = [line.strip().rstrip(" .") for line in lines[cut + 1 :] if line.strip()]
        shown = ", ".join(alternatives[:_MAX_EXPECTED])
        more = " …" if len(alternatives) > _MAX_EXPECTED else ""
        lines = [*lines[:cut], f"Expected one of: {shown}{more}"]
    text = " ".join(line.strip() for line in lines if line.strip())
    for prefix in ("SQL validation failed. ", "SQL parse failed. "):
        text = text.removeprefix(prefix)
    return text


def _without_positions(message: str) -> str:
    """The message without the statement-relative positions `_place` gives as file ones."""
    message = _RANGE.sub("", message, count=1)
    return _AT.sub("", message)


def _place(statement: Statement | None, message: str) -> str:
    """`FILE:LINE:COLUMN: ` for the position the message gives (its first one), in the
    statement's file; the statement's own start when the message gives none."""
    if statement is None:
        return ""
    position = _POSITION.search(message)
    if position is None:
        return f"{statement.source}:{statement.line}: "
    line, column = int(position.group(2)), int(position.group(3))
    if line == 1:
        column += statement.column - 1
    return f"{statement.source}:{statement.line + line - 1}:{column}: "
