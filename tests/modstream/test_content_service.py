"""The reference Content Service's media file names: no content id reaches outside its folder."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from modstream.enforcement.content_service import media_name


def test_a_plain_id_keeps_its_readable_name() -> None:
    assert media_name("c-1", 3) == "c-1.v3"
    assert media_name("run_7.item-2", 1) == "run_7.item-2.v1"


@pytest.mark.parametrize(
    "content_id",
    ["../../etc/passwd", "..", ".", "a/b", "a\\b", "nul\x00byte", "ｃ-1", "x" * 256, "-" + "é"],
)
def test_a_hostile_id_is_named_by_its_digest(content_id: str) -> None:
    name = media_name(content_id, 1)
    assert name.startswith("id-") and name.endswith(".v1") and len(name) == 3 + 64 + 3


@given(content_id=st.text(min_size=1, max_size=256), version=st.integers(1, 2**63 - 1))
def test_every_name_is_one_file_inside_its_folder(content_id: str, version: int) -> None:
    name = media_name(content_id, version)
    root = Path("/media/public")
    assert (root / name).parent == root
    assert "/" not in name and "\x00" not in name and name not in (".", "..")
    assert len(name.encode("utf-8")) <= 255
