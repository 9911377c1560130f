"""k-shot inductive link prediction: a new entity with 0, 1, 3, 5, 10 known links (issue 28).

Usage::

    OMP_NUM_THREADS=1 python benchmarks/k_shot.py RUN_DIR [RUN_DIR ...] [--ks 0,1,3,5,10]
        [--timing-entities 1000] [--out benchmarks/results/k_shot.json]
    OMP_NUM_THREADS=1 python benchmarks/k_shot.py --data DATASET --run-dir DIR [--model fused-transe]
        [--epochs 5] [--dim D] [--max-minutes M] ...

With run directories, loads each run's ``best_model.pt`` (nothing is retrained) and reports, on its
inductive split: the k-shot protocol of :mod:`textkg.evaluation.k_shot` with the way of using the
links chosen on validation, beside the baselines ``no_links`` (the zero-shot model) and
``eravg_no_text`` (the links alone), on the same queries; the placement of new ontology terms with
and without their annotations (``hpo``); and the time to move 1,000 new entities' vectors by 10
known links each with the chosen method, on one thread. With ``--data`` it first trains a run
there (``textkg train``, saved at ``--run-dir``); with ``--quick`` only the training itself runs
(``pipeline.prepare`` and the trainer: no end-of-run evaluation, which on FB15k-237 takes longer
than a short training). ``--max-entities N`` ranks the statements of a seeded sample of ``N``
held-out entities per split only (a cheaper estimate on a large graph). Rows are merged into
``--out`` by run name.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/: the shared harness
import _harness


def machine_info() -> dict:
    """The shared machine record (:func:`_harness.machine`), with this script's older load key."""
    record = _harness.machine()
    record["load_average_at_end"] = record["load_average"]
    return record


def inference_seconds(
    model, seen: torch.Tensor, method, *, entities: int, links: int, seed: int = 0, link_vote=None
) -> dict:
    """Seconds to move ``entities`` new vectors by ``links`` random known links each (seen other entities),
    and with ``link_vote`` (:class:`textkg.evaluation.link_vote.LinkVote`) the seconds of its voters and
    of one relation's vote per entity (``link_vote_seconds``)."""
    from textkg.models.known_links import move_by_links

    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        matrix = model.entity_matrix()
    base = matrix[seen[torch.randint(0, len(seen), (entities,), generator=g)]].clone()
    rows = torch.arange(entities).repeat_interleave(links)
    m = len(rows)
    table = torch.stack(
        [
            rows,
            torch.randint(0, model.num_relations, (m,), generator=g),
            seen[torch.randint(0, len(seen), (m,), generator=g)],
            torch.randint(0, 2, (m,), generator=g),
        ],
        dim=1,
    )
    start = time.perf_counter()
    move_by_links(model, base, table, matrix, method=method)
    out = {
        "entities": entities,
        "links_per_entity": links,
        "method": method.key,
        "seconds": time.perf_counter() - start,
    }
    if link_vote is not None:  # the voters of every new entity, then one relation's vote (tails) for each
        start = time.perf_counter()
        _, ids, weights = link_vote.voters(table)
        for lo in range(0, entities, 256):
            hi = min(lo + 256, entities)
            link_vote.votes(ids[lo:hi], weights[lo:hi], table[lo * links : hi * links : links, 1], "tail")
        out["link_vote_seconds"] = time.perf_counter() - start
    return out


def sample_entities(triples: torch.Tensor, seen: torch.Tensor, n: int, seed: int) -> torch.Tensor:
    """The statements of ``triples`` touching a seeded sample of ``n`` of its held-out entities."""
    held = torch.unique(triples[:, [0, 2]])
    held = held[~torch.isin(held, seen)]
    keep = held[torch.randperm(len(held), generator=torch.Generator().manual_seed(seed))[:n]]
    return triples[torch.isin(triples[:, 0], keep) | torch.isin(triples[:, 2], keep)]


def measure(run_dir: Path, *, ks: tuple[int, ...], timing_entities: int, max_entities: int = 0) -> dict:
    import dataclasses

    from textkg.models.known_links import LinkMethod
    from textkg.pipeline.k_shot import k_shot_report
    from textkg.pipeline.prepared import prepare
    from textkg.pipeline.report import _placement_known_links
    from textkg.training import checkpoint as ckpt
    from textkg.training.config import RunConfig

    cfg = RunConfig.from_dict(json.loads((run_dir / "config.json").read_text()), source=str(run_dir))
    prep = prepare(cfg, run_dir, device=torch.device("cpu"))
    prep.model.load_state_dict(ckpt.load(run_dir / ckpt.BEST_MODEL))
    prep.model.eval()
    if max_entities:
        seen, seed = prep.split.train_entities, cfg.train.seed
        prep.split = dataclasses.replace(
            prep.split,
            valid=sample_entities(prep.split.valid, seen, max_entities, seed),
            test=sample_entities(prep.split.test, seen, max_entities, seed),
        )
    start = time.perf_counter()
    report = k_shot_report(prep, cfg, ks)
    if report is None:
        raise SystemExit(f"{run_dir}: not an inductive run")
    row = {
        "run": run_dir.name,
        "dataset": cfg.data.dataset,
        "model": cfg.model_name,
        "epochs": _epochs(run_dir),
        "max_entities": max_entities or None,
        **report,
        "evaluation_seconds": time.perf_counter() - start,
    }
    placed = _placement_known_links(prep, cfg)
    if placed is not None:
        row["placement_known_links"] = placed
    chosen = LinkMethod.from_key(report["k_shot_selection"]["chosen"], temperature=cfg.train.temperature)
    timed = chosen if chosen.key != "none" else LinkMethod(temperature=cfg.train.temperature)
    from textkg.pipeline.k_shot import link_vote_of

    link_vote, _ = link_vote_of(prep)
    row["timing"] = inference_seconds(
        prep.model, prep.split.train_entities, timed, entities=timing_entities, links=10, link_vote=link_vote
    )
    row["machine"] = machine_info()
    return row


