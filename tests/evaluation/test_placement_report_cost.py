"""The placement report's cheaper paths (issue 54, item 3) give what the code they replace gave.

Each oracle below is the function as it was at 885c64e (copied, named in its docstring): the rows of a
sparse matrix (``pairwise_scorer``), ``_close_at_1``, ``standardise``'s scaling; and ``evaluate_combined``
with an added component ranks the tuned weighting on validation once, not twice.
"""

from __future__ import annotations

import pytest
import torch

from textkg.evaluation.placement import combination
from textkg.evaluation.placement.methods import _close_at_1, placement_queries
from textkg.evaluation.placement.text import SparseRows, dense_rows, pairwise_scorer
from textkg.evaluation.scoring import _MIN_STD, standardise


def _old_pairwise(queries, candidates):
    """``pairwise_scorer`` at 885c64e (without its candidate cache, which changes no number)."""

    def score(terms, cands):
        rows = torch.index_select(candidates, 0, cands.long()).coalesce()
        return torch.sparse.mm(rows, dense_rows(queries, terms).T).T.contiguous()

    return score


def _random_sparse(g, n, v, density):
    dense = (torch.rand(n, v, generator=g) < density) * torch.randn(n, v, generator=g)
    return dense.to_sparse().coalesce()


@pytest.mark.parametrize("seed", range(30))
def test_sparse_rows_and_pairwise_scores_equal_index_select(seed):
    g = torch.Generator().manual_seed(seed)
    n, v = int(torch.randint(1, 50, (1,), generator=g)), int(torch.randint(1, 40, (1,), generator=g))
    queries, candidates = _random_sparse(g, n, v, 0.2), _random_sparse(g, n, v, 0.3)
    terms = torch.randint(0, n, (int(torch.randint(1, 9, (1,), generator=g)),), generator=g)
    cands = torch.randint(0, n, (int(torch.randint(1, 30, (1,), generator=g)),), generator=g)  # unsorted, repeated
    rows = SparseRows(candidates)
    want = torch.index_select(candidates, 0, cands).coalesce()
    got = rows.sparse(cands)
    assert got.is_coalesced()
    assert torch.equal(got.indices(), want.indices()) and torch.equal(got.values(), want.values())
    assert torch.equal(SparseRows(queries).dense(terms), dense_rows(queries, terms))
    eps = torch.finfo(torch.float32).eps  # the same sums; a BLAS may vectorise a contiguous operand differently
    torch.testing.assert_close(
        pairwise_scorer(queries, candidates)(terms, cands),
        _old_pairwise(queries, candidates)(terms, cands),
        rtol=8 * eps,
        atol=8 * eps,
    )


class _Queries:
    def __init__(self, terms, close):
        self.terms, self.close = terms, close


def _old_close_at_1(scores, queries, q, column, rows, cols):
    """``_close_at_1`` at 885c64e."""
    masked = scores.double().clone()
    masked[rows, cols] = float("-inf")
    top = masked == masked.max(1, keepdim=True).values
    near = torch.zeros_like(top)
    for row, i in enumerate(q.tolist()):
        c = column[torch.tensor(sorted(queries.close[int(queries.terms[i])]), dtype=torch.long)]
        near[row, c[c >= 0]] = True
    near[rows, cols] = False
    return (top & near).sum(1).double() / top.sum(1).double()


@pytest.mark.parametrize("seed", range(60))
def test_close_at_1_equals_the_masked_copy(seed):
    g = torch.Generator().manual_seed(seed)
    n, b = int(torch.randint(2, 40, (1,), generator=g)), int(torch.randint(1, 6, (1,), generator=g))
    cands = torch.sort(torch.randperm(n, generator=g)[: int(torch.randint(1, n + 1, (1,), generator=g))]).values
    column = torch.full((n,), -1, dtype=torch.long)
    column[cands] = torch.arange(len(cands))
    scores = torch.round(torch.randn(b, len(cands), generator=g) * 1.5)  # ties at the top
    scores[:, :2] = scores.max() + 1  # filtered entries may hold the maximum
    if seed % 4 == 0:
        scores[0] = float("-inf")  # a row whose every score is -inf: the filtered entries are among its top
    if seed % 3 == 0:
        scores = scores.double()
    close = {
        i: frozenset(torch.randint(0, n, (int(torch.randint(0, 6, (1,), generator=g)),), generator=g).tolist())
        for i in range(b)
    }
    pairs = sorted({(int(r), int(c)) for r, c in zip(torch.randint(0, b, (6,), generator=g), range(6), strict=True)})
    pairs = [(r, c % len(cands)) for r, c in pairs]
    pairs = sorted(set(pairs))
    rows = torch.tensor([r for r, _ in pairs], dtype=torch.long)
    cols = torch.tensor([c for _, c in pairs], dtype=torch.long)
    queries, q = _Queries(torch.arange(b), close), torch.arange(b)
    want = _old_close_at_1(scores, queries, q, column, rows, cols)
    got = _close_at_1(scores, queries, q, column, rows, cols)
    assert torch.equal(got, want)


