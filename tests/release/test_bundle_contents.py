"""One list of what a bundle holds, built by the code that builds bundles and quoted by every page
(issue 53, item 3: README, docs/privacy.md twice, docs/usage.md and the model card each listed it
differently, each missing a different file)."""

from __future__ import annotations

import fnmatch
from pathlib import Path

import pytest

import textkg.release as rel

ROOT = Path(__file__).resolve().parents[2]
#: page → how many times it lists the bundle's files
PAGES = {"README.md": 1, "docs/privacy.md": 2, "docs/usage.md": 1}


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_the_list_is_the_whitelist_the_release_copies():
    assert [name for name, _ in rel.BUNDLE_CONTENTS] == list(dict.fromkeys(name for name, _ in rel.BUNDLE_CONTENTS))
    assert {name for name, _ in rel.BUNDLE_CONTENTS} == set(rel.WHITELIST)
    assert not set(rel.NEVER_RELEASED) & set(rel.WHITELIST)


@pytest.mark.parametrize("page, times", sorted(PAGES.items()))
def test_every_page_quotes_the_list_word_for_word(page, times):
    text = _flat((ROOT / page).read_text(encoding="utf-8"))
    assert text.count(_flat(rel.bundle_contents())) == times, f"{page} does not quote textkg.release.bundle_contents()"


def test_the_model_card_quotes_it():
    metrics = {"privacy": None, "test": {}, "dataset": "toy"}
    assert rel.bundle_contents() in rel.model_card(metrics, {"model_name": "transe"}, "none")


def test_every_name_a_bundle_may_hold_matches_one_entry(tmp_path):
    """The list covers each file a release can write (patterns included), and nothing in it is never-released."""
    for name in ("best_model.safetensors", "char_lms/forward.safetensors", "char_lms/forward.json", "RELEASE.json"):
        assert any(fnmatch.fnmatch(name, pattern) for pattern, _ in rel.BUNDLE_CONTENTS), name
    for name in rel.NEVER_RELEASED:
        assert not any(fnmatch.fnmatch(name, pattern) for pattern, _ in rel.BUNDLE_CONTENTS), name
