"""What the post-run report allocates, sized before training from the graph and the config alone.

:func:`textkg.pipeline.memory.estimate_memory` adds these to the memory a run holds when training
starts. Each part names the tensors it counts, with the code that allocates them; each is an upper
bound of what that code holds at once, in bytes, from sizes known before training: ``n`` entities,
``c`` candidates of the largest candidate group, ``b`` terms scored at once, ``q_b`` the most queries
one batch of ``b`` terms has, ``D`` the description features' width, ``d`` the model's, ``m`` parent
statements, ``F`` re-ranker features, ``K`` combination components, and the words of the texts
(``nnz``: distinct words summed over the texts, the TF-IDF entries; ``W``: distinct words, the
MiniLM word vectors). ``U = 4 b c`` is one ``(b, c)`` float32 score matrix.

The placement evaluation (:func:`textkg.evaluation.placement.evaluate.evaluate_placement`, run twice:
on the held-out terms' texts and on their names alone) holds, at its peak:

* **the description features** (``N x D`` float32), normalised once by each scorer that reads them
  (description-nn, parent-of-nearest, the re-ranker's vote, the sibling scorers' features and
  children sums, the tuner's votes, the combination's vote) and the names-only copy:
  :data:`FEATURE_COPIES` copies;
* **the text matrices**: sparse COO rows (two int64 indices and a float32 value per entry) of the
  TF-IDF baselines and features, the name weights, the children sums, the candidates' rows each
  pairwise scorer keeps (:data:`TEXT_MATRICES` of at most ``nnz`` entries each), and MaxSim's matches,
  at most :data:`~textkg.evaluation.placement.late.TOP_WORDS` name words per text word
  (:mod:`textkg.evaluation.placement.late`), plus the ``W x 384`` word vectors;
* **one batch of terms**, the larger of scoring and ranking it:

  - scoring (the re-ranker, the heaviest component, inside the tuner's grid): the grid's other
    components and the TF-IDF scores kept for ``tfidf_vote`` (``K U``), the ``(b, c, F)`` pair features
    (``F U``, :class:`textkg.evaluation.placement.rerank.PairFeatures`) and the largest transient of
    one feature: its standardisation (float64, ``11.25 U``: :func:`textkg.evaluation.scoring.standardise`),
    the vote (``(b, n)`` and ``(b, m)`` float64 work arrays,
    :func:`textkg.evaluation.placement.combination.neighbour_vote_scorer`), a TF-IDF product (``(b, W)``
    dense rows) or the siblings' centroids (``c x D``);
  - ranking (:func:`textkg.evaluation.placement.grid.weighting_ranks`): the ``K`` components' scores and
    their ``(K, q_b, c)`` rows (gathered, then stacked), the comparison masks, the kept candidates'
    ``(row, column)`` int64 pairs and the weighted sums of :data:`~textkg.evaluation.placement.grid.WEIGHTED_ENTRIES`
    entries at a time;

The batch is the part freed when the stage ends (:data:`TRANSIENT`): the stages run one at a time, so the
estimate counts the largest of them once, and once more for what the allocator keeps of it
(:data:`textkg.pipeline.memory.RETENTION`).

Nothing in a batch grows with the number of held-out terms: they are scored ``b`` at a time, and every
batch's tensors are freed before the next one is scored (``del`` at the end of each batch in
:mod:`textkg.evaluation.placement.methods` and :mod:`textkg.evaluation.placement.grid`). The one part that does
is bounded: the re-ranker's results kept between passes over the same batches
(:func:`textkg.evaluation.placement.text.kept_scorer`, at most
:data:`~textkg.evaluation.placement.text.KEPT_SCORES_BYTES`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

#: Normalised copies of the ``N x D`` description features alive at once (module docstring): description-nn,
#: parent-of-nearest and the re-ranker's vote (three), with the sibling scorers' features and children sums while
#: the re-ranker is fitted (four: seven) or with sibling_mean's two, the tuner's vote on trial (a vote and a
#: cosine) or the combination's vote afterwards (seven), and the names-only copy (counted 2026-12-06 on hp.obo:
#: seven at the names-only tuner's peak).
FEATURE_COPIES = 8
#: The name of the part that is freed after its stage (one batch, one fit): the allocator may keep it.
TRANSIENT = "largest transient (one batch of terms or lists, one fit)"
#: Sparse text matrices of at most ``nnz`` entries alive at once: the TF-IDF rows of ``tfidf-nn`` and of the
#: re-ranker, containment (presence, name weights), children TF-IDF (rows, sums), name containment (presence,
#: name weights), MaxSim's name weights, and the candidates' rows that each of the six pairwise scorers keeps.
TEXT_MATRICES = 15
#: Bytes of one sparse COO entry of a coalesced float32 matrix: two int64 indices and the value.
SPARSE_ENTRY_BYTES = 2 * 8 + 4
#: Width of the MiniLM word vectors that MaxSim reads (:func:`textkg.evaluation.placement.late.minilm_word_encoder`)
#: and of the default description features where the model has none of its own.
MINILM_DIM = 384
#: Rows of the vote's spread kernel built at once (:meth:`textkg.evaluation.neighbour_vote.NeighbourVote.kernel`).
KERNEL_BLOCK = 2048
#: ``(b, n)`` float32 arrays one batch of the vote holds (:func:`textkg.evaluation.neighbour_vote.rank_weights`:
#: the model's scores and their standardisation, the votes, the spread's base and result, the gated vote, a
#: combination and its ranking's comparisons; and the re-ranker's first stage,
#: :func:`textkg.evaluation.link_rerank.first_stage`).
VOTE_BATCH_ARRAYS = 16
#: Bytes of a float64 standardisation of a ``(b, c)`` matrix, in units of ``U = 4 b c``
#: (:func:`textkg.evaluation.scoring.standardise`: a float32 input ``U``, its float64 copy, the centred copy,
#: the quotient, the zeros of ``torch.where`` and its result, ``2 U`` each, and the ``(b, c)`` bool mask).
STANDARDISE_UNITS = 11.25


@dataclass(frozen=True)
class PlacementSize:
    """Sizes that drive the placement evaluation's memory (module docstring), known before training.

    Attributes:
        queries: Validation placement queries (what the tuner ranks).
        candidates: ``c``, the largest candidate group.
        batch: ``b``, terms scored at once.
        batch_queries: ``q_b``, the most queries one batch of ``b`` terms has (validation or test).
        entities: ``n``.
        feature_dim: ``D``, the description features' width.
        model_dim: ``d``, the model's entity vectors' width.
        parent_edges: ``m``, the training parent statements the votes read.
        rerank_features: ``F``, the re-ranker's pair features.
        components: ``K``, the combination's components (model, description, vote, re-ranker).
        text_words: ``nnz``, distinct words summed over the texts and names.
        vocabulary: ``W``, distinct words of the texts and names.
    """

    queries: int
    candidates: int
    batch: int
    batch_queries: int
    entities: int
    feature_dim: int
    model_dim: int
    parent_edges: int
    rerank_features: int
    components: int
    text_words: int
    vocabulary: int

    def to_dict(self) -> dict:
        return asdict(self)


def placement_parts(size: PlacementSize) -> dict[str, int]:
    """The placement evaluation's peak in named parts (module docstring), bytes each."""
    from textkg.evaluation.placement.grid import WEIGHTED_ENTRIES
    from textkg.evaluation.placement.late import MATCH_BLOCK, TOP_WORDS
    from textkg.evaluation.placement.text import KEPT_SCORES_BYTES

    b, c, n, q = size.batch, size.candidates, size.entities, size.batch_queries
    k, f, m, w = size.components, size.rerank_features, size.parent_edges, size.vocabulary
    u = 4 * b * c
    one_feature = max(
        STANDARDISE_UNITS * u,
        u + 2 * 8 * b * n + 2 * 8 * b * m + 2 * u,  # the vote: sim, (b, n) and (b, m) float64, its (b, c) float64
        4 * b * w + 2 * u,  # a TF-IDF product: the terms' dense (b, W) rows, the (c, b) product and its transpose
        3 * 4 * c * size.feature_dim + 4 * b * size.feature_dim + u,  # sibling_mean: centroids (c x D), its result
    )
    # parent support (textkg.evaluation.placement.parent_support): the standardised first stage, the parents'
    # best and its result, (b, c) float64 each, and the (b, m) float64 parents' scores gathered per statement
    support = 3 * 2 * u + 8 * b * m
    scoring = (k + f) * u + one_feature + support
    # the grid: K scores and their gathered and stacked (K, q_b, c) rows; then the rows, two (K, q_b, c) masks,
    # (q_b, c) masks, the kept pairs (16 bytes each) and the weighted sums (four float32 blocks, (K, step) rows)
    ranking = max(k * u + 8 * k * q * c, (6 * k + 18) * q * c + (16 + 4 * k) * WEIGHTED_ENTRIES)
    matching = 4 * MATCH_BLOCK * w  # MaxSim's (block, name words) similarities, while its scorer is built
    return {
        "description features, normalised copies (N x D float32)": FEATURE_COPIES * 4 * n * size.feature_dim,
        "model vectors of the names-only terms (N x d float32, twice)": 2 * 4 * n * size.model_dim,
        "text matrices (sparse TF-IDF rows, name weights, children sums, MaxSim matches)": SPARSE_ENTRY_BYTES
        * (TEXT_MATRICES + TOP_WORDS + 1)
        * size.text_words,
        "word vectors for MaxSim (W x 384 float32)": 4 * w * MINILM_DIM,
        # the re-ranker's (b, c) float32 results kept between the report's passes (text.kept_scorer): at most its
        # budget, else every validation and test term's row (the test terms counted as many as the validation's)
        "re-ranker scores kept between passes (terms x c float32, bounded)": min(
            KEPT_SCORES_BYTES, 2 * 4 * c * size.queries
        ),
        TRANSIENT: int(max(scoring, ranking, matching)),
    }