def _old_standardise(scores, *, dtype, population):
    """``standardise`` at 885c64e (its ``_scaled`` a ``torch.where`` over a quotient and zeros)."""

    def scaled(centred, std):
        return torch.where(std > 0, centred / std.clamp_min(_MIN_STD), torch.zeros_like(centred))

    ruled_out = scores <= torch.finfo(scores.dtype).min if scores.is_floating_point() else None
    s = scores.to(dtype)
    if ruled_out is None or not bool(ruled_out.any()):
        centred = s - s.mean(1, keepdim=True)
        std = centred.pow(2).mean(1, keepdim=True).sqrt() if population else s.std(1, keepdim=True)
        return scaled(centred, std)
    kept = (~ruled_out).to(dtype)
    n = kept.sum(1, keepdim=True)
    values = s.masked_fill(ruled_out, 0.0)
    mean = values.sum(1, keepdim=True) / n.clamp_min(1.0)
    var = ((values - mean) ** 2 * kept).sum(1, keepdim=True) / (n - (0 if population else 1)).clamp_min(1.0)
    return scaled(values - mean, var.sqrt()).masked_fill(ruled_out, torch.finfo(dtype).min)


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("population", [True, False])
def test_standardise_equals_its_old_scaling_bit_for_bit(seed, dtype, population):
    g = torch.Generator().manual_seed(seed)
    x = torch.round(torch.randn(5, 2 + seed, generator=g, dtype=torch.float64) * 3)
    x[0] = x[0, 0]  # a row of ties: all zeros
    if seed % 2:
        x[torch.rand(x.shape, generator=g) < 0.2] = torch.finfo(x.dtype).min  # ruled-out candidates
    new, old = (
        standardise(x, dtype=dtype, population=population),
        _old_standardise(x, dtype=dtype, population=population),
    )
    assert torch.equal(new, old) and torch.equal(new.signbit(), old.signbit())


def _planted_queries():
    from test_placement_grid import planted

    kg, split = planted(3)
    return kg, split, placement_queries(kg, split, which="valid")


def test_an_added_component_ranks_the_tuned_weighting_on_validation_once(monkeypatch):
    """``evaluate_combined`` with ``added`` ranks validation once for the vote setting and once for the chosen
    weighting with the added component (885c64e also ranked the weighting without it, then discarded it)."""
    kg, split, valid = _planted_queries()
    n = kg.num_entities
    test = placement_queries(kg, split, which="test")
    g = torch.Generator().manual_seed(5)
    features = torch.randn(n, 8, generator=g)
    table, extra = torch.randn(n, n, generator=g), torch.randn(n, n, generator=g)
    model = lambda terms, candidates: table[terms][:, candidates]  # noqa: E731
    added = lambda terms, candidates: extra[terms][:, candidates]  # noqa: E731
    description = combination.cosine_scorer(features)
    edges = split.train[:, [0, 2]]
    calls = []
    real = combination.rank_placement
    monkeypatch.setattr(combination, "rank_placement", lambda s, q, **k: calls.append(q is valid) or real(s, q, **k))
    out = combination.evaluate_combined(
        {"model": model, "description": description},
        valid,
        test,
        num_entities=n,
        baselines={"description-nn": description},
        features=features,
        parent_edges=edges,
        votes=combination.DEFAULT_VOTES[:1],
        added=("rerank", added),
    )
    # on validation: the vote setting, the chosen weighting (with the added component), the model, the baseline
    assert calls.count(True) == 4
    chosen = out["placement_selection"]["combined"]
    scorers = {
        "model": model,
        "description": description,
        "vote": combination.neighbour_vote_scorer(features, edges, vote=combination.VoteConfig(**chosen["vote"])),
        "rerank": added,
    }
    want = real(combination.combined_scorer(scorers, chosen["weights"]), valid, num_entities=n)
    assert out["placement_selection"]["valid"]["combined"] == want.to_dict()
    assert chosen["valid_mrr"] == want.mrr


