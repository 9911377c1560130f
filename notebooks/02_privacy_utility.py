# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Privacy–utility trade-off and a membership-inference audit
#
# The health setting on `hpo-small` (the urinary-system part of the phenotype ontology): which diseases show which phenotype (`has_phenotype`) is confidential, the ontology is public. Five ways to train the same model, and two ways not to train at all:
#
# * `none`: no privacy, the upper line;
# * `public-only`: leave the confidential statements out (ε = 0): **the baseline a confidential run must beat**;
# * `confidential`: DP-SGD on the `has_phenotype` statements only (the DPKGE setting of Han et al. 2022); the rest trains without noise;
# * `full`: DP-SGD on every training statement;
# * no training: place a new term under the parents of its nearest terms by description, or under its nearest term.
#
# The setting is the one of the results page, section 3 ([docs/results/privacy_utility.md](../results/privacy_utility.md#3-privacyutility-and-membership-inference-audit-on-hpo-small)): `fused-transe` (MiniLM text + structure), 5 epochs at an expected batch of 256, ε ∈ {1, 4}, and a loss-attack audit on 1,000 candidate statements drawn before training. Each private run declares a public size of its private set (`--private-size`, a round bound above the true count, which is itself private), so its label is `dp`; without it the label would be `simulation`. It takes about 10 minutes on two CPU cores. What the guarantee means, and what a patient with several statements gets: [docs/privacy.md](../privacy.md).

# %%
import json
import os
import subprocess
import sys
from pathlib import Path


