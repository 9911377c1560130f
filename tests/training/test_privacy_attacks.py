"""Attacks on a private run, played as the adversary of docs/privacy.md ("Threat model").

The adversary holds every file a user would publish (weights, config.json,
graph.json, metrics.json), knows the code and every public input, and tries to
tell two neighbouring datasets apart. Each test here failed on the code before
secret randomness and the public vocabulary (checked against commit a6dfa20):

- replaying the released config reproduced the released weights bit for bit;
- one private statement naming an otherwise unused entity added a table row;
- model selection filtered with private training statements.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from textkg.cli.config_loading import build_run_config
from textkg.cli.main import build_parser
from textkg.pipeline.job import prepare, run

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tiny_blp"
UNUSED = "/e/unused"  # in entity2text.txt, in no statement of the fixture
EXTRA = f"{UNUSED}\t/r/likes\t/e/00\n"


def _dataset(tmp_path: Path, name: str, *, extra: bool) -> Path:
    out = tmp_path / name
    shutil.copytree(FIXTURE, out)
    if extra:
        with open(out / "train.tsv", "a", encoding="utf-8") as fh:
            fh.write(EXTRA)
    return out


def _config(dataset: Path, *flags: str):
    args = build_parser().parse_args(
        [
            "train",
            "--dataset",
            str(dataset),
            "--split",
            "transductive",
            "--description",
            "short",  # entity2text.txt, where the fixture's unused entity has its row
            "--model",
            "transe",
            "--dim",
            "8",
            "--epochs",
            "2",
            "--batch-size",
            "32",
            "--seed",
            "0",
            "--privacy",
            "full",
            "--noise-multiplier",
            "1.0",
            "--max-grad-norm",
            "1.0",
            "--private-size",  # a public size: q = B/256, never the exact count
            "256",
            *flags,
        ]
    )
    return build_run_config(args)


def _train(dataset: Path, out: Path, *flags: str) -> Path:
    run(_config(dataset, *flags), out, progress=False)
    return out


def _weights(run_dir: Path) -> dict:
    return torch.load(run_dir / "best_model.pt", weights_only=True)


def _shape_tree(obj):
    """The keys of ``obj`` all the way down (values dropped, list lengths kept)."""
    if isinstance(obj, dict):
        return {k: _shape_tree(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_shape_tree(v) for v in obj]
    return type(obj).__name__ if obj is not None else None


@pytest.mark.slow
def test_replaying_the_released_config_does_not_reproduce_the_weights(tmp_path):
    """Attack 1: retrain with everything in the release (config.json, seed included) on the true
    dataset. With a public noise seed the weights come back bit for bit, which tells the true
    dataset from its neighbour with certainty. With secret noise they must not."""
    data = _dataset(tmp_path, "d", extra=False)
    released = _train(data, tmp_path / "released")
    from textkg.training.config import RunConfig

    cfg = RunConfig.from_dict(json.loads((released / "config.json").read_text()))
    replay = tmp_path / "replay"
    run(cfg, replay, progress=False)
    a, b = _weights(released), _weights(replay)
    assert a.keys() == b.keys()
    diff = max(float((a[k] - b[k]).abs().max()) for k in a)
    assert diff > 1e-3, "the released config replays the noise"


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["full", "confidential"])
def test_neighbouring_datasets_give_the_same_shapes_keys_and_public_files(tmp_path, mode):
    """Attack 2: one private statement names an otherwise unused entity. The adversary compares
    what is released: weight shapes, graph.json, config.json, metrics.json's structure and the
    whole privacy block must not depend on it (q, δ, σ, the steps and ε come from the declared
    public size, never from the exact count: issue 27)."""
    flags = () if mode == "full" else ("--privacy", "confidential", "--confidential-relations", "/r/likes")
    runs = []
    for name, extra in (("d", False), ("d_plus", True)):
        data = _dataset(tmp_path, name, extra=extra)
        runs.append(_train(data, tmp_path / f"run_{name}", *flags))
    a, b = runs
    wa, wb = _weights(a), _weights(b)
    assert wa.keys() == wb.keys()
    assert {k: tuple(v.shape) for k, v in wa.items()} == {k: tuple(v.shape) for k, v in wb.items()}
    ga, gb = (json.loads((d / "graph.json").read_text()) for d in runs)
    ga.pop("name"), gb.pop("name")  # the dataset's path
    assert ga == gb
    ca, cb = (json.loads((d / "config.json").read_text()) for d in runs)
    ca["data"].pop("dataset"), cb["data"].pop("dataset")
    assert ca == cb
    ma, mb = (json.loads((d / "metrics.json").read_text()) for d in runs)
    for m in (ma, mb):
        m["train"].pop("history"), m["train"].pop("seconds")
    assert _shape_tree(ma) == _shape_tree(mb)
    assert ma["privacy"] == mb["privacy"]
    assert ma["privacy"]["guarantee"] == "dp"
    assert ma["privacy"]["num_private_triples"] is None


@pytest.mark.parametrize("split", ["transductive"])
def test_the_model_selection_filter_does_not_depend_on_private_statements(tmp_path, split):
    """Attack 3: validation MRR picks best_model.pt and is released. Its filter must hold public
    statements only, so that adding a private statement cannot move it."""
    d, d_plus = _dataset(tmp_path, "d", extra=False), _dataset(tmp_path, "d_plus", extra=True)
    pa, pb = prepare(_config(d)), prepare(_config(d_plus))
    fa = {tuple(t) for t in pa.split.filter_triples.tolist()}
    fb = {tuple(t) for t in pb.split.filter_triples.tolist()}
    assert fa == fb
    train = {tuple(t) for t in pa.split.train.tolist()}
    assert not fa & train, "a private training statement is in the released metrics' filter"
    assert torch.equal(pa.split.train_entities, pb.split.train_entities)
    # the standard filter is still available, for private_metrics.json only
    assert pa.private_filter_index is not None


def test_reproducible_noise_is_labelled_simulation(tmp_path):
    out = _train(_dataset(tmp_path, "d", extra=False), tmp_path / "run", "--reproducible-noise", "0")
    privacy = json.loads((out / "metrics.json").read_text())["privacy"]
    assert privacy["guarantee"] == "simulation"
    assert privacy["epsilon"] is None
    assert privacy["epsilon_if_secret"] > 0
    assert any("reproducible" in r for r in privacy["not_dp_because"])


def test_the_seed_paper_mechanism_claims_no_epsilon_and_names_its_sampling(tmp_path):
    out = _train(_dataset(tmp_path, "d", extra=False), tmp_path / "run", "--mechanism", "simulation")
    text = (out / "metrics.json").read_text()
    privacy = json.loads(text)["privacy"]
    assert privacy["guarantee"] == "simulation"
    assert privacy["epsilon"] is None and privacy["epsilon_if_secret"] is None
    assert privacy["sampling"] == "fixed-size batches drawn uniformly with replacement"
    assert "NaN" not in text and "Infinity" not in text


def test_a_secret_run_keeps_its_key_out_of_every_file_but_the_checkpoint(tmp_path):
    out = _train(_dataset(tmp_path, "d", extra=False), tmp_path / "run")
    key = torch.load(out / "checkpoint.pt", weights_only=True)["privacy"]["randomness"]["key"]
    assert len(bytes.fromhex(key)) == 16
    for path in out.iterdir():
        if path.name != "checkpoint.pt":
            assert key.encode() not in path.read_bytes(), path.name
            assert bytes.fromhex(key) not in path.read_bytes(), path.name
    privacy = json.loads((out / "metrics.json").read_text())["privacy"]
    assert privacy["guarantee"] == "dp" and privacy["not_dp_because"] == []
    assert privacy["randomness"].startswith("secret")


def test_the_privacy_block_recomputes_to_its_epsilon_with_opacus_alone(tmp_path):
    """An auditor holding only the released privacy block gets the same ε from Opacus's RDP
    analysis (compute_rdp over the ledger at the block's orders, Opacus's conversion)."""
    import numpy as np
    from opacus.accountants.analysis.rdp import compute_rdp, get_privacy_spent

    out = _train(_dataset(tmp_path, "d", extra=False), tmp_path / "run", "--epochs", "3")
    privacy = json.loads((out / "metrics.json").read_text())["privacy"]
    orders = privacy["orders"]
    rdp = sum(
        np.asarray(
            compute_rdp(q=e["sample_rate"], noise_multiplier=e["noise_multiplier"], steps=e["steps"], orders=orders)
        )
        for e in privacy["ledger"]
    )
    eps, alpha = get_privacy_spent(orders=orders, rdp=rdp, delta=privacy["delta"])
    assert sum(e["steps"] for e in privacy["ledger"]) == privacy["steps"]
    assert eps == pytest.approx(privacy["epsilon"], rel=1e-9)
    assert alpha == privacy["alpha"]


def test_public_entities_set_the_table_rows(tmp_path):
    """--public-entities FILE: only the listed entities get a structural row, and graph.json says so."""
    data = _dataset(tmp_path, "d", extra=False)
    listed = ["/e/00", "/e/01", "/e/02", UNUSED]
    path = tmp_path / "public.txt"
    path.write_text("\n".join(listed) + "\n")
    out = _train(data, tmp_path / "run", "--public-entities", str(path))
    weights = _weights(out)
    assert weights["seen_entities"].numel() == len(listed)
    graph = json.loads((out / "graph.json").read_text())
    assert sorted(graph["entities"][i] for i in graph["train_entities"]) == sorted(listed)


def test_pld_accounting_calibrates_a_smaller_sigma_and_its_block_recomputes(tmp_path):
    """--accountant pld: σ calibrated with dp-accounting's PLD for the same target is smaller than
    RDP's; the claimed ε is the PLD one, ≤ the target, and a release recomputes it from the block."""
    from textkg.release import recompute_epsilon

    data = _dataset(tmp_path, "d", extra=False)
    flags = ("--target-epsilon", "2", "--epochs", "3")
    runs = {}
    for accountant in ("rdp", "pld"):
        cfg = _config(data, *flags, "--accountant", accountant)
        cfg = cfg.__class__(
            data=cfg.data,
            model=cfg.model,
            train=cfg.train,
            model_name=cfg.model_name,
            privacy=cfg.privacy.__class__(**{**cfg.privacy.__dict__, "noise_multiplier": None}),
        )
        run(cfg, tmp_path / accountant, progress=False)
        runs[accountant] = json.loads((tmp_path / accountant / "metrics.json").read_text())["privacy"]
    rdp, pld = runs["rdp"], runs["pld"]
    assert pld["accountant"] == "pld" and rdp["accountant"] == "rdp"
    assert pld["noise_multiplier"] < rdp["noise_multiplier"]
    assert pld["epsilon"] == pld["epsilon_pld"] <= 2.0
    assert rdp["epsilon"] == rdp["epsilon_rdp"] <= 2.0 and rdp["epsilon_pld"] < rdp["epsilon"]
    assert pld["steps"] == rdp["steps"] == pld["planned_steps"]
    assert recompute_epsilon(pld) == pytest.approx(pld["epsilon"], rel=1e-9)


