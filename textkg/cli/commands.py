"""Handlers behind the ``textkg`` sub-commands (thin: parse → library call → JSON)."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

from textkg.errors import ConfigError, DataError


def data_stats(args) -> dict:
    from textkg.data import kg_stats, load_dataset, make_split

    kwargs = {"inductive_dir": args.inductive_dir} if args.inductive_dir else {}
    kg = load_dataset(args.dataset, **kwargs)
    split = make_split(kg, args.split) if args.split else None
    return kg_stats(kg, split)


def train(args) -> dict | None:
    from textkg.distributed import launch, run_distributed, world_size_from_env
    from textkg.pipeline.job import run

    world = world_size_from_env()
    if getattr(args, "nproc", None) is not None and world == 1:  # textkg train --nproc N: start torchrun
        if not args.resume:  # a bad command line gets its clear error here, before torchrun starts
            from textkg.cli.config_loading import build_run_config
            from textkg.distributed import check_supported

            check_supported(build_run_config(args))
        code = launch(args.nproc, _without_nproc(args.argv))
        if code:
            raise ConfigError(f"torchrun exited with code {code} (the error is above)", field="nproc")
        return None
    if world > 1:
        run = run_distributed  # type: ignore[assignment]  # same signature; metrics on rank 0, None elsewhere

    if args.resume:
        from textkg.pipeline.run_dir import open_run

        run_dir = Path(args.resume)
        opened = open_run(run_dir, what="a started run to resume (was it started?)")
        if not (run_dir / "checkpoint.pt").is_file():
            raise ConfigError("cannot resume: no checkpoint.pt yet", file=run_dir)
        cfg = opened.config
        if args.device is not None:  # where to continue: the recorded device may be one this machine lacks
            cfg = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, device=args.device))
        metrics = run(cfg, run_dir, resume=True, progress=not args.no_progress)
        out = run_dir
        if metrics is None:  # a torchrun rank other than 0: rank 0 reports
            return None
    else:
        from textkg.cli.config_loading import build_run_config

        cfg = build_run_config(args)
        out = (
            Path(args.out)
            if args.out
            else Path("runs") / f"{cfg.model_name}-{Path(cfg.data.dataset).name}-{cfg.data.split}"
        )
        metrics = run(cfg, out, progress=not args.no_progress)
        if metrics is None:
            return None
    print(f"wrote {out / 'metrics.json'}", file=sys.stderr)
    summary = {}
    if metrics["test"].get("placement"):  # an ontology's new terms: where their parents rank
        from textkg.evaluation.placement import placement_reading

        placement = {k: v for k, v in metrics["test"].items() if k.startswith("placement")}
        selection = placement.get("placement_selection")
        summary["placement"] = {
            "reading": placement_reading(placement),
            "chosen_on_validation": selection["chosen"] if selection else None,
            "model": placement["placement"],
            **({"combined": placement["placement_combined"]} if selection else {}),
            "baselines": placement.get("placement_baselines", {}),
            "next": f"textkg place {out} --obo NEW.obo --out placed.tsv (or --terms FILE.tsv: id, name, definition)",
        }
        summary["placement"].update(_placement_extras(placement))
    vote = metrics["test"].get("neighbour_vote")
    if vote and "combined" in vote:  # new entities: what their nearest known neighbours add to the model
        gain = vote["combined"]["mrr"] - metrics["test"]["mrr"]
        summary["new_entities"] = {
            "reading": f"test MRR {metrics['test']['mrr']:.3f} from the model alone; "
            f"{vote['combined']['mrr']:.3f} with the vote of each new entity's {vote['k']} nearest known "
            f"entities by description{_spread_words(vote)} (weight {vote['weight']:g}"
            f"{', spread ' + format(vote['spread_weight'], 'g') if vote.get('spread_weight') else ''}, chosen on "
            f"validation; {gain:+.3f}); {vote['vote_only']['mrr']:.3f} from that vote alone",
            "model": metrics["test"]["mrr"],
            "combined": vote["combined"]["mrr"],
            "vote_only": vote["vote_only"]["mrr"],
        }
    if metrics["train"].get("warning"):
        summary["warning"] = metrics["train"]["warning"]
    return {
        **summary,
        "out": str(out),
        "test": _headline(metrics["test"]),
        "valid": metrics["valid"],
        "privacy": metrics["privacy"],
    }


def _placement_extras(placement: dict) -> dict:
    """The summary's names-only reading and what an inductive run cannot propose (issue 37)."""
    from textkg.evaluation.placement import placement_reading

    out: dict = {}
    names = placement.get("placement_names_only")
    if names and names.get("placement_selection"):
        reading = placement_reading(names).replace("New terms:", "New terms read from their names alone:", 1)
        out["names_only"] = {
            "reading": reading,
            "chosen_on_validation": names["placement_selection"]["chosen"],
            "combined": names["placement_combined"],
            "baselines": names.get("placement_baselines", {}),
        }
    held = placement.get("placement_held_out_terms")
    if held:
        out["held_out_terms"] = (
            f"{held:,} held-out (validation and test) terms are not in the training graph, so textkg place "
            "never proposes them as parents; to place real additions, train on the whole release "
            "(--split transductive)"
        )
    return out


def _spread_words(vote: dict) -> str:
    """How the vote reached new answers, when validation chose the spread."""
    if not vote.get("spread_weight"):
        return ""
    return f", spread to candidates described like their answers ({vote.get('spread_k', '?')} nearest each)"


