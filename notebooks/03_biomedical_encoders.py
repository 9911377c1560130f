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
# # Text encoders on HPO definitions
#
# Compare a contextual encoder (`bert`: MiniLM, 384-d, offline) with a bag of GloVe vectors (`glove-bow`, 50-d) on phenotype definitions: encoding time, nearest neighbours, and how often a term's nearest neighbour is an `is_a` relative. Encoders only see lists of strings (`encoders.get_encoder(name).encode(texts)`). To compare them by inductive link prediction, train with `textkg train --split inductive --model blp-transe --encoder NAME`.

# %%
import time

import torch

from textkg.data import load_dataset
from textkg.encoders import get_encoder, list_encoders

print("registered encoders:", list_encoders())
kg = load_dataset("hpo-small")
phenotypes = [i for i, t in enumerate(kg.entity_types) if t == "phenotype"][:300]
texts = [kg.entity_descriptions[i] for i in phenotypes]
print(len(texts), "phenotype definitions, e.g.:", texts[0])

# %%
vectors, seconds = {}, {}
for name in ("glove-bow", "bert"):
    encoder = get_encoder(name)
    start = time.perf_counter()
    vectors[name] = encoder.encode(texts)
    seconds[name] = time.perf_counter() - start
    print(
        f"{name:10s} dim={encoder.dim:4d}  {seconds[name]:6.2f} s  "
        f"({1000 * seconds[name] / len(texts):.1f} ms per definition)"
    )


# %% [markdown]
# ## Nearest neighbours (cosine)


# %%
def neighbours(x, query, k=5):
    x = torch.nn.functional.normalize(x, dim=1)
    sims = x @ x[query]
    sims[query] = -2
    return torch.topk(sims, k).indices.tolist()


for q in (0, 1, 2):
    print("QUERY:", kg.entity_names[phenotypes[q]])
    for name, x in vectors.items():
        print(f"  {name:10s}", " | ".join(kg.entity_names[phenotypes[j]] for j in neighbours(x, q)))

# %% [markdown]
# ## Does the nearest neighbour share a parent?
#
# A structural sanity check: the fraction of terms whose nearest neighbour is a parent, child or sibling in the `is_a` hierarchy (within the 300 terms).

# %%
IS_A = kg.relations.index("is_a")
t = kg.triples["all"]
is_a = t[t[:, 1] == IS_A]
parents = {}
for h, _, p in is_a.tolist():
    parents.setdefault(h, set()).add(p)


def related(a, b):
    pa, pb = parents.get(a, set()), parents.get(b, set())
    return b in pa or a in pb or bool(pa & pb)


for name, x in vectors.items():
    nn1 = [neighbours(x, q, k=1)[0] for q in range(len(texts))]
    rate = sum(related(phenotypes[q], phenotypes[j]) for q, j in enumerate(nn1)) / len(texts)
    print(f"{name:10s} nearest neighbour is an is_a relative for {100 * rate:.1f}% of terms")
