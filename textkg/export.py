"""``textkg export RUN --out DIR``: a run's entity and relation vectors for PyKEEN and numpy users.

The folder holds:

* ``entity_to_id.tsv.gz``, ``relation_to_id.tsv.gz``: the vocabulary, in the
  layout PyKEEN's ``TriplesFactory`` writes and reads (header ``id<TAB>label``,
  gzip), so ``TriplesFactory.from_path(..., entity_to_id=...)`` maps the same
  labels to the same rows;
* ``entity_embeddings.npy`` ``(num_entities, d)`` and ``relation_embeddings.npy``
  ``(num_relations, d_r)``: row ``i`` is id ``i`` (``numpy.load``; PyKEEN:
  ``PretrainedInitializer(torch.as_tensor(numpy.load(...)))``);
* ``entities.tsv``: id, label, name and type per entity, for people;
* ``export.json``: the run, model, interaction, shapes and dtypes.

An entity's vector is the model's (``entity_matrix``): for text models, the
fused text and structure representation, as the run scores with. A run under
differential privacy is not exported: its vectors of private statements
leave only through ``textkg release`` (the whitelist bundle).
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import torch

from textkg.errors import ConfigError
from textkg.training.checkpoint import dir_mode

FILES = (
    "entity_to_id.tsv.gz",
    "relation_to_id.tsv.gz",
    "entity_embeddings.npy",
    "relation_embeddings.npy",
    "entities.tsv",
    "export.json",
)


def _clean(text: str) -> str:
    return str(text).replace("\t", " ").replace("\n", " ")


def _write_mapping(path: Path, labels: tuple[str, ...]) -> None:
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        fh.write("id\tlabel\n")
        fh.writelines(f"{i}\t{_clean(label)}\n" for i, label in enumerate(labels))


def export_run(run_dir: str | Path, out: str | Path, *, device: str = "auto") -> dict:
    """Write the folder described in the module docstring; returns ``export.json``'s content.

    Raises:
        ConfigError: ``out`` exists and is not an empty folder; a private run; not a finished run.
    """
    from textkg.predict import Predictor

    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError("exists and is not an empty folder", file=out, field="out")
    if not out.parent.is_dir():
        raise ConfigError("the output's folder does not exist", file=out.parent, field="out")
    from textkg.pipeline.run_dir import open_run

    opened = open_run(run_dir)
    mode = opened.config.privacy.mode
    if mode != "none":
        raise ConfigError(
            f"a private run (privacy mode {mode!r}) is not exported: use textkg release",
            file=Path(run_dir) / "config.json",
        )
    predictor = Predictor(run_dir, device=device)
    kg, model = predictor.kg, predictor.model
    with torch.no_grad():
        entities = model.entity_matrix().detach().cpu().numpy()
        relations = model.relation_matrix().detach().cpu().numpy()
    record = {
        "run": str(run_dir),
        "dataset": predictor.config.data.dataset,
        "model": predictor.config.model_name,
        "interaction": type(model.interaction).__name__,
        "entity_embeddings": {"shape": list(entities.shape), "dtype": str(entities.dtype)},
        "relation_embeddings": {"shape": list(relations.shape), "dtype": str(relations.dtype)},
        "files": list(FILES),
    }
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}."))
    tmp.chmod(dir_mode())  # mkdtemp makes 0700; the export is for others to read
    try:
        _write_mapping(tmp / "entity_to_id.tsv.gz", kg.entities)
        _write_mapping(tmp / "relation_to_id.tsv.gz", kg.relations)
        np.save(tmp / "entity_embeddings.npy", entities)
        np.save(tmp / "relation_embeddings.npy", relations)
        types = kg.entity_types or ("",) * kg.num_entities
        rows = zip(kg.entities, kg.entity_names, types, strict=True)
        (tmp / "entities.tsv").write_text(
            "id\tlabel\tname\ttype\n"
            + "".join(f"{i}\t{_clean(e)}\t{_clean(n)}\t{t}\n" for i, (e, n, t) in enumerate(rows)),
            encoding="utf-8",
        )
        (tmp / "export.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        if out.exists():
            out.rmdir()  # empty, checked above
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return {**record, "out": str(out)}