def _without_nproc(argv: list[str]) -> list[str]:
    """``argv`` minus ``--nproc N`` / ``--nproc=N``."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == "--nproc":
            skip = True
        elif not a.startswith("--nproc="):
            out.append(a)
    return out


def _headline(m: dict) -> dict:
    return {k: m[k] for k in ("mrr", "mr", "hits@1", "hits@3", "hits@10", "num_triples") if k in m}


def evaluate(args) -> dict:
    from textkg.pipeline.report import evaluate_run

    k_shot = None
    if getattr(args, "k_shot", None):
        from textkg.evaluation.k_shot import parse_ks

        k_shot = parse_ks(args.k_shot, field="--k-shot")
    return evaluate_run(
        Path(args.run_dir), exclude_query=args.exclude_query, device=args.device or "auto", k_shot=k_shot
    )


def predict(args) -> dict:
    from textkg.predict import load_predictor

    known_links = getattr(args, "known_links", None)
    if known_links:  # an empty or comments-only file exits 2 before the run is loaded
        from textkg.data.known_links import link_lines

        link_lines(known_links)
    if args.batch:  # the files' own errors before the run is loaded
        entities = _read_batch_file(args.batch)
        names = [n for n, _ in entities]
        if known_links and len(set(names)) < len(names):
            raise DataError("with --known-links, each batch row needs its own name (first column)", file=args.batch)
    predictor = load_predictor(args.run_dir, device=args.device or "auto")
    if args.batch:
        links: dict = {}
        if known_links:  # name, relation, entity, direction per line (textkg.data.known_links)
            from textkg.data.known_links import read_known_links_by_name

            kg = predictor.kg
            links = read_known_links_by_name(known_links, names=names, entities=kg.entities, relations=kg.relations)
        return {
            "results": [
                predictor.predict(
                    description=d,
                    name=n,
                    relation=args.relation,
                    direction=args.direction,
                    top_k=args.top_k,
                    vote=not args.no_vote,
                    **({"known_links": links[n]} if n in links else {}),
                )
                for n, d in entities
            ]
        }
    if not args.description:
        raise ConfigError("give --description TEXT (or --batch FILE)", field="description")
    return predictor.predict(
        description=args.description,
        name=args.name,
        relation=args.relation,
        direction=args.direction,
        top_k=args.top_k,
        vote=not args.no_vote,
        **({"known_links": known_links} if known_links else {}),
    )


def _read_batch_file(path: str) -> list[tuple[str, str]]:
    from textkg.data.io import read_text

    rows = []
    text = read_text(path)  # bounded in size and line length like every data file (docs/security.md)
    for i, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) != 2:
            raise DataError(
                f"expected 2 tab-separated columns (name, description), got {len(parts)}", file=path, line=i
            )
        if not parts[1].strip():
            raise DataError("empty description", file=path, line=i, field="description")
        rows.append((parts[0], parts[1]))
    return rows


def models_list(args) -> dict:
    from textkg.models.presets import get_preset, list_presets

    return {name: get_preset(name).to_dict() for name in list_presets()}


def encoders_list(args) -> dict:
    from textkg.encoders import list_encoders

    return {"encoders": list(list_encoders())}


def charlm_train(args) -> dict:
    from textkg.data import load_dataset
    from textkg.encoders.charlm import read_char_lm_metrics, train_char_lm

    kg = load_dataset(args.dataset, **({"description": args.description} if args.description else {}))
    result = train_char_lm(
        list(kg.entity_descriptions),
        direction=args.direction,
        out_dir=args.out,
        hidden_size=args.hidden_size,
        epochs=args.max_epochs,
        max_seconds=60 * args.max_minutes,
        seed=args.seed,
    )
    return read_char_lm_metrics(result)  # includes "model": the path to pass to the flair encoder


def adapt_encoder(args) -> dict:
    """``textkg encoders adapt``: see :mod:`textkg.training.adapt_encoder`."""
    from textkg.data import load_dataset, make_split
    from textkg.training.adapt_encoder import adapt_encoder as adapt
    from textkg.training.features import default_cache_dir

    kg = load_dataset(args.dataset)
    split = make_split(kg, args.split)
    return adapt(
        kg,
        split,
        cache_dir=default_cache_dir(),
        split_name=args.split,
        epochs=args.epochs,
        batch_size=args.batch_size,
        lr=args.lr,
        max_minutes=args.max_minutes,
        max_pairs=args.max_pairs,
        seed=args.seed,
    )


def pretrain_aec(args) -> dict:
    """Pre-train an LSTM autoencoder; a ``torchcoder-aec`` run reads it with
    ``model.text_module_kwargs.path`` (and then trains no autoencoder of its own)."""
    from textkg.data import load_dataset
    from textkg.encoders import get_encoder
    from textkg.encoders.lstm_ae import pretrain_autoencoder
    from textkg.training.features import AUTOENCODER_FILE

    kg = load_dataset(args.dataset)
    encoder = get_encoder(args.encoder)
    tokens, mask = encoder.encode_tokens(list(kg.entity_descriptions))
    module, history = pretrain_autoencoder(tokens, mask, code_dim=args.code_dim, epochs=args.epochs, seed=args.seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / AUTOENCODER_FILE
    module.save(path)
    return {
        "out": str(path),
        "token_dim": module.token_dim,
        "code_dim": module.code_dim,
        "history": history,
        "use_with": f"textkg train --model torchcoder-aec --autoencoder {path}",
    }
