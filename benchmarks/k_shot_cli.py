"""k-shot as a user gets it: ``textkg predict --batch --known-links`` on the held-out entities (issue 38).

Usage::

    OMP_NUM_THREADS=1 python benchmarks/k_shot_cli.py RUN_DIR [--ks 0,1,3,5,10]
        [--out benchmarks/results/k_shot_cli.json]

Runs, as a user would, ``textkg evaluate RUN_DIR --k-shot KS`` (which saves the choice it makes on
validation in the run), then for each ``k`` one ``textkg predict RUN_DIR --batch B --known-links L``
(the model loaded once) on the *fixed* set of held-out entities eligible at the largest ``k``, with
the ``k`` links the evaluator reveals (:func:`textkg.evaluation.k_shot.draw_k_shot`, the run's seed).
The rest of each entity's test statements are ranked from the CLI's scores with the evaluator's
filtered, realistic rank; the MRR is reported beside the evaluator's ``fixed_entities`` MRR on the same
queries. At ``k = 0`` ``predict`` gets no links (and adds the description neighbour vote where the run
chose it, as a user's zero-shot call does).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/: the shared harness
import _harness


def textkg(*args: str) -> dict:
    """The JSON ``textkg ARGS`` prints (the installed command, as a user runs it)."""
    done = subprocess.run(["textkg", *args], check=True, capture_output=True, text=True)
    return json.loads(done.stdout)


def cli_ranks(results: dict, draw, kg, true: set, irreflexive: torch.Tensor, fixed: set) -> list[float]:
    """Filtered realistic ranks (:func:`textkg.evaluation.ranking.realistic_ranks`) of ``draw``'s counted
    queries of the ``fixed`` entities, from the CLI's scores (heads first, as the evaluator orders them)."""
    index = {e: i for i, e in enumerate(kg.entities)}

    def rank(entity: int, r: int, answer: int, direction: str) -> float:
        preds = results[kg.entities[entity]]["predictions"]
        score = {
            index[p["entity"]]: p["score"]
            for p in preds
            if p["relation"] == kg.relations[r] and p["direction"] == direction
        }
        target = score.pop(answer)
        others = [
            s
            for c, s in score.items()
            if ((entity, r, c) if direction == "tail" else (c, r, entity)) not in true
            and not (c == entity and bool(irreflexive[r]))
        ]
        return 1 + sum(s > target for s in others) + sum(s == target for s in others) / 2

    out = [rank(t, r, h, "head") for h, r, t in draw.queries[draw.head].tolist() if t in fixed]
    return out + [rank(h, r, t, "tail") for h, r, t in draw.queries[draw.tail].tolist() if h in fixed]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--ks", default="0,1,3,5,10")
    _harness.add_common_flags(parser, out="benchmarks/results/k_shot_cli.json")
    args = parser.parse_args(argv)
    from textkg.data.known_links import DIRECTIONS
    from textkg.evaluation.k_shot import draw_k_shot, parse_ks
    from textkg.predict import Predictor

    ks = parse_ks(args.ks)
    run = str(args.run_dir)
    evaluated = textkg("evaluate", run, "--k-shot", ",".join(map(str, ks)), "--device", "cpu")["test"]
    predictor = Predictor(run, device="cpu")
    prep, kg, seed = predictor.prepared, predictor.kg, predictor.config.train.seed
    split = prep.split
    true = {tuple(t) for t in torch.cat([split.train, split.valid, split.test]).tolist()}
    model = prep.model
    irreflexive = model.irreflexive if model.any_irreflexive else torch.zeros(kg.num_relations, dtype=torch.bool)
    largest = draw_k_shot(split.test, split.train_entities, max(ks), num_entities=kg.num_entities, seed=seed)
    fixed = largest.eligible.tolist()
    word = {role: w for w, role in DIRECTIONS.items()}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        batch = Path(tmp) / "batch.tsv"
        batch.write_text("".join(f"{kg.entities[e]}\t{kg.entity_descriptions[e]}\n" for e in fixed), encoding="utf-8")
        for k in ks:
            draw = draw_k_shot(split.test, split.train_entities, k, num_entities=kg.num_entities, seed=seed)
            argv_k = ["predict", run, "--batch", str(batch), "--top-k", str(kg.num_entities), "--device", "cpu"]
            if k:
                links = Path(tmp) / f"links{k}.tsv"
                mine = [row for row in draw.links.tolist() if row[0] in set(fixed)]
                links.write_text(
                    "".join(
                        f"{kg.entities[e]}\t{kg.relations[r]}\t{kg.entities[o]}\t{word[q]}\n" for e, r, o, q in mine
                    ),
                    encoding="utf-8",
                )
                argv_k += ["--known-links", str(links)]
            results = {r["entity"]["name"]: r for r in textkg(*argv_k)["results"]}
            ranks = torch.tensor(cli_ranks(results, draw, kg, true, irreflexive, set(fixed)), dtype=torch.float64)
            block = evaluated["k_shot"][str(k)]
            scoring = next(iter(results.values()))["scoring"]
            rows.append(
                {
                    "k": k,
                    "entities": len(fixed),
                    "queries": len(ranks),
                    "cli_mrr": float(ranks.reciprocal().mean()),
                    "cli_hits@10": float((ranks <= 10).double().mean()),
                    "evaluator_fixed_entities": block.get("fixed_entities"),
                    "evaluator_all_eligible": {key: block[key] for key in ("mrr", "num_entities", "num_queries")},
                    "cli_scoring": scoring.get("known_links", {"method": scoring["method"]}),
                }
            )
            print(json.dumps(rows[-1]), file=sys.stderr)
    selection = evaluated["k_shot_selection"]
    record = _harness.result(
        "k_shot_cli",
        run=Path(run).name,
        chosen=selection["chosen"],
        link_vote_weight=selection["link_vote"]["weight"],
        rows=rows,
    )
    _harness.write_results(args.out, record)
    print(_harness.dumps(record), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
