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
# Three ways to train the same model on `hpo-small`:
#
# * `none` — no privacy;
# * `full` — DP-SGD on every training statement (unit of privacy: one triple);
# * `confidential` — DP-SGD only on the confidential statements (here the `has_phenotype` relation, the DPKGE setting of Han et al. 2022); the rest is trained normally.
#
# `textkg sweep` trains one run per point, holding out an audit set (`--audit-candidates`) and auditing each run (`--audit score`). Tiny settings: 1 epoch, 16 dimensions — the numbers show the mechanics, not the paper's results. See docs/audit.md.

# %%
import json
import subprocess
import sys
from pathlib import Path


def textkg_cli(*args):
    """Run the `textkg` command line with this kernel's Python; return its JSON output."""
    proc = subprocess.run([sys.executable, "-m", "textkg.cli.main", *map(str, args)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"textkg {' '.join(map(str, args))} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout)


# %%
SWEEP = Path("runs/privacy_sweep")
result = textkg_cli(
    "sweep",
    "--dataset",
    "hpo-small",
    "--model",
    "transe",
    "--dim",
    16,
    "--epochs",
    1,
    "--batch-size",
    1024,
    "--num-negatives",
    8,
    "--valid-max-triples",
    200,
    "--eval-every",
    1,
    "--privacy-modes",
    "none,full,confidential",
    "--noise-multipliers",
    "1,4",
    "--private-size",  # a public size of the private set: q = B/N̄; the exact count is private
    20000,
    "--confidential-relations",
    "has_phenotype",
    "--audit-candidates",
    400,
    "--audit",
    "score",
    "--no-progress",
    "--out",
    SWEEP,
)
rows = result["rows"]
print(
    f"{'run':22s} {'sigma':>6s} {'epsilon':>8s} {'guarantee':>9s} {'MRR':>7s} {'H@10':>6s} "
    f"{'audit AUC':>9s} {'eps_lb':>6s}"
)
for r in rows:
    eps = "-" if r["epsilon"] is None else f"{r['epsilon']:.2f}"
    sigma = "-" if r["noise_multiplier"] is None else f"{r['noise_multiplier']:g}"
    print(
        f"{r['name']:22s} {sigma:>6s} {eps:>8s} {str(r['guarantee'] or '-'):>9s} {r['mrr']:7.4f} "
        f"{r['hits@10']:6.3f} {r['audit_auc']:9.3f} {r['audit_epsilon_lb']:6.2f}"
    )

# %% [markdown]
# ## The frontier
#
# Test MRR against the accountant's ε, one line per privacy mode; the non-private model is the dashed line.

# %%
from IPython.display import Image, display

display(Image(filename=str(SWEEP / "frontier.png")))

# %% [markdown]
# ## Budget spent and validation MRR
#
# `textkg.report` draws the ε-vs-step curve of every private run and overlays validation MRR of DP and non-DP runs.

# %%
from textkg.report import write_run_plots

written = write_run_plots(SWEEP)
print([p.name for p in written])
for name in ("compare_epsilon.png", "compare_valid_mrr.png"):
    if (SWEEP / "plots" / name).exists():
        display(Image(filename=str(SWEEP / "plots" / name)))

# %% [markdown]
# ## The audit
#
# Members (trained on) and non-members (held out before training) were drawn at random from one pool, so any separation the attack finds was caused by training. The empirical ε lower bound (Jagielski et al. 2020) must stay below the accountant's ε for every DP run; Carlini et al. 2022 ask for the TPR at low FPR, shown on the log–log ROC.

# %%
from textkg.audit import run_audit

for r in rows:
    audit = json.loads((SWEEP / r["run_dir"] / "audit.json").read_text())
    claim = audit["accountant_epsilon"]
    print(
        f"{r['name']:22s} AUC={audit['roc_auc']:.3f}  advantage={audit['advantage']:.3f}  "
        f"TPR@1%FPR={audit['tpr_at_fpr']['0.01']:.3f}  "
        f"eps_lb={audit['epsilon_lower_bound']['epsilon']:.2f}  "
        f"claimed eps={'-' if claim is None else round(claim, 2)}"
    )
    if claim is not None and audit["guarantee"] == "dp":
        assert audit["epsilon_lower_bound"]["epsilon"] <= claim, "audit beats the accountant: a bug"

# another attack on the non-private run, through the library
loss_audit = run_audit(SWEEP / "none", attack="loss")
print("loss attack on the non-private run: AUC", round(loss_audit.roc_auc, 3))
display(Image(filename=str(SWEEP / "plots" / "compare_audit_roc.png")))