# ---------------------------------------------------------------------------------------------------------
# Issue 27: two leaks and a hole, played as the adversary who holds the release bundle.


def _release(run_dir: Path, out: Path) -> Path:
    from textkg.release import release

    release(run_dir, out)
    return out


def _numbers_masked(obj, path=""):
    """``obj`` with every float replaced by a marker: what is left (keys, strings, ints, list lengths)
    must be a function of public inputs; floats outside the privacy block are noisy outputs (metrics)."""
    if isinstance(obj, dict):  # best_epoch: chosen by the noisy validation MRR, post-processing
        return {k: "<noisy>" if k == "best_epoch" else _numbers_masked(v, f"{path}.{k}") for k, v in obj.items()}
    if isinstance(obj, list):
        return [_numbers_masked(v, path) for v in obj]
    if isinstance(obj, float):
        return "<float>"
    return obj


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["full", "confidential"])
def test_neighbouring_release_bundles_differ_in_no_count_list_or_shape(tmp_path, mode):
    """Issue 27, leak 1: two datasets that differ in one private statement, a DP run and `textkg release`
    on each, then a diff of every released file. On the old code the bundles carried the exact number of
    private statements (700 vs 701) and every privacy number derived from it (q = B/N, δ = 1/(10 N), σ, ε).
    Now the only differences are noisy floats (weights, metrics) and the file hashes."""
    flags = () if mode == "full" else ("--privacy", "confidential", "--confidential-relations", "/r/likes")
    bundles = []
    for name, extra in (("d", False), ("d_plus", True)):
        run_dir = _train(_dataset(tmp_path, name, extra=extra), tmp_path / f"run_{name}", *flags)
        bundles.append(_release(run_dir, tmp_path / f"bundle_{name}"))
    a, b = bundles
    assert sorted(p.name for p in a.iterdir()) == sorted(p.name for p in b.iterdir())
    for path in sorted(a.iterdir()):
        other = b / path.name
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file

            wa, wb = load_file(str(path)), load_file(str(other))
            assert {k: tuple(v.shape) for k, v in wa.items()} == {k: tuple(v.shape) for k, v in wb.items()}
            continue
        if path.name == "MODEL_CARD.md":
            la = [line for line in path.read_text().splitlines() if "test MRR" not in line and " on " not in line]
            lb = [line for line in other.read_text().splitlines() if "test MRR" not in line and " on " not in line]
            assert la == lb
            continue
        ja, jb = json.loads(path.read_text()), json.loads(other.read_text())
        for j in (ja, jb):
            j.pop("files", None)  # RELEASE.json's hashes
            j.pop("dataset", None), j.pop("descriptions", None), j.pop("name", None)
            if "data" in j:
                j["data"].pop("dataset")
        if path.name in ("privacy.json", "RELEASE.json", "config.json", "graph.json"):
            assert ja == jb, path.name  # every privacy number included, floats too
        else:
            assert ja["privacy"] == jb["privacy"]
            assert _numbers_masked(ja) == _numbers_masked(jb), path.name
    privacy = json.loads((a / "privacy.json").read_text())["privacy"]
    assert privacy["guarantee"] == "dp" and privacy["num_private_triples"] is None
    assert privacy["private_size"] == 256 and privacy["sample_rate"] == 32 / 256


