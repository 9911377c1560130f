"""A tiny patient cohort in BLP format, for tests of the unit-level privacy (``--privacy-unit entity``).

20 phenotype terms under an ``is_a`` tree, 6 diseases with 4 annotated phenotypes each (the public
graph), and ``n`` patients, each ``diagnosed_with`` one disease and ``has_phenotype`` 1 to ``max_links - 1``
of its phenotypes (unit statements). The first 70 % of the patients are in ``train.tsv``, then 15 % in
``dev.tsv`` and 15 % in ``test.tsv``; ``patients.txt`` lists them all (the unit list, public).
"""

from __future__ import annotations

import random
from pathlib import Path

PHENOTYPES = [f"HP:{i:03d}" for i in range(20)]
DISEASES = [f"D:{i:02d}" for i in range(6)]


def patient_ids(n: int) -> list[str]:
    return [f"P{i:03d}" for i in range(n)]


def make_cohort(root: Path, *, n: int = 30, seed: int = 0, drop: str | None = None, max_links: int = 5) -> Path:
    """Write the cohort to ``root``; ``drop``: leave out that patient's statements (a neighbouring cohort:
    one whole unit removed; the unit list and every text stay the same)."""
    rnd = random.Random(seed)
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    annotations = {d: rnd.sample(PHENOTYPES, 4) for d in DISEASES}
    public = [(d, "has_phenotype", p) for d in DISEASES for p in annotations[d]]
    public += [(PHENOTYPES[i], "is_a", PHENOTYPES[i // 2]) for i in range(1, len(PHENOTYPES))]
    sets: dict[str, list] = {"train": list(public), "dev": [], "test": []}
    patients = patient_ids(n)
    for k, p in enumerate(patients):
        d = rnd.choice(DISEASES)
        links = [(p, "diagnosed_with", d)]
        links += [(p, "has_phenotype", h) for h in rnd.sample(annotations[d], rnd.randint(1, min(4, max_links - 1)))]
        if p == drop:
            continue
        which = "train" if k < 0.7 * n else ("dev" if k < 0.85 * n else "test")
        sets[which] += links
    for name, rows in sets.items():
        (root / f"{name}.tsv").write_text("".join(f"{h}\t{r}\t{t}\n" for h, r, t in rows), encoding="utf-8")
    texts = [*PHENOTYPES, *DISEASES, *patients]
    (root / "entity2text.txt").write_text("".join(f"{e}\tentity {e}\n" for e in texts), encoding="utf-8")
    (root / "relation2text.txt").write_text(
        "has_phenotype\thas phenotype\ndiagnosed_with\tdiagnosed with\nis_a\tis a\n", encoding="utf-8"
    )
    (root / "patients.txt").write_text("".join(p + "\n" for p in patients), encoding="utf-8")
    return root
