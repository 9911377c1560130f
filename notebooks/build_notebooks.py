"""Regenerate the example notebooks (committed without outputs).

    python notebooks/build_notebooks.py          # rewrites notebooks/*.ipynb

Each notebook uses only the public API (``textkg.load``, ``textkg.data``,
``encoders.get_encoder``, ``textkg.audit``, ``textkg.report``) and the
``textkg`` command line, with small settings (``hpo-small``, 1–2 epochs, small
dimensions) so that it runs in about two minutes on two CPU cores.
``tests/notebooks/test_notebooks.py`` executes all of them.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).resolve().parent

CLI_HELPER = '''\
import json
import subprocess
import sys
from pathlib import Path


def textkg_cli(*args):
    """Run the `textkg` command line with this kernel's Python; return its JSON output."""
    proc = subprocess.run([sys.executable, "-m", "textkg.cli.main", *map(str, args)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"textkg {' '.join(map(str, args))} failed:\\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout)'''


def zero_shot() -> list:
    return [
        new_markdown_cell(
            "# Zero-shot placement of new HPO phenotype terms\n\n"
            "Train a text-augmented model on the `hpo-small` graph with the **inductive** split (test "
            "entities never appear in training), then place brand-new phenotype terms — given only their "
            "definitions — with `predictor.predict(...)`: which terms are their parents (`is_a`) and which "
            "diseases show them (`has_phenotype`). Small settings: 2 epochs, 32 dimensions, the fast "
            "`glove-bow` encoder (swap in `--encoder bert` for MiniLM)."),
        new_code_cell(CLI_HELPER),
        new_code_cell(
            "import textkg\n"
            "from textkg.data import load_dataset, make_split\n\n"
            "kg = load_dataset('hpo-small')\n"
            "split = make_split(kg, 'inductive')\n"
            "print(kg.num_entities, 'entities,', kg.num_relations, 'relations:', ', '.join(kg.relations))\n"
            "print(len(split.train), 'train /', len(split.valid), 'valid /', len(split.test), 'test statements')\n"
            "print(len(split.test_entities), 'test entities, none of them seen in training')"),
        new_markdown_cell("## Train (about a minute)\n\nThe same as `textkg train ...` in a shell."),
        new_code_cell(
            "RUN = Path('runs/zero_shot_hpo')\n"
            "if not (RUN / 'metrics.json').exists():\n"
            "    result = textkg_cli('train', '--dataset', 'hpo-small', '--split', 'inductive',\n"
            "                        '--model', 'blp-transe', '--encoder', 'glove-bow', '--dim', 32,\n"
            "                        '--epochs', 2, '--valid-max-triples', 200, '--no-progress', '--out', RUN)\n"
            "metrics = json.loads((RUN / 'metrics.json').read_text())\n"
            "print('test MRR', round(metrics['test']['mrr'], 4), ' Hits@10', round(metrics['test']['hits@10'], 4))"),
        new_markdown_cell(
            "## A held-out phenotype\n\n"
            "Take a phenotype of the test split: the model never saw it, only its definition. Compare the "
            "predicted parents with the true ones."),
        new_code_cell(
            "predictor = textkg.load(RUN)\n"
            "IS_A = kg.relations.index('is_a')\n"
            "triples = kg.triples['all']\n"
            "test_phenotypes = [int(e) for e in split.test_entities\n"
            "                   if kg.entity_types[int(e)] == 'phenotype'\n"
            "                   and ((triples[:, 0] == int(e)) & (triples[:, 1] == IS_A)).any()]\n"
            "term = test_phenotypes[0]\n"
            "true_parents = {kg.entity_names[int(t)] for t in triples[(triples[:, 0] == term) & (triples[:, 1] == IS_A), 2]}\n"
            "print(kg.entity_descriptions[term])\n"
            "print('true parents:', true_parents)\n"
            "out = predictor.predict(description=kg.entity_descriptions[term], relation='is_a', direction='tail', top_k=10)\n"
            "for p in out['predictions']:\n"
            "    print(f\"{p['score']:8.3f}  {p['name']}\" + ('   <- true parent' if p['name'] in true_parents else ''))"),
        new_markdown_cell(
            "## Brand-new terms\n\n"
            "Definitions written for this notebook (not in HPO). `direction='tail'` predicts `(new, is_a, ?)`; "
            "`direction='head'` with `has_phenotype` predicts `(?, has_phenotype, new)` — diseases."),
        new_code_cell(
            "new_terms = {\n"
            "    'Bifid fingernails': 'Bifid fingernails: A split of the fingernail into two parts along its '\n"
            "                         'length, present from birth.',\n"
            "    'Enlarged kidney cysts': 'Enlarged kidney cysts: Multiple fluid-filled cysts of the kidney '\n"
            "                             'that are larger than expected for age.',\n"
            "}\n"
            "for name, definition in new_terms.items():\n"
            "    parents = predictor.predict(description=definition, name=name, relation='is_a',\n"
            "                                direction='tail', top_k=5)['predictions']\n"
            "    diseases = predictor.predict(description=definition, name=name, relation='has_phenotype',\n"
            "                                 direction='head', top_k=5)['predictions']\n"
            "    print(name)\n"
            "    print('  parents: ', '; '.join(p['name'] for p in parents))\n"
            "    print('  diseases:', '; '.join(p['name'] for p in diseases))"),
        new_markdown_cell("## How often is a true parent in the top 10?\n\nOver the held-out phenotypes with a parent."),
        new_code_cell(
            "hits = 0\n"
            "sample = test_phenotypes[:30]\n"
            "for e in sample:\n"
            "    parents = {int(t) for t in triples[(triples[:, 0] == e) & (triples[:, 1] == IS_A), 2]}\n"
            "    preds = predictor.predict(description=kg.entity_descriptions[e], relation='is_a',\n"
            "                              direction='tail', top_k=10)['predictions']\n"
            "    hits += any(kg.entities.index(p['entity']) in parents for p in preds)\n"
            "print(f'{hits}/{len(sample)} held-out phenotypes have a true parent in their top 10')"),
    ]


def privacy_utility() -> list:
    return [
        new_markdown_cell(
            "# Privacy–utility trade-off and a membership-inference audit\n\n"
            "Three ways to train the same model on `hpo-small`:\n\n"
            "* `none` — no privacy;\n"
            "* `full` — DP-SGD on every training statement (unit of privacy: one triple);\n"
            "* `confidential` — DP-SGD only on the confidential statements (here the `has_phenotype` "
            "relation, the DPKGE setting of Han et al. 2022); the rest is trained normally.\n\n"
            "`textkg sweep` trains one run per point, holding out an audit set (`--audit-candidates`) and "
            "auditing each run (`--audit score`). Tiny settings: 1 epoch, 16 dimensions — the numbers show "
            "the mechanics, not the paper's results. See docs/audit.md."),
        new_code_cell(CLI_HELPER),
        new_code_cell(
            "SWEEP = Path('runs/privacy_sweep')\n"
            "result = textkg_cli('sweep', '--dataset', 'hpo-small', '--model', 'transe', '--dim', 16,\n"
            "                    '--epochs', 1, '--batch-size', 1024, '--num-negatives', 8,\n"
            "                    '--valid-max-triples', 200, '--eval-every', 1,\n"
            "                    '--privacy-modes', 'none,full,confidential', '--noise-multipliers', '1,4',\n"
            "                    '--confidential-relations', 'has_phenotype',\n"
            "                    '--audit-candidates', 400, '--audit', 'score', '--no-progress', '--out', SWEEP)\n"
            "rows = result['rows']\n"
            "print(f\"{'run':22s} {'sigma':>6s} {'epsilon':>8s} {'guarantee':>9s} {'MRR':>7s} {'H@10':>6s} \"\n"
            "      f\"{'audit AUC':>9s} {'eps_lb':>6s}\")\n"
            "for r in rows:\n"
            "    eps = '-' if r['epsilon'] is None else f\"{r['epsilon']:.2f}\"\n"
            "    sigma = '-' if r['noise_multiplier'] is None else f\"{r['noise_multiplier']:g}\"\n"
            "    print(f\"{r['name']:22s} {sigma:>6s} {eps:>8s} {str(r['guarantee'] or '-'):>9s} {r['mrr']:7.4f} \"\n"
            "          f\"{r['hits@10']:6.3f} {r['audit_auc']:9.3f} {r['audit_epsilon_lb']:6.2f}\")"),
        new_markdown_cell("## The frontier\n\nTest MRR against the accountant's ε, one line per privacy mode; "
                          "the non-private model is the dashed line."),
        new_code_cell(
            "from IPython.display import Image, display\n\n"
            "display(Image(filename=str(SWEEP / 'frontier.png')))"),
        new_markdown_cell(
            "## Budget spent and validation MRR\n\n"
            "`textkg.report` draws the ε-vs-step curve of every private run and overlays validation MRR "
            "of DP and non-DP runs."),
        new_code_cell(
            "from textkg.report import write_run_plots\n\n"
            "written = write_run_plots(SWEEP)\n"
            "print([p.name for p in written])\n"
            "for name in ('compare_epsilon.png', 'compare_valid_mrr.png'):\n"
            "    if (SWEEP / 'plots' / name).exists():\n"
            "        display(Image(filename=str(SWEEP / 'plots' / name)))"),
        new_markdown_cell(
            "## The audit\n\n"
            "Members (trained on) and non-members (held out before training) were drawn at random from one "
            "pool, so any separation the attack finds was caused by training. The empirical ε lower bound "
            "(Jagielski et al. 2020) must stay below the accountant's ε for every DP run; Carlini et al. "
            "2022 ask for the TPR at low FPR, shown on the log–log ROC."),
        new_code_cell(
            "from textkg.audit import run_audit\n\n"
            "for r in rows:\n"
            "    audit = json.loads((SWEEP / r['run_dir'] / 'audit.json').read_text())\n"
            "    claim = audit['accountant_epsilon']\n"
            "    print(f\"{r['name']:22s} AUC={audit['roc_auc']:.3f}  advantage={audit['advantage']:.3f}  \"\n"
            "          f\"TPR@1%FPR={audit['tpr_at_fpr']['0.01']:.3f}  \"\n"
            "          f\"eps_lb={audit['epsilon_lower_bound']['epsilon']:.2f}  \"\n"
            "          f\"claimed eps={'-' if claim is None else round(claim, 2)}\")\n"
            "    if claim is not None and audit['guarantee'] == 'dp':\n"
            "        assert audit['epsilon_lower_bound']['epsilon'] <= claim, 'audit beats the accountant: a bug'\n\n"
            "# another attack on the non-private run, through the library\n"
            "loss_audit = run_audit(SWEEP / 'none', attack='loss')\n"
            "print('loss attack on the non-private run: AUC', round(loss_audit.roc_auc, 3))\n"
            "display(Image(filename=str(SWEEP / 'plots' / 'compare_audit_roc.png')))"),
    ]


def encoders_nb() -> list:
    return [
        new_markdown_cell(
            "# Text encoders on HPO definitions\n\n"
            "Compare a contextual encoder (`bert`: MiniLM, 384-d, offline) with a bag of GloVe vectors "
            "(`glove-bow`, 50-d) on phenotype definitions: encoding time, nearest neighbours, and how often a "
            "term's nearest neighbour is an `is_a` relative. Encoders only see lists of strings "
            "(`encoders.get_encoder(name).encode(texts)`). To compare them by inductive link prediction, "
            "train with `textkg train --split inductive --model blp-transe --encoder NAME`."),
        new_code_cell(
            "import time\n\n"
            "import torch\n\n"
            "from encoders import get_encoder, list_encoders\n"
            "from textkg.data import load_dataset\n\n"
            "print('registered encoders:', list_encoders())\n"
            "kg = load_dataset('hpo-small')\n"
            "phenotypes = [i for i, t in enumerate(kg.entity_types) if t == 'phenotype'][:300]\n"
            "texts = [kg.entity_descriptions[i] for i in phenotypes]\n"
            "print(len(texts), 'phenotype definitions, e.g.:', texts[0])"),
        new_code_cell(
            "vectors, seconds = {}, {}\n"
            "for name in ('glove-bow', 'bert'):\n"
            "    encoder = get_encoder(name)\n"
            "    start = time.perf_counter()\n"
            "    vectors[name] = encoder.encode(texts)\n"
            "    seconds[name] = time.perf_counter() - start\n"
            "    print(f'{name:10s} dim={encoder.dim:4d}  {seconds[name]:6.2f} s  '\n"
            "          f'({1000 * seconds[name] / len(texts):.1f} ms per definition)')"),
        new_markdown_cell("## Nearest neighbours (cosine)"),
        new_code_cell(
            "def neighbours(x, query, k=5):\n"
            "    x = torch.nn.functional.normalize(x, dim=1)\n"
            "    sims = x @ x[query]\n"
            "    sims[query] = -2\n"
            "    return torch.topk(sims, k).indices.tolist()\n\n"
            "for q in (0, 1, 2):\n"
            "    print('QUERY:', kg.entity_names[phenotypes[q]])\n"
            "    for name, x in vectors.items():\n"
            "        print(f'  {name:10s}', ' | '.join(kg.entity_names[phenotypes[j]] for j in neighbours(x, q)))"),
        new_markdown_cell(
            "## Does the nearest neighbour share a parent?\n\n"
            "A structural sanity check: the fraction of terms whose nearest neighbour is a parent, child or "
            "sibling in the `is_a` hierarchy (within the 300 terms)."),
        new_code_cell(
            "IS_A = kg.relations.index('is_a')\n"
            "t = kg.triples['all']\n"
            "is_a = t[t[:, 1] == IS_A]\n"
            "parents = {}\n"
            "for h, _, p in is_a.tolist():\n"
            "    parents.setdefault(h, set()).add(p)\n\n"
            "def related(a, b):\n"
            "    pa, pb = parents.get(a, set()), parents.get(b, set())\n"
            "    return b in pa or a in pb or bool(pa & pb)\n\n"
            "for name, x in vectors.items():\n"
            "    nn1 = [neighbours(x, q, k=1)[0] for q in range(len(texts))]\n"
            "    rate = sum(related(phenotypes[q], phenotypes[j]) for q, j in enumerate(nn1)) / len(texts)\n"
            "    print(f'{name:10s} nearest neighbour is an is_a relative for {100 * rate:.1f}% of terms')"),
    ]


NOTEBOOKS = {
    "01_zero_shot_hpo.ipynb": zero_shot,
    "02_privacy_utility.ipynb": privacy_utility,
    "03_biomedical_encoders.ipynb": encoders_nb,
}


def build(name: str) -> nbformat.NotebookNode:
    """The notebook ``name`` without outputs."""
    nb = new_notebook(cells=NOTEBOOKS[name]())
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"{Path(name).stem[:2]}-{i:02d}"  # stable ids: rebuilding gives identical files
    return nb


def main(out_dir: Path = HERE) -> list[Path]:
    paths = []
    for name in NOTEBOOKS:
        path = Path(out_dir) / name
        nbformat.validate(nb := build(name))
        nbformat.write(nb, path)
        paths.append(path)
    return paths


if __name__ == "__main__":
    for p in main():
        print(p)