def test_without_a_declared_size_the_run_is_labelled_simulation_and_release_refuses(tmp_path):
    """Issue 27, leak 1: q = B/N from the exact count is not DP under add/remove adjacency."""
    from textkg.errors import ConfigError
    from textkg.release import release
    from textkg.training.config import RunConfig

    cfg = _config(_dataset(tmp_path, "d", extra=False))
    cfg = RunConfig(
        data=cfg.data,
        model=cfg.model,
        train=cfg.train,
        model_name=cfg.model_name,
        privacy=cfg.privacy.__class__(**{**cfg.privacy.__dict__, "private_size": None}),
    )
    run(cfg, tmp_path / "run", progress=False)
    privacy = json.loads((tmp_path / "run" / "metrics.json").read_text())["privacy"]
    assert privacy["guarantee"] == "simulation" and privacy["epsilon"] is None
    assert any("--private-size" in r for r in privacy["not_dp_because"])
    with pytest.raises(ConfigError, match="not differentially private"):
        release(tmp_path / "run", tmp_path / "bundle")
    assert not (tmp_path / "bundle").exists()


def _generated_split_dataset(tmp_path: Path, name: str, *, extra: str | None) -> Path:
    """The fixture has no ind-*.tsv: an inductive split is generated from all its statements."""
    out = tmp_path / name
    shutil.copytree(FIXTURE, out)
    if extra:
        with open(out / "train.tsv", "a", encoding="utf-8") as fh:
            fh.write(extra)
    return out


