"""The data officer's six questions are answered in the first screen of docs/privacy.md, one bolded bullet
each, and what those bullets state is what the code does (issue 53, item 2: the default δ stood 1,400 words
down the page, no page said that there is no default ε, nor who marks statements confidential, nor which
command checks a bundle, and the worked example's δ = 10⁻⁵ read like a default)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
import torch

from textkg.cli.main import main
from textkg.release import BUNDLE_CONTENTS, NEVER_RELEASED, bundle_contents
from textkg.training.config import PrivacyConfig
from textkg.training.private_training import UNDECLARED_SIZE, PrivateTraining

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "privacy.md"
#: what a reader sees first, "roughly the first 40 lines after the title": the title, the two-line
#: introduction, the heading and the six bullets (today they end at line 42)
FIRST_SCREEN = 44

#: question → (a pattern that the bullet's bold lead matches, phrases the bullet must state)
QUESTIONS = {
    "the unit protected, and group privacy": (
        r"\bunit\b",
        [
            "one statement",
            "--privacy full",
            "--privacy confidential",
            "group",
            "k·ε",
            "k·e^{(k−1)ε}·δ",
            "For patient data use `--privacy-unit entity",
        ],
    ),
    "ε and δ, and their defaults": (
        r"no default ε",
        ["--target-epsilon", "--noise-multiplier", "1/(10·N̄)", "--private-size", "--sample-rate", "--delta",
         "`simulation`", "`error: "],
    ),
    "what is public, and who decides what is confidential": (
        r"who decides what is confidential",
        ["textkg train", "--privacy full", "--privacy confidential", "--confidential-relations",
         "--confidential-fraction", "--public-entities", "descriptions", "public_inputs"],
    ),
    "what the bundle holds and what never leaves": (
        r"^What a release bundle contains$",
        ["BUNDLE_CONTENTS", bundle_contents(), *(f"`{name}`" for name in NEVER_RELEASED)],
    ),
    "how to check it": (
        r"textkg account --from",
        ["textkg account --from DIR", "bundle", "privacy.json", "exits 1", "rdp", "pld"],
    ),
    "what is not covered": (
        r"not covered",
        ["descriptions", "entity membership", "vocabulary", "Timing", "wall times", "Federation",
         "declared size", "--partition files"],
    ),
}  # fmt: skip


def _flat(text: str) -> str:
    return " ".join(text.split())


def _first_screen() -> str:
    return "\n".join(PAGE.read_text(encoding="utf-8").splitlines()[:FIRST_SCREEN])


def _bullets() -> list[tuple[str, str]]:
    """``(bold lead, whole bullet)`` of each bolded bullet of the summary that the first screen shows."""
    screen = _first_screen()
    assert "\n## In five minutes" in screen, "the summary does not start in the first screen"
    summary = screen.split("\n## In five minutes", 1)[1]
    out = []
    for item in ("\n" + summary).split("\n- **")[1:]:
        lead, _, _ = item.partition("**")
        out.append((_flat(lead).rstrip("."), _flat(item)))
    return out


def _answer(question: str) -> str:
    pattern, _ = QUESTIONS[question]
    found = [body for lead, body in _bullets() if re.search(pattern, lead)]
    assert len(found) == 1, f"{question!r}: {len(found)} bolded bullets in the first screen lead with /{pattern}/"
    return found[0]


def test_the_first_screen_is_six_bolded_bullets_one_per_question():
    assert len(_bullets()) == len(QUESTIONS) == 6
    answers = [_answer(question) for question in QUESTIONS]
    assert len(set(answers)) == 6  # six different bullets


@pytest.mark.parametrize("question", list(QUESTIONS))
def test_each_answer_states_its_facts(question):
    body = _answer(question)
    missing = [phrase for phrase in QUESTIONS[question][1] if _flat(phrase) not in body]
    assert not missing, f"{question!r}: the bullet does not say {missing}"


def test_the_bundle_answer_names_the_whole_list_the_release_copies():
    body = _answer("what the bundle holds and what never leaves")
    named = set(re.findall(r"`([\w.*/]+\.(?:safetensors|json|md|pt))`", body))
    assert named == {name for name, _ in BUNDLE_CONTENTS} | set(NEVER_RELEASED)


_SUPERSCRIPT = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹", "0123456789")


def test_the_unit_answer_s_group_figures_follow_the_formula():
    """Dwork & Roth 2014, §2.3: (ε, δ)-DP gives (kε, k·e^{(k−1)ε}·δ) to a group of k; the bullet's figures
    for k = 5 and k = 10 are that, to the digits it prints."""
    body = _answer("the unit protected, and group privacy")
    eps = float(re.search(r"in a run at ε = ([\d.]+)", body).group(1))
    figures = re.findall(r"k = (\d+) gives \(([\d.]+), ≈ ([\d.]+)(?:·10([⁰¹²³⁴⁵⁶⁷⁸⁹]+))?·δ\)", body)
    assert {int(k) for k, *_ in figures} == {5, 10}
    for k, group_eps, mantissa, power in figures:
        k = int(k)
        assert float(group_eps) == pytest.approx(k * eps)
        factor = float(mantissa) * 10 ** int(power.translate(_SUPERSCRIPT) or 0)
        digits = len(mantissa.replace(".", "").lstrip("0"))
        assert f"{factor:.{digits}g}" == f"{k * math.exp((k - 1) * eps):.{digits}g}", (k, factor)


def _private_training(cfg: PrivacyConfig, *, batch_size: int = 2) -> PrivateTraining:
    triples = torch.tensor([[0, 0, 1], [1, 0, 2], [2, 0, 3], [3, 0, 0]])
    return PrivateTraining(
        cfg,
        private_triples=triples,
        batch_size=batch_size,
        planned_epochs=1,
        entity_pool=torch.arange(4),
        loss_fn=None,
        num_negatives=1,
        trained_parameters=[],
    )


def test_the_default_delta_is_the_code_s():
    """The page's formula, read off the page, is the δ a run without ``--delta`` gets, for either declared size."""
    body = _answer("ε and δ, and their defaults")
    match = re.search(r"δ defaults to 1/\((\d+)·N̄\)", body)
    assert match, "the bullet does not state the default δ as 1/(c·N̄)"
    c = int(match.group(1))
    for cfg, declared in (
        (PrivacyConfig(mode="full", noise_multiplier=1.0, private_size=1000), 1000),
        (PrivacyConfig(mode="full", noise_multiplier=1.0, sample_rate=0.01), 2 / 0.01),  # N̄ = B/q, B = 2
    ):
        run = _private_training(cfg)
        assert run.delta == pytest.approx(1 / (c * declared), rel=1e-12)
        assert run.label()[0] == "dp"
        run.close()
    run = _private_training(PrivacyConfig(mode="full", noise_multiplier=1.0, private_size=1000, delta=1e-7))
    assert run.delta == 1e-7 and "`--delta` sets it" in body
    run.close()


