"""JSON Schema export of the contract: one file per topic under modstream/contract/json/."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter
from pydantic.json_schema import JsonSchemaMode

from modstream.contract.registry import INPUT_TOPICS, OUTPUT_TOPICS

JSON_DIR = Path(__file__).resolve().parent / "json"


def render() -> dict[str, str]:
    """File name -> JSON text for every topic's record, as `export` would write it."""
    files: dict[str, str] = {}
    modes: tuple[tuple[dict[str, TypeAdapter[Any]], JsonSchemaMode], ...] = (
        (INPUT_TOPICS, "validation"),
        (OUTPUT_TOPICS, "serialization"),
    )
    for topics, mode in modes:
        for topic, adapter in topics.items():
            schema = adapter.json_schema(mode=mode)
            schema = {
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "$id": f"modstream/{topic}.schema.json",
                "x-topic": topic,
                "x-direction": "input" if mode == "validation" else "output",
                **schema,
            }
            files[f"{topic}.schema.json"] = json.dumps(schema, indent=2, sort_keys=True) + "\n"
    return files


def export(directory: Path = JSON_DIR) -> list[Path]:
    """Write every schema file (and remove ones no topic produces any more)."""
    directory.mkdir(parents=True, exist_ok=True)
    wanted = render()
    for old in directory.glob("*.schema.json"):
        if old.name not in wanted:
            old.unlink()
    written = []
    for name, text in sorted(wanted.items()):
        path = directory / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def stale(directory: Path = JSON_DIR) -> list[str]:
    """Names of schema files that differ from (or are missing against) a fresh export."""
    wanted = render()
    problems = []
    for name, text in sorted(wanted.items()):
        path = directory / name
        if not path.exists():
            problems.append(f"{name}: missing")
        elif path.read_text(encoding="utf-8") != text:
            problems.append(f"{name}: differs from the models")
    for old in sorted(directory.glob("*.schema.json")):
        if old.name not in wanted:
            problems.append(f"{old.name}: no topic produces it")
    return problems