def placement_bytes(size: PlacementSize) -> int:
    """The placement evaluation's peak (:func:`placement_parts`, summed)."""
    return sum(placement_parts(size).values())


def placement_size(prep, cfg) -> PlacementSize | None:
    """The :class:`PlacementSize` of a prepared run, or ``None`` when it has no placement task (not an
    inductive split of a graph with an ``is_a`` relation and validation placement queries)."""
    from textkg.evaluation.placement.methods import COMBINED_COMPONENTS, placement_queries
    from textkg.evaluation.placement.rerank import feature_names
    from textkg.evaluation.placement.text import words
    from textkg.pipeline.report import rerank_features

    valid = placement_queries(prep.kg, prep.split, which="valid")
    if valid is None:
        return None
    test = placement_queries(prep.kg, prep.split)
    both = [valid] if test is None else [valid, test]
    batch = max(1, min(cfg.train.eval_batch_size, 256))  # as textkg.pipeline.report._placement scores them
    texts = [*prep.kg.entity_descriptions, *prep.kg.entity_names]
    per_text = [set(words(t)) for t in texts]
    text = getattr(prep.model, "text", None)
    own = getattr(text, "text_text_features", None) if getattr(text, "module", None) is None else None
    return PlacementSize(
        queries=valid.num_queries,
        candidates=max(len(g) for qs in both for g in qs.groups),
        batch=batch,
        batch_queries=max(most_queries_per_batch(qs, batch) for qs in both),
        entities=prep.kg.num_entities,
        feature_dim=int(own.shape[1]) if isinstance(own, torch.Tensor) and own.ndim == 2 else MINILM_DIM,
        model_dim=int(getattr(prep.model, "dim", 0) or 0),
        parent_edges=int((prep.split.train[:, 1] == valid.relation).sum()),
        rerank_features=len(feature_names(rerank_features(cfg))),
        components=len(COMBINED_COMPONENTS),
        text_words=sum(len(s) for s in per_text),
        vocabulary=len(set().union(*per_text)),
    )


