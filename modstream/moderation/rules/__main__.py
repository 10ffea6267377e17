"""`python -m modstream.moderation.rules`: rewrite the rule table in docs/architecture.md."""

from __future__ import annotations

from modstream.moderation.rules import ARCHITECTURE, write_docs

if __name__ == "__main__":
    changed = write_docs()
    print(f"{ARCHITECTURE}: {'rewritten' if changed else 'unchanged'}")
