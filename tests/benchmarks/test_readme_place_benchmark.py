"""``benchmarks/readme_place.py --terms N`` (issue 54): the held-out terms it draws, the OBO it writes for
them (names and definitions only, escaped, no ``is_a``) and the feature cache it hides their texts from."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from bench_module import load_benchmark

ODD = 'odd ! name {x} \\ "q"'
KG = SimpleNamespace(
    entities=("X:0", "X:1", "X:2", "X:3", "X:4", "X:5"),
    entity_names=("root", ODD, "plain", "bare", "other", "fifth"),
    entity_descriptions=(
        "root: the top",
        f'{ODD}: a "quoted" \\ definition ! {{y}}',
        "plain: text",
        "bare. Synonyms: naked. A kind of: root; plain.",  # no definition: the graph's text names its parents
        "other: o",
        "fifth: f",
    ),
)
TRUE_PARENTS = {1: frozenset({0}), 2: frozenset({0}), 3: frozenset({0, 2}), 4: frozenset({0}), 5: frozenset({4})}


@pytest.fixture(scope="module")
def bench():
    return load_benchmark("readme_place.py", "readme_place_bench")  # puts benchmarks/ on sys.path


def test_the_draw_is_n_held_out_terms_fixed_by_the_seed(bench):
    drawn = bench.draw_terms(KG, TRUE_PARENTS, 3, seed=0)
    assert len(drawn) == 3 and set(drawn) <= {"X:1", "X:2", "X:3", "X:4", "X:5"}
    assert drawn == bench.draw_terms(KG, TRUE_PARENTS, 3, seed=0)
    assert len({tuple(bench.draw_terms(KG, TRUE_PARENTS, 3, seed=s)) for s in range(10)}) > 1
    every = bench.draw_terms(KG, TRUE_PARENTS, 5, seed=0)
    assert every["X:3"]["true_parents"] == ["X:0", "X:2"] and every["X:5"]["true_parents"] == ["X:4"]
    for n in (0, 6):
        with pytest.raises(SystemExit, match="5 test terms"):
            bench.draw_terms(KG, TRUE_PARENTS, n, seed=0)


def test_the_obo_reads_back_as_names_and_definitions_without_is_a(bench, tmp_path):
    import real_additions

    from textkg.place import read_terms_obo

    drawn = bench.draw_terms(KG, TRUE_PARENTS, 5, seed=1)
    real_additions.write_obo(drawn, tmp_path / "terms.obo")
    text = (tmp_path / "terms.obo").read_text(encoding="utf-8")
    assert "is_a" not in text and "A kind of" not in text and "naked" not in text
    terms = {t.id: t for t in read_terms_obo(tmp_path / "terms.obo")}
    assert list(terms) == ["X:1", "X:2", "X:3", "X:4", "X:5"]
    assert not any(t.listed_parents for t in terms.values())
    assert terms["X:1"].name == ODD and terms["X:1"].definition == 'a "quoted" \\ definition ! {y}'
    assert (terms["X:2"].name, terms["X:2"].definition) == ("plain", "text")
    assert (terms["X:3"].name, terms["X:3"].definition) == ("bare", "")  # placed from its name alone


def test_the_cache_copy_lacks_only_the_given_texts_and_leaves_the_cache_alone(bench, tmp_path, monkeypatch):
    from textkg.encoders.cache import text_key

    root = tmp_path / "cache"
    folder = root / "features" / "enc"
    folder.mkdir(parents=True)
    (folder / "identity.txt").write_text("enc\n")
    (root / "datasets").mkdir()
    keys = np.frombuffer(b"".join(text_key(t) for t in ("a", "b", "c")), dtype=np.uint8).reshape(3, 32)
    np.save(folder / "s.keys.npy", keys)
    np.save(folder / "s.vec.npy", np.arange(6, dtype=np.float32).reshape(3, 2))
    before = {p: p.read_bytes() for p in folder.iterdir()}
    monkeypatch.setenv("TEXTKG_CACHE_DIR", str(root))
    copy = bench.cache_without({"b", "not cached"}, tmp_path / "copy")
    mirror = copy / "features" / "enc"
    assert np.load(mirror / "s.keys.npy").tobytes() == text_key("a") + text_key("c")
    assert np.load(mirror / "s.vec.npy").tolist() == [[0.0, 1.0], [4.0, 5.0]]
    assert (copy / "datasets").resolve() == (root / "datasets").resolve()
    assert {p: p.read_bytes() for p in folder.iterdir()} == before
