"""Split invariants as properties over random small graphs, and determinism."""

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from textkg.data import KnowledgeGraph, make_split
from textkg.data.splits import default_min_relation_count

REPO = Path(__file__).resolve().parents[2]


@st.composite
def graphs(draw, typed=False):
    n = draw(st.integers(6, 40))
    r = draw(st.integers(1, 4))
    m = draw(st.integers(n, 6 * n))
    seed = draw(st.integers(0, 2**31 - 1))
    g = torch.Generator().manual_seed(seed)
    triples = torch.stack(
        [torch.randint(n, (m,), generator=g), torch.randint(r, (m,), generator=g), torch.randint(n, (m,), generator=g)],
        dim=1,
    )
    triples = torch.unique(triples, dim=0)
    types = tuple("a" if i % 3 else "b" for i in range(n)) if typed else None
    return KnowledgeGraph(
        name="random",
        entities=tuple(f"e{i}" for i in range(n)),
        relations=tuple(f"r{j}" for j in range(r)),
        entity_names=tuple(f"e{i}" for i in range(n)),
        entity_descriptions=tuple(f"entity {i}" for i in range(n)),
        relation_texts=tuple(f"r{j}" for j in range(r)),
        triples={"all": triples},
        entity_types=types,
    )


def _rows(t):
    return {tuple(x) for x in t.tolist()}


def _ents(t):
    return set(t[:, [0, 2]].flatten().tolist())


SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
fractions = st.sampled_from([0.1, 0.2, 0.3])


@SETTINGS
@given(kg=graphs(), seed=st.integers(0, 1000), vf=fractions, tf=fractions, min_neighbors=st.integers(1, 3))
def test_inductive_invariants(kg, seed, vf, tf, min_neighbors):
    s = make_split(kg, "inductive", seed=seed, valid_fraction=vf, test_fraction=tf, min_neighbors=min_neighbors)
    tr, va, te = (set(x.tolist()) for x in (s.train_entities, s.valid_entities, s.test_entities))
    assert not (tr & va) and not (tr & te) and not (va & te)
    assert _ents(s.train) <= tr if len(s.train) else True
    assert not (_ents(s.train) & (va | te)) if len(s.train) else True
    for x in (s.valid_entities, s.test_entities, s.train_entities):
        assert torch.equal(x, torch.sort(x).values)
    if len(s.valid):
        assert _ents(s.valid) <= tr | va
        assert all(h in va or t in va for h, _, t in s.valid.tolist())
    if len(s.test):
        assert all(h in te or t in te for h, _, t in s.test.tolist())
        assert _ents(s.test) <= tr | va | te
    # every triple of the graph lands in exactly one set (the protocol drops none)
    sets = [_rows(s.train), _rows(s.valid), _rows(s.test)]
    assert sum(map(len, sets)) == len(_rows(kg.all_triples()))
    assert set().union(*sets) == _rows(kg.all_triples())
    assert _rows(s.filter_triples) == _rows(kg.all_triples())
    # relations of held-out triples keep training triples
    held = torch.cat([s.valid, s.test])
    if len(held):
        assert set(held[:, 1].tolist()) <= set(s.train[:, 1].tolist())
    assert s.extra["held_out"]["test"] <= s.extra["requested"]["test"]


@SETTINGS
@given(kg=graphs(typed=True), seed=st.integers(0, 1000))
def test_inductive_holds_out_only_requested_types(kg, seed):
    s = make_split(kg, "inductive", seed=seed, valid_fraction=0.2, test_fraction=0.2, holdout_types=["b"])
    held = torch.cat([s.valid_entities, s.test_entities]).tolist()
    assert all(kg.entity_types[i] == "b" for i in held)


@SETTINGS
@given(kg=graphs(), seed=st.integers(0, 1000), vf=fractions, tf=fractions)
def test_transductive_invariants(kg, seed, vf, tf):
    s = make_split(kg, "transductive", seed=seed, valid_fraction=vf, test_fraction=tf)
    sets = [_rows(s.train), _rows(s.valid), _rows(s.test)]
    assert sum(map(len, sets)) == len(_rows(kg.all_triples()))
    assert set().union(*sets) == _rows(kg.all_triples())
    seen_e, seen_r = _ents(s.train), set(s.train[:, 1].tolist())
    for t in (s.valid, s.test):
        if len(t):
            assert _ents(t) <= seen_e and set(t[:, 1].tolist()) <= seen_r


@SETTINGS
@given(kg=graphs(), seed=st.integers(0, 1000), kind=st.sampled_from(["transductive", "inductive"]))
def test_same_seed_same_split(kg, seed, kind):
    a, b = make_split(kg, kind, seed=seed), make_split(kg, kind, seed=seed)
    for name in ("train", "valid", "test", "train_entities", "valid_entities", "test_entities", "filter_triples"):
        assert torch.equal(getattr(a, name), getattr(b, name))


def test_default_min_relation_count_scales():
    assert default_min_relation_count(310_116) == 100
    assert default_min_relation_count(19_868) == 19
    assert default_min_relation_count(200) == 1


_HASH_SCRIPT = r"""
import hashlib, sys, torch
from textkg.data import load_dataset, make_split
h = hashlib.sha256()
for args in ([sys.argv[1]], [sys.argv[2]], ["hpo-small"]):
    kg = load_dataset(*args)
    h.update("\n".join(kg.entities + kg.entity_descriptions).encode())
    for kind in ("transductive", "inductive"):
        s = make_split(kg, kind, seed=3)
        for t in (s.train, s.valid, s.test, s.train_entities, s.valid_entities, s.test_entities):
            h.update(t.numpy().tobytes())
print(h.hexdigest())
"""


def test_split_independent_of_pythonhashseed(tiny_blp, tiny_blp_ind, tmp_path):
    digests = []
    for hash_seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=hash_seed, TEXTKG_CACHE_DIR=str(tmp_path / f"cache{hash_seed}"))
        out = subprocess.run(
            [sys.executable, "-c", _HASH_SCRIPT, str(tiny_blp), str(tiny_blp_ind)],
            env=env,
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        )
        digests.append(out.stdout.strip())
    assert digests[0] == digests[1] and len(digests[0]) == 64
    assert hashlib.sha256(b"").hexdigest() != digests[0]