def textkg_cli(*args):
    """Run the `textkg` command line with this kernel's Python; return its JSON output."""
    proc = subprocess.run([sys.executable, "-m", "textkg.cli.main", *map(str, args)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"textkg {' '.join(map(str, args))} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout)


SWEEP = Path("runs/privacy_sweep")
# 5 epochs, as on the results page; the test suite runs every cell at 1 (tests/notebooks/test_notebooks.py)
EPOCHS = int(os.environ.get("TEXTKG_NOTEBOOK_EPOCHS", "5"))
COMMON = [
    *("--dataset", "hpo-small", "--split", "inductive", "--model", "fused-transe"),
    *("--epochs", EPOCHS, "--batch-size", 256, "--confidential-relations", "has_phenotype"),
    *("--audit-candidates", 1000, "--audit", "loss", "--no-progress"),
]

# %% [markdown]
# ## The runs
#
# One `textkg sweep` per private set, because each declares its own public size: every training statement for `full` (about 18,600 here; declared 20,000), the `has_phenotype` statements for `confidential` (about 6,800; declared 7,000). σ is calibrated to each target ε for the planned steps.

# %%
rows = textkg_cli("sweep", *COMMON, "--privacy-modes", "none,public-only", "--out", SWEEP / "public")["rows"]

# %%
rows += textkg_cli(
    "sweep",
    *COMMON,
    "--privacy-modes",
    "full",
    "--target-epsilons",
    "1,4",
    "--private-size",
    20000,
    "--out",
    SWEEP / "full",
)["rows"]

# %%
rows += textkg_cli(
    "sweep",
    *COMMON,
    "--privacy-modes",
    "confidential",
    "--target-epsilons",
    "1,4",
    "--private-size",
    7000,
    "--out",
    SWEEP / "confidential",
)["rows"]

# %% [markdown]
# ## What each run gives, against the baselines
#
# Test MRR ranks every held-out statement; *placement* ranks the parents of the held-out phenotype terms among the existing ones (the curator's question), with the model alone and with the combination chosen on validation (model, description similarity, the parents of the nearest terms and the re-ranker, weighed on the validation terms). The two no-training rows come from the same `metrics.json` (they read descriptions and the public ontology only).

# %%
by_name = {}
for r in rows:
    group = "public" if r["mode"] in ("none", "public-only") else r["mode"]
    metrics = json.loads((SWEEP / group / r["run_dir"] / "metrics.json").read_text())
    audit = json.loads((SWEEP / group / r["run_dir"] / "audit.json").read_text())
    by_name[r["name"]] = {**r, "test": metrics["test"], "audit": audit}

print(
    f"{'run':22s} {'label':>10s} {'eps':>5s} {'test MRR':>8s} {'placement':>9s} {'combined':>8s} {'AUC':>6s} {'eps_lb':>6s}"
)
for name, r in by_name.items():
    eps = "-" if r["epsilon"] is None else f"{r['epsilon']:.2f}"
    test = r["test"]
    print(
        f"{name:22s} {str(r['guarantee'] or 'none'):>10s} {eps:>5s} {test['mrr']:8.4f} "
        f"{test['placement']['mrr']:9.3f} {test['placement_combined']['mrr']:8.3f} "
        f"{r['audit']['roc_auc']:6.3f} {r['audit']['epsilon_lower_bound']['epsilon']:6.2f}"
    )
baselines = by_name["none"]["test"]["placement_baselines"]
for key, label in (
    ("parent-of-nearest", "no training: parents of nearest"),
    ("description-nn", "no training: nearest term"),
):
    print(f"{label:33s} {'':>20s} {baselines[key]['mrr']:9.3f}")

# every private run must carry the dp label: a declared size, secret noise, per-example clipping
assert all(r["guarantee"] == "dp" for r in by_name.values() if r["mode"] in ("full", "confidential"))

# %% [markdown]
# ## The frontier
#
# Placement MRR of the model alone against the accountant's ε, with the non-private run, the ε = 0 `public-only` baseline and the best no-training method as horizontal lines. A private run is worth its noise only where it lies above `public-only`.

# %%
import matplotlib.pyplot as plt
from IPython.display import Image, display

fig, ax = plt.subplots(figsize=(6, 4))
for mode, colour in (("full", "tab:red"), ("confidential", "tab:blue")):
    pts = sorted((r["epsilon"], r["test"]["placement"]["mrr"]) for r in by_name.values() if r["mode"] == mode)
    ax.plot(*zip(*pts, strict=True), marker="o", color=colour, label=f"{mode} (dp)")
for name, style, label in (
    ("none", ("k", "--"), "non-private"),
    ("public-only", ("tab:green", "-."), "public-only (ε = 0)"),
):
    ax.axhline(by_name[name]["test"]["placement"]["mrr"], color=style[0], ls=style[1], lw=1, label=label)
ax.axhline(baselines["parent-of-nearest"]["mrr"], color="grey", ls=":", lw=1, label="no training (parents of nearest)")
ax.set_xlabel("ε (δ = 1/(10·declared size))")
ax.set_ylabel("placement MRR, model alone (test)")
ax.set_title("Privacy–utility on hpo-small (has_phenotype confidential)")
ax.legend(fontsize=8)
fig.tight_layout()
fig.savefig(SWEEP / "frontier_placement.png", dpi=110)  # shown as a PNG, as the notebooks run with MPLBACKEND=Agg
plt.close(fig)
display(Image(filename=str(SWEEP / "frontier_placement.png")))

# %% [markdown]
# ## The audit
#
# Members (trained on) and non-members (held out before training) were drawn at random from the confidential pool (for `full`: every training statement), so any separation the attack finds was caused by training. The empirical ε lower bound (Jagielski et al. 2020; threshold chosen on a held-out half) must stay below the accountant's ε for every DP run.

# %%
for name, r in by_name.items():
    audit = r["audit"]
    claim = audit["accountant_epsilon"]
    print(
        f"{name:22s} AUC={audit['roc_auc']:.3f}  advantage={audit['advantage']:.3f}  "
        f"TPR@1%FPR={audit['tpr_at_fpr']['0.01']:.3f}  eps_lb={audit['epsilon_lower_bound']['epsilon']:.2f}  "
        f"claimed eps={'-' if claim is None else round(claim, 2)}"
    )
    if claim is not None and audit["guarantee"] == "dp":
        assert audit["epsilon_lower_bound"]["epsilon"] <= claim, "audit beats the accountant: a bug"

# %% [markdown]
# ## Budget spent and validation MRR
#
# `textkg.report` draws the ε-vs-step curve of every private run and its validation MRR.

# %%
from textkg.report import write_run_plots

for group in ("full", "confidential"):
    written = write_run_plots(SWEEP / group)
    for name in ("compare_epsilon.png", "compare_valid_mrr.png"):
        if (SWEEP / group / "plots" / name).exists():
            display(Image(filename=str(SWEEP / group / "plots" / name)))

# %% [markdown]
# ## Reading it
#
# Read every private run against `public-only`, not against the non-private line: a confidential run spends ε on the annotations, and it pays only where it is above leaving them out. For the curator's question, read every model against the simplest alternative, the parents of the nearest terms, which needs no training. The lines below are printed from the tables above, so they say what this run shows.


# %%
def versus(value, reference, digits=3):
    """``value`` against ``reference``: which side, and by how much."""
    gap = value - reference
    side = "above" if gap > 0 else "below" if gap < 0 else "level with"
    return f"{value:.{digits}f}, {abs(gap):.{digits}f} {side} {reference:.{digits}f}"


private = {name: r for name, r in by_name.items() if r["mode"] in ("full", "confidential")}
public, nonprivate = by_name["public-only"]["test"], by_name["none"]["test"]
simplest = baselines["parent-of-nearest"]["mrr"]
print("each private run against public-only (the confidential statements left out, ε = 0):")
for name, r in private.items():
    t = r["test"]
    print(
        f"  {name:18s} test MRR {versus(t['mrr'], public['mrr'], 4)}; "
        f"placement, model alone {versus(t['placement']['mrr'], public['placement']['mrr'])}; "
        f"combined {versus(t['placement_combined']['mrr'], public['placement_combined']['mrr'])}"
    )
print(f"\nplacement against the parents of the nearest terms (no training, MRR {simplest:.3f}):")
for name, r in by_name.items():
    t = r["test"]
    print(
        f"  {name:18s} model alone {versus(t['placement']['mrr'], simplest)}; "
        f"combined {versus(t['placement_combined']['mrr'], simplest)}"
    )
print("\nconfidential DP's combination against the non-private one and against public-only:")
for name, r in private.items():
    if r["mode"] == "confidential":
        c = r["test"]["placement_combined"]["mrr"]
        print(
            f"  {name:18s} {versus(c, nonprivate['placement_combined']['mrr'])} (non-private); "
            f"{versus(c, public['placement_combined']['mrr'])} (public-only)"
        )
audit = by_name["none"]["audit"]
print(
    f"\nmembership: the non-private run's audit AUC {audit['roc_auc']:.3f}, ε ≥ {audit['epsilon_lower_bound']['epsilon']:.2f}; "
    f"the private runs' AUC {min(r['audit']['roc_auc'] for r in private.values()):.3f}–"
    f"{max(r['audit']['roc_auc'] for r in private.values()):.3f}, each ε lower bound at most its claimed ε: "
    f"{all(r['audit']['epsilon_lower_bound']['epsilon'] <= r['epsilon'] for r in private.values())}"
)

# %% [markdown]
# Every number of this setting, with the older runs, the full `hpo` graph and FB15k-237: [docs/results/privacy_utility.md](../results/privacy_utility.md).