def test_a_generated_inductive_split_reads_no_confidential_statement(tmp_path):
    """Issue 27, leak 2: on the old code the held-out entities were drawn from every statement, so one
    confidential statement moved the released vocabulary (train_entities) and the valid/test counts.
    Under --privacy confidential the split is drawn from the unrestricted statements only."""
    extra = "".join(f"/e/{i:02d}\t/r/likes\t{UNUSED}\n" for i in range(0, 40, 3))
    preps = []
    for name, rows in (("d", None), ("d_plus", extra)):
        data = _generated_split_dataset(tmp_path, name, extra=rows)
        cfg = _config(data, "--privacy", "confidential", "--confidential-relations", "/r/likes", "--split", "inductive")
        preps.append(prepare(cfg))
    a, b = preps
    assert a.split.seed is not None, "the fixture must generate its split"
    for field in ("train_entities", "valid_entities", "test_entities", "valid", "test", "filter_triples"):
        assert torch.equal(getattr(a.split, field), getattr(b.split, field)), field


def test_a_public_transductive_draw_labels_each_statement_by_its_own_ids(tmp_path):
    """hpo's generated transductive split under --privacy full: adding statements relabels no other."""
    import dataclasses

    from textkg.data import load_dataset
    from textkg.training.private_split import public_draw

    kg = load_dataset(FIXTURE, description="short")
    triples = kg.all_triples()
    base = dataclasses.replace(kg, triples={"all": triples[:-10]}, entity_splits=None)
    plus = dataclasses.replace(kg, triples={"all": triples}, entity_splits=None)
    a, b = (public_draw(g, kind="transductive", seed=0) for g in (base, plus))
    for name in ("train", "valid", "test"):
        sa = {tuple(t) for t in getattr(a, name).tolist()}
        sb = {tuple(t) for t in getattr(b, name).tolist()}
        assert sa <= sb and len(sb - sa) <= 10, name