@dataclass(frozen=True)
class LinkStageSize:
    """Sizes that drive the description neighbour vote, the link re-ranker over its top answers and k-shot
    (:mod:`textkg.pipeline.report`: inductive splits without a placement task), known before training.

    Attributes:
        entities: ``n``.
        batch: ``b``, queries ranked at once.
        statements: Training statements the votes read.
        valid_lists: Validation lists the re-ranker is fitted on (both directions of at most
            :data:`~textkg.pipeline.link_rerank.MAX_FIT_TRIPLES` statements); 0 without the vote.
        test_lists: Test lists it re-ranks (both directions of every test statement); 0 without the vote.
        top_k: ``K``, candidates per list.
        features: ``F``, the re-ranker's features.
        hidden: ``H``, the ``mlp`` form's hidden units (0 without it).
        model_dim: ``d``.
        k_shot_methods: Ways of using known links k-shot ranks (0: no k-shot).
    """

    entities: int
    batch: int
    statements: int
    valid_lists: int
    test_lists: int
    top_k: int
    features: int
    hidden: int
    model_dim: int
    k_shot_methods: int

    def to_dict(self) -> dict:
        return asdict(self)


def link_stage_parts(size: LinkStageSize) -> dict[str, int]:
    """The vote's, the link re-ranker's and k-shot's peak in named parts, bytes each:

    * the vote (:func:`textkg.evaluation.neighbour_vote.rank_weights`): its spread kernel built
      :data:`KERNEL_BLOCK` rows at a time (a ``(block, n)`` float32 similarity and its top-k) and kept sparse
      (``n x spread_k``), the adjacency of the statements (sparse), and per batch ``(b, n)`` float32 votes,
      spreads and combinations (:data:`VOTE_BATCH_ARRAYS` of them);
    * the re-ranker (:mod:`textkg.evaluation.link_rerank`): the test and validation lists' ``(lists, K, F)``
      float32 features, gathered per batch and concatenated (twice), the test ranks' float64 work arrays, and
      the largest fit: the cross-fitting's subsets of the validation lists and the ``mlp`` form's float64
      activations (standardised features, their gradient, the ``(lists, K, H)`` pre-activations, ``tanh`` and
      its gradient: :func:`textkg.evaluation.listwise.fit_listnet_mlp`), or the scores of
      :data:`~textkg.evaluation.link_rerank.SCORE_ROWS` lists at a time;
    * k-shot (:func:`textkg.evaluation.k_shot.evaluate_k_shot`): an ``N x d`` entity matrix per method and
      the batch's ``(b, n)`` scores.
    """
    from textkg.evaluation.link_rerank import SCORE_ROWS

    n, b, kk, f, h = size.entities, size.batch, size.top_k, size.features, size.hidden
    qv, qt = size.valid_lists, size.test_lists
    per_batch = VOTE_BATCH_ARRAYS * 4 * b * n
    fit = 3 * 4 * qv * kk * f + 8 * qv * kk * (3 * f + 3 * h)
    scoring = 8 * min(SCORE_ROWS, max(qv, qt)) * kk * (3 * f + 3 * h) + 3 * 8 * qt * kk
    parts = {}
    if qv or qt:
        parts["neighbour vote (spread kernel, adjacency; sparse)"] = SPARSE_ENTRY_BYTES * (16 * n + 2 * size.statements)
        parts["link re-ranker lists ((lists, K, F) float32 features, gathered and concatenated)"] = (
            2 * 4 * (qv + qt) * kk * f + 2 * (qv + qt) * kk
        )
    if size.k_shot_methods:
        parts["k-shot (N x d entity matrix per method)"] = (size.k_shot_methods + 3) * 4 * n * size.model_dim
    transient = max(
        2 * 4 * KERNEL_BLOCK * n if (qv or qt) else 0,
        per_batch,
        fit + per_batch if (qv or qt) else per_batch,
        scoring,
    )
    parts[TRANSIENT] = transient
    return parts


