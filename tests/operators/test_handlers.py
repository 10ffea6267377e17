"""The dispatch table of the moderation step (modstream/moderation/step.py); the rules
themselves are tested through `step` in tests/operators/test_moderation.py."""

from __future__ import annotations

from modstream.moderation.step import HANDLERS, KEYED_TOPICS, RETRO


def test_every_keyed_topic_has_one_handler_and_retro_none() -> None:
    # RETRO goes to `on_retro` before any state is made, so it has no entry in the table.
    assert set(HANDLERS) == set(KEYED_TOPICS)
    assert RETRO not in HANDLERS