@pytest.mark.parametrize("kind", ["inductive"])
def test_a_generated_split_under_full_privacy_reads_no_statement(tmp_path, kind):
    """Every training statement is private under --privacy full: the split is drawn from public inputs
    (the vocabulary; each statement's own ids), so one more private statement moves nothing released."""

    def prep(name, rows):
        data = _generated_split_dataset(tmp_path, name, extra=rows)
        if kind == "transductive":  # no dev/test files: the transductive split is generated too
            (data / "dev.tsv").write_text("")
            (data / "test.tsv").write_text("")
        return prepare(_config(data, "--split", kind))

    a = prep("d", None)
    # private training statements of the neighbour: an added statement that touches a held-out entity
    # would be a (public) evaluation statement, not a training one
    names = [a.kg.entities[int(i)] for i in a.split.train_entities]
    unused = UNUSED if UNUSED in names else names[-1]
    extra = "".join(f"{h}\t/r/likes\t{unused}\n" for h in names[:12:3] if h != unused)
    b = prep("d_plus", extra)
    assert a.split.extra["protocol"] == "public-draw"
    for field in ("train_entities", "valid_entities", "test_entities", "valid", "test", "filter_triples"):
        assert torch.equal(getattr(a.split, field), getattr(b.split, field)), field
    assert len(b.split.train) > len(a.split.train)  # the added statements are private training statements


@pytest.mark.parametrize("flag", [("--target-epsilon", "1"), ("--noise-multiplier", "1.0")])
def test_privacy_flags_without_privacy_are_refused(tmp_path, capsys, flag):
    """Issue 27: `train --target-epsilon 1` without --privacy trained a NON-private model and exited 0."""
    from textkg.cli.main import main

    data = _dataset(tmp_path, "d", extra=False)
    code = main(["train", "--dataset", str(data), "--model", "transe", *flag, "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2
    assert "NOT private" in err and flag[0] in err and "Traceback" not in err
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").iterdir())


class _Payload:
    """A pickle entry that runs code when unpickled (``os.system`` in a real attack)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


@pytest.mark.parametrize("command", ["evaluate", "predict", "init-from", "resume"])
def test_a_crafted_weights_file_never_runs_code(tmp_path, capsys, command):
    """Issue 27, the hole: a shared run whose best_model.pt (or checkpoint.pt) carries a crafted pickle
    entry ran it during `evaluate`, `predict` and `train --init-from`. Every load is weights-only now:
    exit 2 naming the file, and the payload never runs."""
    from textkg.cli.main import main

    data = _dataset(tmp_path, "d", extra=False)
    victim = tmp_path / "shared_run"
    flags = ["--privacy", "public-only", "--confidential-relations", "/r/likes"] if command == "init-from" else []
    train = ["train", "--dataset", str(data), "--split", "transductive", "--description", "short"]
    train += ["--model", "transe", "--dim", "8", "--epochs", "1", "--no-progress"]
    assert main([*train, *flags, "--out", str(victim)]) == 0
    marker = tmp_path / "pwned"
    target = victim / ("checkpoint.pt" if command == "resume" else "best_model.pt")
    state = torch.load(target, weights_only=True)
    state["extra"] = _Payload(marker)
    torch.save(state, target)
    capsys.readouterr()
    args = {
        "evaluate": ["evaluate", str(victim)],
        "predict": ["predict", str(victim), "--description", "a city by the sea"],
        "init-from": [
            *train,
            "--privacy",
            "confidential",
            "--confidential-relations",
            "/r/likes",
            "--noise-multiplier",
            "1",
            "--private-size",
            "64",
            "--init-from",
            str(victim),
            "--out",
            str(tmp_path / "new"),
        ],
        "resume": ["train", "--resume", str(victim)],
    }[command]
    code = main(args)
    err = capsys.readouterr().err
    assert not marker.exists(), "the crafted pickle ran"
    assert code == 2, err
    assert target.name in err and "Traceback" not in err


def test_a_release_holds_safetensors_weights_and_no_wall_times(tmp_path):
    """The bundle's weights are safetensors (tensors only), `textkg.load` reads them, and no wall time
    (a readout of the realised Poisson batch sizes, hence of N) is released."""
    import textkg

    data = _dataset(tmp_path, "d", extra=False)
    run_dir = _train(data, tmp_path / "run")
    bundle = _release(run_dir, tmp_path / "bundle")
    assert (bundle / "best_model.safetensors").is_file() and not (bundle / "best_model.pt").exists()
    text = (bundle / "metrics.json").read_text()
    assert '"seconds"' not in text
    predictor = textkg.load(bundle, dataset=data)  # a bundle never opens the path it names
    weights = torch.load(run_dir / "best_model.pt", weights_only=True)
    for k, v in predictor.model.state_dict().items():
        assert torch.equal(v, weights[k]), k