def link_stage_size(prep, cfg) -> LinkStageSize | None:
    """The :class:`LinkStageSize` of a prepared run, or ``None`` where none of those stages runs (a transductive
    split; an inductive one with a placement task runs :func:`placement_size`'s instead)."""
    from textkg.evaluation.k_shot import candidate_methods
    from textkg.evaluation.link_features import FEATURES
    from textkg.evaluation.link_rerank import LinkRerankConfig
    from textkg.evaluation.placement.methods import placement_queries
    from textkg.pipeline.link_rerank import MAX_FIT_TRIPLES

    if cfg.data.split != "inductive" or placement_queries(prep.kg, prep.split) is not None:
        return None
    voted = (
        len(prep.split.valid) > 0
        and getattr(prep.model, "text", None) is not None
        and cfg.train.neighbour_vote != "off"
        and cfg.privacy.mode != "full"
    )
    config = LinkRerankConfig()
    return LinkStageSize(
        entities=prep.kg.num_entities,
        batch=max(1, min(cfg.train.eval_batch_size, 256)),
        statements=len(prep.split.train),
        valid_lists=2 * min(len(prep.split.valid), MAX_FIT_TRIPLES) if voted else 0,
        test_lists=2 * len(prep.split.test) if voted else 0,
        top_k=config.top_k,
        features=len(FEATURES),
        hidden=config.hidden if "mlp" in config.forms else 0,
        model_dim=int(getattr(prep.model, "dim", 0) or 0),
        k_shot_methods=len(candidate_methods()),
    )


def most_queries_per_batch(queries, batch: int) -> int:
    """The most queries one batch of ``batch`` terms has, batched as
    :func:`textkg.evaluation.placement.methods.placement_ranks` batches them (per candidate group, the
    group's distinct terms in order)."""
    most = 0
    for g in range(len(queries.groups)):
        terms = queries.terms[queries.group_of == g]
        _, counts = torch.unique(terms, return_counts=True)
        for start in range(0, len(counts), batch):
            most = max(most, int(counts[start : start + batch].sum()))
    return most


__all__ = [
    "FEATURE_COPIES",
    "TRANSIENT",
    "LinkStageSize",
    "PlacementSize",
    "link_stage_parts",
    "link_stage_size",
    "most_queries_per_batch",
    "placement_bytes",
    "placement_parts",
    "placement_size",
]