def _epochs(run_dir: Path):
    path = run_dir / "metrics.json"
    return json.loads(path.read_text())["train"]["epochs"] if path.is_file() else "see config.json (--quick)"


def train_quick(args) -> Path:
    """Train as ``textkg train`` does (the preset's settings), without the end-of-run evaluation."""
    import dataclasses

    from textkg._version import __version__
    from textkg.models.presets import get_preset, preset_train_defaults
    from textkg.pipeline.job import build_trainer, graph_record, prepare
    from textkg.training import checkpoint as ckpt
    from textkg.training.config import DataConfig, RunConfig, TrainConfig

    model = get_preset(args.model)
    if args.dim:
        model = dataclasses.replace(model, dim=args.dim)
    settings = {**preset_train_defaults(args.model), "epochs": args.epochs, "seed": args.seed}
    if args.max_minutes:
        settings["max_minutes"] = args.max_minutes
    data = DataConfig(dataset=args.data, split="inductive", inductive_dir=args.inductive_dir)
    if args.description:
        data = dataclasses.replace(data, description=args.description)
    cfg = RunConfig(data=data, model=model, train=TrainConfig(**settings), model_name=args.model)
    out = Path(args.run_dir)
    out.mkdir(parents=True, exist_ok=False)
    prep = prepare(cfg, device=torch.device("cpu"))
    trainer, _, _ = build_trainer(prep, cfg, out)
    ckpt.atomic_write_json(out / "config.json", {"textkg_version": __version__, **cfg.to_dict()})
    ckpt.atomic_write_json(out / "graph.json", graph_record(prep.kg, prep.split))
    start = time.perf_counter()
    trainer.fit(progress=False)
    print(f"trained in {time.perf_counter() - start:.0f} s", flush=True)
    return out


def train(args) -> Path:
    from textkg.cli.main import main as textkg

    out = Path(args.run_dir)
    argv = ["train", "--dataset", args.data, "--split", "inductive", "--model", args.model]
    argv += ["--epochs", str(args.epochs), "--seed", str(args.seed), "--no-progress", "--out", str(out)]
    if args.dim:
        argv += ["--dim", str(args.dim)]
    if args.max_minutes:
        argv += ["--max-minutes", str(args.max_minutes)]
    if args.inductive_dir:
        argv += ["--inductive-dir", args.inductive_dir]
    if args.description:
        argv += ["--description", args.description]
    if textkg(argv) != 0:
        raise SystemExit("training failed")
    return out


def main(argv: list[str] | None = None) -> dict:
    from textkg.evaluation.k_shot import parse_ks

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="*", help="finished inductive run directories")
    p.add_argument("--data", help="train a run on this dataset (a name or a BLP directory) first")
    p.add_argument("--run-dir", help="where --data's run is written")
    p.add_argument("--inductive-dir", help="--data's inductive split folder (e.g. ind_rebuilt_seed0)")
    p.add_argument("--description", help="--data's description file: short, long or first-sentence (BLP directories)")
    p.add_argument("--model", default="fused-transe")
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--dim", type=int)
    p.add_argument("--max-minutes", type=float)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--ks", default="0,1,3,5,10")
    p.add_argument("--timing-entities", type=int, default=1000)
    p.add_argument("--quick", action="store_true", help="--data: train only (no end-of-run evaluation)")
    p.add_argument("--max-entities", type=int, default=0, help="rank a sample of N held-out entities per split")
    p.add_argument("--out", default="benchmarks/results/k_shot.json")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    runs = [Path(r) for r in args.runs]
    if args.data:
        if not args.run_dir:
            raise SystemExit("--data needs --run-dir")
        runs.append(train_quick(args) if args.quick else train(args))
    if not runs:
        raise SystemExit("give run directories and/or --data")
    out = Path(args.out)
    rows = json.loads(out.read_text()) if out.is_file() else {}
    for run in runs:
        row = measure(run, ks=parse_ks(args.ks), timing_entities=args.timing_entities, max_entities=args.max_entities)
        rows[row["run"]] = row
        _harness.write_results(out, rows)
        for k, block in row["k_shot"].items():
            base = block["baselines"]
            print(
                row["run"],
                f"k={k}",
                row["k_shot_selection"]["chosen"],
                block["mrr"],
                "no_links",
                base["no_links"]["mrr"],
                "eravg",
                (base["eravg_no_text"] or {}).get("mrr"),
            )
        print(row["run"], "timing", row["timing"])
    return rows


if __name__ == "__main__":
    main()
