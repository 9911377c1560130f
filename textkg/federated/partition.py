"""Which data holder holds which training statement: the partitions of federated training.

A :class:`Partition` assigns each training statement to one client (a data
holder: a hospital, a registry) or marks it ``SHARED``: public knowledge that
every client holds, such as the ontology itself. Schemes:

- ``random``: each statement to client ``floor(K · u)``, ``u`` a seeded hash of
  the statement's own ids (:func:`textkg.training.private_training.statement_uniforms`),
  so adding or removing one statement moves no other (the same property the
  confidential adjacency needs, and the one a record-level DP guarantee per
  client assumes);
- ``relation``: whole relations to clients (FKGE's setting of holders that
  each know different kinds of facts). Without DP: largest first onto the
  client with the fewest statements so far (greedy balancing, which counts the
  training statements). Under DP (``public_only``): the relation names of the
  public vocabulary in the order of a seeded hash of each name, dealt round
  robin, so the assignment reads no statement and neighbouring datasets give
  the same one (:func:`public_relation_owners`);
- ``source`` (``hpo`` only): the three annotation sources OMIM, ORPHA and
  DECIPHER as three holders. A statement that names a disease goes to the
  disease's source; the others (``is_a``, ``gene_has_phenotype``) are the
  public ontology and its gene annotations, ``SHARED``;
- ``column``: the user's own TSV file, one line ``head<TAB>relation<TAB>tail<TAB>client``
  per training statement, in the external ids of the dataset; every training
  statement must be listed (repeats of a duplicated statement follow its
  first listing; ``shared`` as the client name marks a shared statement);
  clients are numbered in sorted name order;
- ``files``: every holder keeps its statements in its own file, on its own node
  (Flower's deployment engine: the SuperNode's ``--node-config data-file=...``,
  read by :func:`read_holder_file`). The dataset the server and every node load
  is the public side only (vocabulary, texts, validation and test statements),
  so each of its training statements is ``SHARED``; clients are ``client-0`` ..
  ``client-{K-1}``. No process but holder k's node opens holder k's file.

Typical use::

    part = make_partition(kg, split.train, "source")
    for k, name in enumerate(part.clients):
        local = part.client_triples(split.train, k)   # its own + the shared statements
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from textkg.errors import ConfigError, DataError
from textkg.federated.names import check_name

#: Assignment of a statement that every client holds.
SHARED = -1
#: Partition schemes by name.
SCHEMES = ("random", "relation", "source", "column", "files")
#: the scheme whose holders each read their own file on their own node
FILES = "files"
#: ``source``: the disease id prefixes of ``hpo``, one client each.
HPO_SOURCES = ("OMIM", "ORPHA", "DECIPHER")
#: client name that marks a shared statement in a ``column`` file
SHARED_NAME = "shared"


@dataclass(frozen=True, eq=False)
class Partition:
    """Training statements by data holder.

    Attributes:
        scheme: One of :data:`SCHEMES`.
        clients: Client names; client ``k`` is ``clients[k]``.
        assignment: ``(N,)`` long: the client index of each training
            statement, or :data:`SHARED`.
    """

    scheme: str
    clients: tuple[str, ...]
    assignment: torch.Tensor

    @property
    def num_clients(self) -> int:
        return len(self.clients)

    def client_mask(self, k: int, *, include_shared: bool = True) -> torch.Tensor:
        """``(N,)`` bool: the statements client ``k`` holds (its own, and the shared ones unless told not)."""
        if not 0 <= k < self.num_clients:
            raise ConfigError(f"client {k} out of range 0..{self.num_clients - 1}", field="client")
        own = self.assignment == k
        return own | (self.assignment == SHARED) if include_shared else own

    def client_triples(self, train: torch.Tensor, k: int, *, include_shared: bool = True) -> torch.Tensor:
        """``(n_k, 3)`` the training statements client ``k`` holds."""
        if len(train) != len(self.assignment):
            raise ConfigError(f"partition of {len(self.assignment)} statements applied to {len(train)}", field="train")
        return train[self.client_mask(k, include_shared=include_shared)]

    def sizes(self) -> dict:
        """``{client: own statements, ..., "shared": n}`` (JSON-ready)."""
        out = {name: int((self.assignment == k).sum()) for k, name in enumerate(self.clients)}
        out[SHARED_NAME] = int((self.assignment == SHARED).sum())
        return out


def make_partition(
    kg,
    train: torch.Tensor,
    scheme: str,
    *,
    num_clients: int | None = None,
    seed: int = 0,
    column_file: str | Path | None = None,
    public_only: bool = False,
) -> Partition:
    """Partition ``train`` (``(N, 3)`` ids of ``kg``) among data holders.

    Args:
        kg: The :class:`~textkg.data.graph.KnowledgeGraph` the ids index.
        train: ``(N, 3)`` long training statements.
        scheme: One of :data:`SCHEMES`.
        num_clients: K for ``random`` and ``relation`` (at least 2); must be
            ``None`` or match for ``source`` (3) and ``column`` (from the file).
        seed: Seed of ``random``'s hash.
        column_file: The TSV file of ``column``.
        public_only: The run is DP (record- or client-level): ``relation`` assigns relations from
            public inputs only (the relation names and ``seed``), never from statement counts.

    Raises:
        ConfigError: An unknown scheme, a bad K, ``source`` on a graph that is
            not ``hpo``, more clients than relations, a client with nothing.
        DataError: A malformed ``column`` file (file, line and field named).
    """
    if scheme not in SCHEMES:
        raise ConfigError(f"unknown partition {scheme!r}; expected one of {', '.join(SCHEMES)}", field="partition")
    if train.ndim != 2 or train.shape[1] != 3:
        raise ConfigError(f"train must be (N, 3), got {tuple(train.shape)}", field="train")
    if scheme in ("random", "relation", FILES):
        if isinstance(num_clients, bool) or not isinstance(num_clients, int) or num_clients < 2:
            raise ConfigError(f"--clients must be an integer >= 2, got {num_clients!r}", field="clients")
    if scheme == "column" and column_file is None:
        raise ConfigError("the column partition needs --partition-file FILE", field="partition_file")

    clients: Sequence[str]
    if scheme == "random":
        from textkg.training.private_training import statement_uniforms

        assert num_clients is not None  # checked above for random and relation
        u = statement_uniforms(train, seed=seed)
        assignment = torch.clamp((u * num_clients).long(), max=num_clients - 1)
        clients = tuple(f"client-{k}" for k in range(num_clients))
    elif scheme == "relation":
        assert num_clients is not None  # checked above for random and relation
        if public_only:
            clients = tuple(f"client-{c}" for c in range(num_clients))
            assignment = public_relation_owners(kg, num_clients, seed=seed)[train[:, 1]]
        else:
            clients, assignment = _by_relation(kg, train, num_clients)
    elif scheme == "source":
        clients, assignment = by_source(kg, train)
    elif scheme == FILES:  # the holders' statements are in their own files: every statement here is public
        assert num_clients is not None  # checked above
        clients = tuple(f"client-{k}" for k in range(num_clients))
        return Partition(scheme=scheme, clients=clients, assignment=torch.full((len(train),), SHARED))
    else:
        assert column_file is not None  # checked above for column
        clients, assignment = _from_column_file(kg, train, Path(column_file))
    if num_clients is not None and scheme in ("source", "column") and num_clients != len(clients):
        raise ConfigError(f"the {scheme} partition has {len(clients)} clients, not {num_clients}", field="clients")
    part = Partition(scheme=scheme, clients=tuple(clients), assignment=assignment)
    empty = [name for name, n in part.sizes().items() if name != SHARED_NAME and n == 0]
    if empty:
        raise ConfigError(f"clients with no training statement of their own: {', '.join(empty)}", field="partition")
    return part


def read_holder_file(kg, split, path: str | Path) -> torch.Tensor:
    """``(n, 3)`` one holder's own training statements, from its own file (the ``files`` scheme).

    The file is a TSV of ``head<TAB>relation<TAB>tail`` lines in the external ids of the (public)
    dataset. Only the holder's own node reads it; the public vocabulary decides what it may name.

    Args:
        kg: the public graph (its vocabulary).
        split: the public split (an inductive split's held-out entities may not occur).
        path: the holder's file.

    Raises:
        DataError: no such file, a malformed line, an entity or relation outside the public
            vocabulary, or an entity the inductive split holds out (file, line and field named).
    """
    from textkg.data.io import read_triples

    path = Path(path)
    if not path.is_file():
        raise DataError("no such holder file", file=path, field="data-file")
    triples, lines = read_triples(path)
    ent = {e: i for i, e in enumerate(kg.entities)}
    rel = {r: i for i, r in enumerate(kg.relations)}
    held = set()
    if split.kind == "inductive":
        held = set(split.valid_entities.tolist()) | set(split.test_entities.tolist())
    ids = []
    for line, (h, r, t) in zip(lines, triples, strict=True):
        for name, value, table in (("head", h, ent), ("relation", r, rel), ("tail", t, ent)):
            if value not in table:
                unknown = f"unknown {name} {value!r}: not in the public vocabulary"
                raise DataError(unknown, file=path, line=line, field=name)
        row = (ent[h], rel[r], ent[t])
        for name, e in (("head", row[0]), ("tail", row[2])):
            if e in held:
                raise DataError(
                    f"entity {kg.entities[e]!r} is held out by the inductive split (valid/test)",
                    file=path,
                    line=line,
                    field=name,
                )
        ids.append(row)
    if not ids:
        raise DataError("a holder file with no statement", file=path, field="data-file")
    return torch.tensor(ids, dtype=torch.long).reshape(-1, 3)


def assign_statements(
    part: Partition, kg, train: torch.Tensor, triples: torch.Tensor, *, seed: int = 0
) -> torch.Tensor | None:
    """``(M,)`` the holder of each of ``triples`` (e.g. the test statements) under ``part``'s rule.

    ``random`` hashes each statement as for training; ``relation`` gives a
    relation's statements to the holder of its training statements (``SHARED``
    for a relation no holder trains); ``source`` goes by the disease's source.
    ``column`` lists training statements only, and ``files`` holders keep theirs on their nodes:
    ``None`` (no rule for others).
    """
    if part.scheme == "random":
        from textkg.training.private_training import statement_uniforms

        k = part.num_clients
        return torch.clamp((statement_uniforms(triples, seed=seed) * k).long(), max=k - 1)
    if part.scheme == "relation":
        owner = torch.full((kg.num_relations,), SHARED, dtype=torch.long)
        owner[train[:, 1]] = part.assignment  # a relation's statements all have one holder
        return owner[triples[:, 1]]
    if part.scheme == "source":
        return by_source(kg, triples)[1]
    return None


def public_relation_owners(kg, k: int, *, seed: int) -> torch.Tensor:
    """``(num_relations,)`` the holder of each relation, from public inputs only (a DP run's ``relation``).

    The relation names of the (public) vocabulary are ordered by SHA-256 of ``seed`` and the name, and
    dealt to holders ``0, 1, .., k-1, 0, ..``: no training statement is read, so adding or removing
    one changes no holder's relations (and every holder gets a relation when there are ``k`` or more).
    """
    import hashlib

    if kg.num_relations < k:
        raise ConfigError(f"{k} clients but the vocabulary has only {kg.num_relations} relations", field="clients")

    def key(r: int) -> tuple[bytes, str]:
        name = kg.relations[r]
        return hashlib.sha256(f"textkg-relation-partition\0{seed}\0{name}".encode()).digest(), name

    owner = torch.empty(kg.num_relations, dtype=torch.long)
    for i, r in enumerate(sorted(range(kg.num_relations), key=key)):
        owner[r] = i % k
    return owner


def _by_relation(kg, train: torch.Tensor, k: int) -> tuple[Sequence[str], torch.Tensor]:
    counts = torch.bincount(train[:, 1], minlength=kg.num_relations)
    present = [int(r) for r in torch.nonzero(counts).squeeze(1)]
    if len(present) < k:
        raise ConfigError(f"{k} clients but only {len(present)} relations have training statements", field="clients")
    load = [0] * k
    owner = torch.full((kg.num_relations,), SHARED, dtype=torch.long)
    for r in sorted(present, key=lambda r: (-int(counts[r]), r)):  # largest first, onto the lightest client
        c = min(range(k), key=lambda c: (load[c], c))
        owner[r], load[c] = c, load[c] + int(counts[r])
    return [f"client-{c}" for c in range(k)], owner[train[:, 1]]


def entity_sources(kg) -> torch.Tensor:
    """``(num_entities,)`` each entity's annotation source (an index of ``HPO_SOURCES``), ``SHARED`` for
    terms and genes: read from the entity's id prefix and type alone (public inputs)."""
    prefixes = [e.split(":", 1)[0] for e in kg.entities]
    if not any(p in HPO_SOURCES for p in prefixes) or kg.entity_types is None:
        raise ConfigError(
            "the source partition needs the hpo graph (diseases with OMIM/ORPHA/DECIPHER ids)", field="partition"
        )
    return torch.tensor(
        [
            HPO_SOURCES.index(p) if (p in HPO_SOURCES and t == "disease") else SHARED
            for p, t in zip(prefixes, kg.entity_types, strict=True)
        ],
        dtype=torch.long,
    )


def by_source(kg, train: torch.Tensor) -> tuple[Sequence[str], torch.Tensor]:
    source = entity_sources(kg)
    head, tail = source[train[:, 0]], source[train[:, 2]]
    if bool(((head != SHARED) & (tail != SHARED) & (head != tail)).any()):
        raise ConfigError(
            "a statement links diseases of two sources; the source partition cannot place it", field="partition"
        )
    return HPO_SOURCES, torch.where(head != SHARED, head, tail)


def _from_column_file(kg, train: torch.Tensor, path: Path) -> tuple[Sequence[str], torch.Tensor]:
    if not path.is_file():
        raise DataError("no such partition file", file=path)
    ent = {e: i for i, e in enumerate(kg.entities)}
    rel = {r: i for i, r in enumerate(kg.relations)}
    row_of: dict[tuple[int, int, int], int] = {}
    for i, (h, r, t) in enumerate(train.tolist()):
        row_of.setdefault((h, r, t), i)
    assignment = torch.full((len(train),), -2, dtype=torch.long)  # -2: not listed yet
    clients: list[str] = []
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            cols = line.rstrip("\n").split("\t")
            if len(cols) != 4:
                raise DataError(
                    f"expected 4 tab-separated columns (head, relation, tail, client), got {len(cols)}",
                    file=path,
                    line=n,
                )
            h, r, t, client = cols
            for name, value, table in (("head", h, ent), ("relation", r, rel), ("tail", t, ent)):
                if value not in table:
                    raise DataError(f"unknown {name} {value!r}", file=path, line=n, field=name)
            if not client:
                raise DataError("empty client name", file=path, line=n, field="client")
            key = (ent[h], rel[r], ent[t])
            if key not in row_of:
                raise DataError("not a training statement", file=path, line=n, field="head")
            i = row_of[key]
            if assignment[i] != -2:
                raise DataError("statement listed twice", file=path, line=n, field="head")
            if client == SHARED_NAME:
                assignment[i] = SHARED
            else:
                check_name(client, field="client", file=path, line=n, error=DataError)  # becomes clients/<name>/
                if client not in clients:
                    clients.append(client)
                assignment[i] = clients.index(client)
    missing = (assignment == -2).nonzero().squeeze(1)
    for i in missing.tolist():  # duplicates of a listed statement share its client
        first = row_of[tuple(train[i].tolist())]
        assignment[i] = assignment[first]
    missing = (assignment == -2).nonzero().squeeze(1)
    if len(missing):
        h, r, t = train[missing[0]].tolist()
        raise DataError(
            f"{len(missing)} training statements are not listed, e.g. "
            f"{kg.entities[h]}\t{kg.relations[r]}\t{kg.entities[t]}",
            file=path,
            field="client",
        )
    if len(clients) < 2:
        raise DataError(
            f"a federation needs at least 2 clients, the file names {len(clients)}", file=path, field="client"
        )
    names = sorted(clients)  # client k is the k-th name in sorted order, whatever the file's line order
    remap = torch.tensor([names.index(c) for c in clients] + [SHARED], dtype=torch.long)
    return names, remap[assignment]  # SHARED (-1) indexes the last entry
