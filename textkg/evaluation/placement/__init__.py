"""Placement of new ontology terms: where are a new term's true parents? (one package)

* :mod:`.methods`: the held-out terms' queries, the model's scores and the no-training baselines
  (description nearest neighbour, parent-of-nearest), and the ranking of candidate parents;
* :mod:`.text`: word-level comparisons (TF-IDF, name-token overlap);
* :mod:`.combination`: the combined scorer whose settings are chosen on validation terms;
* :mod:`.rerank`: the learned re-ranker over the combination's top candidates;
* :mod:`.known_links`: terms that arrive with known links (their annotations vote);
* :mod:`.evaluate`: the ``test.placement*`` blocks of a run's ``metrics.json``.

Standardisation and weighted combination live in :mod:`textkg.evaluation.scoring`, shared with
the link-prediction votes. The user-facing runner is :mod:`textkg.place` (``textkg place``).
Import the submodules themselves; this file re-exports nothing, so that no import circle can form.
"""
