"""``textkg account --from``: every ε a bundle, a run or a results file claims, recomputed from its own
ledger by the project's accountants, beside the claim; exit 1 when they disagree, 2 on bad input
(issue 53, item 1)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from textkg.cli.config_loading import build_run_config
from textkg.cli.main import build_parser, main
from textkg.pipeline.job import run
from textkg.release import release

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
FIXTURE = ROOT / "tests" / "fixtures" / "tiny_blp"

#: a ledger of heterogeneous entries, as a noise schedule or a resumed run with new settings writes
MIXED = [
    {"sample_rate": 0.01, "noise_multiplier": 0.8, "steps": 300},
    {"sample_rate": 0.02, "noise_multiplier": 1.1, "steps": 120},
    {"sample_rate": 0.5, "noise_multiplier": 4.0, "steps": 3},
]
ORDERS = [1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 24.0, 32.0, 48.0, 64.0]
DELTA = 1e-5


def _ledger_dicts(obj, path=""):
    """Every dict holding a ``ledger`` list under ``obj`` (found independently of textkg's walker)."""
    if isinstance(obj, dict):
        if isinstance(obj.get("ledger"), list) and any(
            obj.get(k) is not None for k in ("epsilon", "epsilon_if_secret")
        ):
            yield path
        for k, v in obj.items():
            yield from _ledger_dicts(v, f"{path}.{k}" if path else k)
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _ledger_dicts(v, f"{path}[{i}]")


def _result_files():
    files = []
    for path in sorted(RESULTS.rglob("*.json")):
        ledgers = list(_ledger_dicts(json.loads(path.read_text(encoding="utf-8"))))
        if ledgers:
            files.append((path, ledgers))
    return files


def test_every_privacy_block_under_benchmarks_results_recomputes():
    """Each block with a ledger that claims an ε (``epsilon``, or ``epsilon_if_secret`` of a simulation)
    is recomputed, and every claim in the file (the RDP and PLD figures beside it too) agrees to 1e-6."""
    files = _result_files()
    assert len(files) >= 15
    claims = 0
    from textkg.release import account_from

    for path, ledgers in files:
        out = account_from(path)
        bad = [(b["where"], c) for b in out["blocks"] for c in b["checks"] if not c["agrees"]]
        assert out["agree"] and not bad, (path.name, bad[:3])
        checked = {b["where"] for b in out["blocks"] if b["checks"]}
        assert set(ledgers) <= checked, (path.name, sorted(set(ledgers) - checked)[:3])
        claims += out["checked"]
    assert claims > 1000


def _opacus_epsilon(ledger, orders, delta):
    from opacus.accountants.analysis.rdp import compute_rdp, get_privacy_spent

    rdp = sum(
        np.asarray(
            compute_rdp(q=e["sample_rate"], noise_multiplier=e["noise_multiplier"], steps=e["steps"], orders=orders)
        )
        for e in ledger
    )
    return float(get_privacy_spent(orders=orders, rdp=rdp, delta=delta)[0])


def _dp_accounting_pld(ledger, delta):
    import dp_accounting
    from dp_accounting.pld import pld_privacy_accountant

    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
    for e in ledger:
        event = dp_accounting.PoissonSampledDpEvent(
            e["sample_rate"], dp_accounting.GaussianDpEvent(e["noise_multiplier"])
        )
        acc.compose(dp_accounting.SelfComposedDpEvent(event, e["steps"]))
    return float(acc.get_epsilon(delta))


def _mixed_block(accountant: str) -> dict:
    """A privacy block over :data:`MIXED` whose claims come from the references (Opacus, dp-accounting)."""
    rdp = _opacus_epsilon(MIXED, ORDERS, DELTA)
    pld = _dp_accounting_pld(MIXED, DELTA)
    return {
        "guarantee": "dp",
        "unit": "statement",
        "accountant": accountant,
        "epsilon": rdp if accountant == "rdp" else pld,
        "epsilon_rdp": rdp,
        "epsilon_pld": pld,
        "delta": DELTA,
        "orders": ORDERS,
        "ledger": MIXED,
    }


def _account(capsys, path) -> tuple[int, dict | None, str]:
    code = main(["account", "--from", str(path)])
    captured = capsys.readouterr()
    return code, (json.loads(captured.out) if captured.out.strip() else None), captured.err


@pytest.mark.parametrize("accountant", ["rdp", "pld"])
def test_a_heterogeneous_ledger_recomputes_under_either_accountant(tmp_path, capsys, accountant):
    path = tmp_path / "privacy.json"
    path.write_text(json.dumps({"privacy": _mixed_block(accountant)}))
    code, out, err = _account(capsys, path)
    assert code == 0 and out["agree"] and out["checked"] == 3
    (block,) = out["blocks"]
    assert {c["field"]: c["accountant"] for c in block["checks"]} == {
        "epsilon": accountant,
        "epsilon_rdp": "rdp",
        "epsilon_pld": "pld",
    }
    assert "claimed" in err and "recomputed" in err and "DISAGREES" not in err


def _tamper(block: dict, how: str) -> dict:
    block = json.loads(json.dumps(block))
    if how == "epsilon lowered":
        block["epsilon"] *= 0.9
    elif how == "entry removed":
        del block["ledger"][1]
    elif how == "sigma raised":
        block["ledger"][0]["noise_multiplier"] *= 1.5
    return block


@pytest.mark.parametrize("accountant", ["rdp", "pld"])
@pytest.mark.parametrize("how", ["epsilon lowered", "entry removed", "sigma raised"])
def test_a_tampered_block_disagrees_loudly(tmp_path, capsys, accountant, how):
    path = tmp_path / "privacy.json"
    path.write_text(json.dumps({"privacy": _tamper(_mixed_block(accountant), how)}))
    code, out, err = _account(capsys, path)
    assert code == 1 and out["agree"] is False and out["disagreements"] >= 1
    assert "DISAGREES" in err and f"error: {path}" in err
    (block,) = out["blocks"]
    epsilon = next(c for c in block["checks"] if c["field"] == "epsilon")
    assert not epsilon["agrees"] and not math.isclose(epsilon["claimed"], epsilon["recomputed"], rel_tol=1e-6)


def _train(out: Path, *flags: str) -> Path:
    args = build_parser().parse_args(
        [
            "train",
            "--dataset",
            str(FIXTURE),
            "--split",
            "transductive",
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
            *flags,
        ]
    )
    run(build_run_config(args), out, progress=False)
    return out


@pytest.fixture(scope="module")
def pld_bundle(tmp_path_factory):
    """A fresh tiny run accounted with PLD, and its release bundle."""
    base = tmp_path_factory.mktemp("pld")
    flags = ("--privacy", "full", "--private-size", "256", "--noise-multiplier", "1.0", "--accountant", "pld")
    run_dir = _train(base / "run", *flags)
    release(run_dir, base / "bundle")
    return run_dir, base / "bundle"


def test_a_fresh_pld_run_and_its_bundle_recompute(pld_bundle, capsys):
    run_dir, bundle = pld_bundle
    privacy = json.loads((run_dir / "metrics.json").read_text())["privacy"]
    assert privacy["accountant"] == "pld" and privacy["guarantee"] == "dp" and privacy["unit"] == "statement"
    for path in (run_dir, run_dir / "metrics.json", bundle, bundle / "privacy.json"):
        code, out, _ = _account(capsys, path)
        assert code == 0 and out["agree"], path
        claim = next(c for b in out["blocks"] for c in b["checks"] if c["field"] == "epsilon")
        assert claim["accountant"] == "pld"
        assert claim["recomputed"] == pytest.approx(privacy["epsilon"], rel=1e-6)
    code, out, _ = _account(capsys, bundle)  # the bundle's three copies of ε are held to the ledger's
    assert {b["where"] for b in out["blocks"]} == {"privacy", "RELEASE.json:epsilon", "metrics.json:privacy.epsilon"}


def test_a_bundle_whose_manifest_states_another_epsilon_disagrees(pld_bundle, tmp_path, capsys):
    _, bundle = pld_bundle
    copy = tmp_path / "bundle"
    copy.mkdir()
    for name in ("privacy.json", "metrics.json", "RELEASE.json"):
        (copy / name).write_bytes((bundle / name).read_bytes())
    manifest = json.loads((copy / "RELEASE.json").read_text())
    manifest["epsilon"] /= 2
    (copy / "RELEASE.json").write_text(json.dumps(manifest))
    code, out, err = _account(capsys, copy)
    assert code == 1 and "RELEASE.json:epsilon" in err and "DISAGREES" in err


def test_an_old_block_names_its_unit_statement(tmp_path, capsys):
    """Bundles written before the unit was named ``statement`` everywhere say ``triple``: read as statement."""
    for old, new in (("triple", "statement"), ("confidential-triple", "confidential-statement")):
        path = tmp_path / f"{old}.json"
        path.write_text(json.dumps({"privacy": {**_mixed_block("rdp"), "unit": old}}))
        code, out, _ = _account(capsys, path)
        assert code == 0 and out["blocks"][0]["unit"] == new


@pytest.mark.parametrize(
    "change, field",
    [
        ({"delta": 2.0}, "privacy.delta"),
        ({"delta": "1e-5"}, "privacy.delta"),
        ({"orders": [0.5, 2.0]}, "privacy.orders[0]"),
        ({"orders": [4.0, 2.0]}, "privacy.orders"),
        ({"ledger": [{"sample_rate": 0.1}]}, "privacy.ledger[0].noise_multiplier"),
        ({"ledger": [{**MIXED[0], "sample_rate": 1.5}]}, "privacy.ledger[0].sample_rate"),
        ({"ledger": [{**MIXED[0], "noise_multiplier": -1}]}, "privacy.ledger[0].noise_multiplier"),
        ({"ledger": [{**MIXED[0], "steps": 1.5}]}, "privacy.ledger[0].steps"),
        ({"ledger": [{**MIXED[0], "steps": 10**12}]}, "privacy.ledger[0].steps"),
        ({"ledger": "x"}, "privacy.ledger"),
        ({"epsilon": "1.0"}, "privacy.epsilon"),
        ({"accountant": "magic"}, "privacy.accountant"),
    ],
)
def test_a_malformed_field_exits_2_naming_file_and_field(tmp_path, capsys, change, field):
    path = tmp_path / "privacy.json"
    path.write_text(json.dumps({"privacy": {**_mixed_block("rdp"), **change}}))
    code, out, err = _account(capsys, path)
    assert code == 2 and out is None
    assert err.startswith(f"error: {path}, field '{field}'") and "Traceback" not in err


@pytest.mark.parametrize(
    "content, words",
    [
        (b'{"privacy": {"epsilon": NaN', "not valid"),
        (b'{"privacy": {"epsilon": NaN, "delta": 1e-5, "guarantee": "dp"}}', "NaN is not JSON"),
        (b"\xff\xfe", "not valid"),
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
        (b'{"rows": [{"guarantee": "dp", "epsilon": 1.0, "delta": 1e-5}]}', "no privacy block with a ledger"),
    ],
)
def test_an_unreadable_file_exits_2(tmp_path, capsys, content, words):
    path = tmp_path / "x.json"
    path.write_bytes(content)
    code, out, err = _account(capsys, path)
    assert code == 2 and out is None and words in err and str(path) in err


def test_a_file_too_large_is_refused_before_it_is_parsed(tmp_path, capsys, monkeypatch):
    import textkg.release

    monkeypatch.setattr(textkg.release, "MAX_ACCOUNT_BYTES", 1000)
    path = tmp_path / "privacy.json"
    path.write_text(json.dumps({"privacy": _mixed_block("rdp"), "pad": "x" * 2000}))
    code, _, err = _account(capsys, path)
    assert code == 2 and "larger than" in err


def test_from_takes_no_flags_and_the_flags_need_all_four(tmp_path, capsys):
    assert main(["account", "--from", str(tmp_path), "--steps", "3"]) == 2
    assert main(["account", "--from", str(tmp_path)]) == 2  # neither a bundle nor a run
    assert main(["account", "--sample-rate", "0.01", "--steps", "10"]) == 2
    err = capsys.readouterr().err
    assert "--noise-multiplier" in err and "Traceback" not in err


def test_the_flag_form_takes_the_pld_accountant(capsys):
    flags = ["--sample-rate", "0.02", "--noise-multiplier", "1.1", "--steps", "120", "--delta", str(DELTA)]
    out = {}
    for accountant in ("rdp", "pld"):
        assert main(["account", *flags, "--accountant", accountant]) == 0
        out[accountant] = json.loads(capsys.readouterr().out)
    assert out["pld"]["accountant"] == "pld"
    assert out["pld"]["epsilon"] == pytest.approx(_dp_accounting_pld([MIXED[1]], DELTA), rel=1e-6)
    assert out["pld"]["epsilon"] < out["rdp"]["epsilon"]


def test_the_help_says_q_is_over_the_declared_size():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices["account"]
    text = " ".join(sub.format_help().split())
    assert "q = B / N̄" in text and "DECLARED" in text and "B/N " not in text and "--from" in text


def test_release_prints_every_file_it_wrote(pld_bundle, tmp_path, capsys):
    """``textkg release``'s printed list left out RELEASE.json (issue 53, item 3)."""
    import fnmatch

    from textkg.release import BUNDLE_CONTENTS

    run_dir, _ = pld_bundle
    assert main(["release", str(run_dir), "--out", str(tmp_path / "b")]) == 0
    printed = json.loads(capsys.readouterr().out)["files"]
    written = sorted(p.relative_to(tmp_path / "b").as_posix() for p in (tmp_path / "b").rglob("*") if p.is_file())
    assert printed == written and "RELEASE.json" in printed
    assert all(any(fnmatch.fnmatch(name, pattern) for pattern, _ in BUNDLE_CONTENTS) for name in printed)


def test_a_cross_graph_partys_saved_ledger_and_blocks_recompute(tmp_path, capsys):
    """A party's ``ledger.json`` (its accountant's state beside ε) and the block each release carried."""
    from textkg.federated.cross_graph.ledger import PartyLedger

    party = PartyLedger("alpha", delta=1e-5, noise_multiplier=2.0, clip=1.0, secret=True)
    for step in range(3):
        party.record_release(step=step, to="beta", rows=5)
    path = tmp_path / "ledger.json"
    path.write_text(json.dumps(party.state_dict()))
    code, out, _ = _account(capsys, path)
    wheres = {b["where"] for b in out["blocks"]}
    assert code == 0 and out["agree"] and "(top level)" in wheres and "sent[2].privacy" in wheres
    state = party.state_dict()
    state["epsilon"] *= 0.5
    path.write_text(json.dumps(state))
    code, out, _ = _account(capsys, path)
    disagreeing = [b["where"] for b in out["blocks"] if not all(c["agrees"] for c in b["checks"])]
    assert code == 1 and disagreeing == ["(top level)"]


def test_a_ledger_that_takes_too_long_is_refused_in_bounded_time(tmp_path, capsys, monkeypatch):
    """The adversary's review: a PLD ledger of 10⁹ steps at q = 1e-6 recomputed for minutes. ``account --from``
    stops a file's recomputation after ACCOUNT_FROM_SECONDS (here 2) and exits 2 naming it."""
    import time

    import textkg.cli.privacy as privacy_cli
    from textkg.cli.main import main

    monkeypatch.setattr(privacy_cli, "ACCOUNT_FROM_SECONDS", 2)
    path = tmp_path / "slow.json"
    ledger = [{"sample_rate": 1e-06, "noise_multiplier": 100.0, "steps": 1_000_000_000}]
    path.write_text(json.dumps({"privacy": {"accountant": "pld", "ledger": ledger, "delta": 1e-05, "epsilon": 1.0}}))
    start = time.monotonic()
    assert main(["account", "--from", str(path)]) == 2
    assert time.monotonic() - start < 30
    err = capsys.readouterr().err
    assert "took over 2 s" in err and "Traceback" not in err