def test_without_a_declared_size_the_run_is_labelled_simulation_as_the_page_says():
    body = _answer("ε and δ, and their defaults")
    assert "With neither `--private-size` nor `--sample-rate`" in body and "labelled `simulation`" in body
    run = _private_training(PrivacyConfig(mode="full", noise_multiplier=1.0))
    label, reasons = run.label()
    assert label == "simulation" and UNDECLARED_SIZE in reasons
    assert run.report()["epsilon"] is None and '"epsilon": null' in body
    run.close()


@pytest.mark.parametrize("mode", ["full", "confidential"])
def test_the_quoted_error_is_what_a_run_without_a_budget_prints(mode, tmp_path, capsys):
    """No default ε: ``textkg train --privacy MODE`` without ``--target-epsilon`` or ``--noise-multiplier``
    stops with exit 2, before it writes anything, with the very line the page quotes."""
    match = re.search(r"`(error: [^`]+)`", _answer("ε and δ, and their defaults"))
    assert match, "the bullet quotes no error line"
    out = tmp_path / "run"
    argv = ["train", "--dataset", str(ROOT / "tests" / "fixtures" / "tiny_blp"), "--privacy", mode]
    argv += ["--private-size", "100", "--out", str(out)]
    if mode == "confidential":
        argv += ["--confidential-fraction", "0.5"]
    assert main(argv) == 2
    assert capsys.readouterr().err.strip() == match.group(1)
    assert not out.exists()


def test_the_worked_example_s_delta_is_never_read_as_a_default():
    """δ = 10⁻⁵ only appears where the text says it is an example, on the page's summary and in the README."""
    summary = PAGE.read_text(encoding="utf-8").split("## In five minutes", 1)[1].split("\n## ", 1)[0]
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    readme = readme.split("## Privacy: what is and is not claimed", 1)[1].split("\n## ", 1)[0]
    assert "10⁻⁵" not in _first_screen()
    for where, text in (("docs/privacy.md", summary), ("README.md", readme)):
        paragraphs = [p for p in re.split(r"\n\s*\n|\n- ", text) if "δ = 10⁻⁵" in p]
        assert paragraphs, where
        for paragraph in paragraphs:
            sentence = next(s for s in re.split(r"(?<=[.;])\s", _flat(paragraph)) if "δ = 10⁻⁵" in s)
            assert "for the example" in sentence or "not a default" in sentence, f"{where}: {sentence!r}"


def test_the_readme_paragraph_names_the_defaults_the_decider_and_the_check():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = _flat(readme.split("## Privacy: what is and is not claimed", 1)[1].split("\n## ", 1)[0])
    for phrase in ("no default ε", "1/(10·N̄)", "--confidential-relations", "textkg account --from", "six answers"):
        assert phrase in section, phrase