def _old_maxsim(texts, names, fit_on, vectors):
    """``maxsim_scorer`` at 885c64e: every vocabulary word compared with every name word up front (``_matches``),
    every text's best matches gathered (``_best_matches``), then ``pairwise_scorer``."""
    from textkg.evaluation.placement.late import MATCH_BLOCK, THRESHOLD, TOP_WORDS
    from textkg.evaluation.placement.text import TfIdf, name_weights, row_entries, sparse_rows, words

    model = TfIdf.fit([names[i] for i in fit_on.tolist()])
    targets = model.vocabulary
    order = sorted(targets, key=targets.__getitem__)
    known = [vectors.vocabulary[w] for w in order if w in vectors.vocabulary]
    columns = torch.tensor([targets[w] for w in order if w in vectors.vocabulary], dtype=torch.long)
    rows, cols, vals = [], [], []
    y = vectors.vectors[known]
    for start in range(0, len(vectors.vectors) if known else 0, MATCH_BLOCK):
        sim = vectors.vectors[start : start + MATCH_BLOCK] @ y.T
        top, at = sim.topk(min(TOP_WORDS, sim.shape[1]), dim=1)
        keep = top >= THRESHOLD
        rows.append(torch.arange(start, start + len(sim))[:, None].expand_as(top)[keep])
        cols.append(columns[at[keep]])
        vals.append(top[keep].clamp(max=1.0))
    size = (len(vectors.vocabulary), len(targets))
    if rows:
        index = torch.stack([torch.cat(rows), torch.cat(cols)])
        matches = torch.sparse_coo_tensor(index, torch.cat(vals), size, check_invariants=False).coalesce()
    else:
        matches = sparse_rows([], [], [], size)
    m_index, m_value = matches.indices(), matches.values()
    starts = torch.searchsorted(m_index[0].contiguous(), torch.arange(len(vectors.vocabulary) + 1))
    encoded, spelled = ([], []), ([], [])
    for i, text in enumerate(texts):
        for w in set(words(text)):
            if w in vectors.vocabulary:
                encoded[0].append(i)
                encoded[1].append(vectors.vocabulary[w])
            if w in targets:
                spelled[0].append(i)
                spelled[1].append(targets[w])
    text_of, word = (torch.tensor(x, dtype=torch.long) for x in encoded)
    pair, at = row_entries(starts, word)
    owner = torch.cat([text_of[pair], torch.tensor(spelled[0], dtype=torch.long)])
    column = torch.cat([m_index[1][at], torch.tensor(spelled[1], dtype=torch.long)])
    value = torch.cat([m_value[at], torch.ones(len(spelled[0]))])
    key, inverse = torch.unique(owner * len(targets) + column, return_inverse=True)
    best = torch.zeros(len(key)).scatter_reduce(0, inverse, value, reduce="amax")
    soft = torch.sparse_coo_tensor(
        torch.stack([key // len(targets), key % len(targets)]), best, (len(texts), len(targets))
    )
    return _old_pairwise(soft.coalesce(), name_weights(model, names))


def _vocabulary_texts(seed: int):
    import random

    rng = random.Random(seed)
    vocabulary = [f"w{i}" for i in range(400)]
    names = [" ".join(rng.sample(vocabulary[:120], rng.randint(1, 4))) for _ in range(300)]
    texts = [name + " " + " ".join(rng.sample(vocabulary, rng.randint(0, 10))) for name in names]

    def encoder(ws):  # words in groups of seven share most of their vector: matches above the threshold
        rows = [
            torch.randn(16, generator=torch.Generator().manual_seed(int(w[1:]) // 7)) * 3
            + torch.randn(16, generator=torch.Generator().manual_seed(10_000 + int(w[1:])))
            for w in ws
        ]
        return torch.stack(rows)

    return names, texts, encoder


@pytest.mark.parametrize("seed", range(4))
def test_maxsim_equals_the_all_pairs_version_and_compares_only_the_scored_words(seed, monkeypatch):
    """``maxsim_scorer`` gives 885c64e's scores (its ``W x V`` product of every vocabulary word with every name
    word, then every text's best matches) while comparing only the words of the texts it scores."""
    from textkg.evaluation.placement import late
    from textkg.evaluation.placement.text import words

    names, texts, encoder = _vocabulary_texts(seed)
    fit_on = torch.arange(250)
    vectors = late.WordVectors.encode([*texts, *names], encoder)
    compared = []
    real = late._Matches.rows

    def spy(self, ids):
        compared.append(int((~self.done[torch.unique(ids)]).sum()))
        return real(self, ids)

    monkeypatch.setattr(late._Matches, "rows", spy)
    new = late.maxsim_scorer(texts, names, fit_on, vectors)
    old = _old_maxsim(texts, names, fit_on, vectors)
    eps = torch.finfo(torch.float32).eps
    for terms, candidates in [
        (torch.arange(250, 300), fit_on),
        (torch.tensor([3]), fit_on[fit_on % 3 != 0]),  # a one-term batch: a padded block
        (torch.arange(250, 260), fit_on),  # words met before: nothing compared again
    ]:
        torch.testing.assert_close(new(terms, candidates), old(terms, candidates), rtol=8 * eps, atol=8 * eps)
    scored = [*range(250, 300), 3]
    assert sum(compared) == len({w for i in scored for w in words(texts[i])}) < len(vectors.vocabulary)
    assert compared[-1] == 0
