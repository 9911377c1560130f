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
# # Zero-shot placement of new HPO phenotype terms
#
# Train a text-augmented model on the `hpo-small` graph with the **inductive** split (test entities never appear in training), then place brand-new phenotype terms — given only their definitions — with `predictor.predict(...)`: which terms are their parents (`is_a`) and which diseases show them (`has_phenotype`). Small settings: 2 epochs, 32 dimensions, the fast `glove-bow` encoder (swap in `--encoder bert` for MiniLM).

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
import textkg
from textkg.data import load_dataset, make_split

kg = load_dataset("hpo-small")
split = make_split(kg, "inductive")
print(kg.num_entities, "entities,", kg.num_relations, "relations:", ", ".join(kg.relations))
print(len(split.train), "train /", len(split.valid), "valid /", len(split.test), "test statements")
print(len(split.test_entities), "test entities, none of them seen in training")

# %% [markdown]
# ## Train (about a minute)
#
# The same as `textkg train ...` in a shell.

# %%
RUN = Path("runs/zero_shot_hpo")
if not (RUN / "metrics.json").exists():
    result = textkg_cli(
        "train",
        "--dataset",
        "hpo-small",
        "--split",
        "inductive",
        "--model",
        "blp-transe",
        "--encoder",
        "glove-bow",
        "--dim",
        32,
        "--epochs",
        2,
        "--valid-max-triples",
        200,
        "--no-progress",
        "--out",
        RUN,
    )
metrics = json.loads((RUN / "metrics.json").read_text())
print("test MRR", round(metrics["test"]["mrr"], 4), " Hits@10", round(metrics["test"]["hits@10"], 4))

# %% [markdown]
# ## A held-out phenotype
#
# Take a phenotype of the test split: the model never saw it, only its definition. Compare the predicted parents with the true ones.

# %%
predictor = textkg.load(RUN)
IS_A = kg.relations.index("is_a")
triples = kg.triples["all"]
test_phenotypes = [
    int(e)
    for e in split.test_entities
    if kg.entity_types[int(e)] == "phenotype" and ((triples[:, 0] == int(e)) & (triples[:, 1] == IS_A)).any()
]
term = test_phenotypes[0]
true_parents = {kg.entity_names[int(t)] for t in triples[(triples[:, 0] == term) & (triples[:, 1] == IS_A), 2]}
print(kg.entity_descriptions[term])
print("true parents:", true_parents)
out = predictor.predict(description=kg.entity_descriptions[term], relation="is_a", direction="tail", top_k=10)
for p in out["predictions"]:
    print(f"{p['score']:8.3f}  {p['name']}" + ("   <- true parent" if p["name"] in true_parents else ""))

# %% [markdown]
# ## Brand-new terms
#
# Definitions written for this notebook (not in HPO). `direction='tail'` predicts `(new, is_a, ?)`; `direction='head'` with `has_phenotype` predicts `(?, has_phenotype, new)` — diseases.

# %%
new_terms = {
    "Bifid fingernails": "Bifid fingernails: A split of the fingernail into two parts along its "
    "length, present from birth.",
    "Enlarged kidney cysts": "Enlarged kidney cysts: Multiple fluid-filled cysts of the kidney "
    "that are larger than expected for age.",
}
for name, definition in new_terms.items():
    parents = predictor.predict(description=definition, name=name, relation="is_a", direction="tail", top_k=5)[
        "predictions"
    ]
    diseases = predictor.predict(
        description=definition, name=name, relation="has_phenotype", direction="head", top_k=5
    )["predictions"]
    print(name)
    print("  parents: ", "; ".join(p["name"] for p in parents))
    print("  diseases:", "; ".join(p["name"] for p in diseases))

# %% [markdown]
# ## How often is a true parent in the top 10?
#
# Over the held-out phenotypes with a parent.

# %%
hits = 0
sample = test_phenotypes[:30]
for e in sample:
    parents = {int(t) for t in triples[(triples[:, 0] == e) & (triples[:, 1] == IS_A), 2]}
    preds = predictor.predict(description=kg.entity_descriptions[e], relation="is_a", direction="tail", top_k=10)[
        "predictions"
    ]
    hits += any(kg.entities.index(p["entity"]) in parents for p in preds)
print(f"{hits}/{len(sample)} held-out phenotypes have a true parent in their top 10")
