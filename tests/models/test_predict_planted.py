"""Zero-shot prediction end to end: train on a toy graph, then a brand-new
entity whose description is an animal's name must get that animal's planted
food as its top ``likes`` tail (and the animal as the top head of the food)."""

from __future__ import annotations

from pathlib import Path

import pytest

import textkg
from textkg.models.presets import get_preset
from textkg.pipeline.job import run
from textkg.training.config import DataConfig, RunConfig, TrainConfig

ANIMALS = [
    "cat",
    "dog",
    "horse",
    "cow",
    "sheep",
    "goat",
    "pig",
    "duck",
    "tiger",
    "lion",
    "bear",
    "wolf",
    "fox",
    "rabbit",
    "mouse",
    "eagle",
]
FOODS = [
    "fish",
    "bone",
    "hay",
    "grass",
    "clover",
    "weeds",
    "corn",
    "bread",
    "deer",
    "zebra",
    "honey",
    "elk",
    "hen",
    "carrot",
    "cheese",
    "snake",
]


def _toy_graph(root: Path) -> Path:
    root.mkdir()
    ents = [(f"/a/{a}", a) for a in ANIMALS] + [(f"/f/{f}", f) for f in FOODS]
    (root / "entity2text.txt").write_text("".join(f"{e}\t{t}\n" for e, t in ents))
    pairs = [f"/a/{a}\tlikes\t/f/{f}\n" for a, f in zip(ANIMALS, FOODS, strict=True)]
    (root / "train.tsv").write_text("".join(pairs[:12]))
    (root / "dev.tsv").write_text("".join(pairs[12:14]))
    (root / "test.tsv").write_text("".join(pairs[14:]))
    return root


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    base = tmp_path_factory.mktemp("planted")
    data = _toy_graph(base / "toy")
    from dataclasses import replace

    model = replace(get_preset("glove-bow"), dim=32)
    cfg = RunConfig(
        data=DataConfig(dataset=str(data), split="transductive"),
        model=model,
        train=TrainConfig(epochs=60, batch_size=4, lr=0.02, num_negatives=8, eval_every=20),
        model_name="glove-bow",
    )
    out = base / "run"
    run(cfg, out, progress=False)
    return out


@pytest.mark.parametrize("k", [0, 3, 7, 11])
def test_new_entity_gets_its_planted_tail_first(trained_run, k):
    predictor = textkg.load(trained_run)
    out = predictor.predict(
        description=ANIMALS[k], name=f"new {ANIMALS[k]}", relation="likes", direction="tail", top_k=3
    )
    assert out["entity"] == {"name": f"new {ANIMALS[k]}", "description": ANIMALS[k]}
    top = out["predictions"][0]
    assert (top["entity"], top["relation"], top["direction"]) == (f"/f/{FOODS[k]}", "likes", "tail")
    scores = [p["score"] for p in out["predictions"]]
    assert scores == sorted(scores, reverse=True) and len(scores) == 3


def test_new_food_gets_its_planted_head_first(trained_run):
    out = textkg.load(trained_run).predict(description=FOODS[2], relation="likes", direction="head", top_k=1)
    assert out["predictions"][0]["entity"] == f"/a/{ANIMALS[2]}"


def test_predict_input_errors(trained_run):
    predictor = textkg.load(trained_run)
    with pytest.raises(textkg.errors.ConfigError, match="relation"):
        predictor.predict(description="cat", relation="hates")
    with pytest.raises(textkg.errors.ConfigError, match="empty description"):
        predictor.predict(description="  ")
