"""Data-parallel training on ``torch.distributed``: a runner beside the trainer.

``torchrun --standalone --nproc-per-node N -m textkg train ...`` (or ``textkg
train --nproc N``, which starts that command) runs the same pipeline in N
processes (gloo on CPU; NCCL where CUDA tensors are used). Every rank builds
the same model from the same seed and draws the same shared randomness (the
epoch's batch order, the corruptions, the 1-vs-all pool's structural dropout)
from the same generator. Each rank then computes the loss of its share of the
batch (rows ``rank, rank + N, ...``) divided by the *global* batch size, the
gradients are summed across ranks (``all_reduce``), and every rank takes the
same Adam step. The update is the one-process update up to float summation
order, so a 2-process run gives the same ``best_model.pt`` as one process with
the same seed and flags (checked in ``tests/training/test_distributed.py``).

What differs from one process:

* Only rank 0 writes the run directory; the other ranks write to a temporary
  directory that is removed at the end. Checkpoints hold the same state as a
  one-process run's, so ``--resume`` works from any number of processes to any
  other.
* Structural dropout under *sampled* negatives is drawn per row of a rank's own
  share, from a per-rank generator (one process draws it from the shared one):
  the same distribution, not the same draw. The 1-vs-all loss draws its
  dropout over the pool, shared by the whole batch, so it stays exact.
* Validation and test are sharded: rank ``r`` ranks queries ``r, r + N, ...``
  and the ranks are gathered on every rank (:class:`~textkg.evaluation.ranking.QueryShard`),
  so every rank computes the one-process metrics. The placement tables and the
  neighbour vote are still computed whole on every rank.

Private steps (``--privacy full|confidential``, DP-SGD) keep the mechanism and
the ledger of one process (docs/scaling.md, "Private training"):

* Rank 0 draws the secret key and sends it to the other ranks over the process
  group (which must therefore be private to the data holder: one machine, or a
  network nobody else can read). Every rank then draws the same Poisson sample,
  corruptions, dropout and noise, step by step, as one process with that key would.
* Rank ``r`` computes and clips the per-example gradients of rows ``r, r + N, ...``
  of the sample. The clipped sums are summed across ranks in float64
  (``all_reduce``), and every rank adds the same noise to the total once and
  divides by the expected batch size. Every rank's accountant records the same
  one event per step, so each rank's ledger is the one-process ledger.
* The union of the shares is the whole Poisson sample at rate q, so the step is
  the one-process step up to float summation order (checked, with a public key,
  in ``tests/training/test_distributed_private.py``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
import torch.distributed as dist

from textkg.errors import ConfigError
from textkg.evaluation.ranking import QueryShard
from textkg.privacy.randomness import SecretRandomness
from textkg.training.negatives import corrupt
from textkg.training.one_vs_all import one_vs_all_loss, sample_pool
from textkg.training.private_step import Shard
from textkg.training.trainer import Trainer

#: environment variables torchrun sets in every process it starts
WORLD_SIZE_ENV = "WORLD_SIZE"


def world_size_from_env() -> int:
    """``WORLD_SIZE`` as torchrun sets it (1 when absent)."""
    raw = os.environ.get(WORLD_SIZE_ENV, "1")
    try:
        return max(1, int(raw))
    except ValueError:
        raise ConfigError(f"{WORLD_SIZE_ENV}={raw!r} is not an integer", field=WORLD_SIZE_ENV) from None


class DataParallelTrainer(Trainer):
    """:class:`Trainer` whose public steps are split across the ranks of the default process group."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if not dist.is_initialized():
            raise ConfigError("DataParallelTrainer needs an initialised torch.distributed process group")
        check_supported(self.config)
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        if self.private is not None:
            self._share_private_steps()
        structural = getattr(self.model, "structural", None)
        has_dropout = float(getattr(structural, "dropout", 0.0) or 0.0) > 0
        # sampled negatives + structural dropout: each rank draws its own rows' dropout (see the module docstring)
        self._row_generator = (
            torch.Generator().manual_seed(self.config.train.seed * 1_000_003 + 7919 * (self.rank + 1))
            if has_dropout
            else None
        )

    def _public_step(self, idx: torch.Tensor) -> float:
        tc = self.config.train
        self.optimizer.zero_grad(set_to_none=True)
        size = len(idx)
        rows = None  # the entity-table rows this step can touch (sampled negatives); 1-vs-all touches all
        if self._pool_positions is not None:
            triples = self.public[idx]
            pool, positions = self.entity_pool, self._pool_positions
            if tc.pool_size:  # drawn from the shared generator with the whole batch: the same on every rank
                pool, positions = sample_pool(
                    self.entity_pool,
                    triples,
                    tc.pool_size,
                    num_entities=self.model.num_entities,
                    generator=self.generator,
                )
            losses = one_vs_all_loss(
                self.model,
                triples[self.rank :: self.world],
                entity_pool=pool,
                positions=positions,
                temperature=tc.temperature,
                generator=self.generator,  # the pool's dropout: shared by the batch, the same on every rank
            )
        else:
            batch = corrupt(
                self.public[idx], num_negatives=tc.num_negatives, entity_pool=self.entity_pool, generator=self.generator
            )
            losses = self.loss_fn(self.model(batch[self.rank :: self.world], generator=self._row_generator))
            rows = self._batch_rows(batch)
        loss_sum = losses.sum()
        (loss_sum / size).backward()
        self._all_reduce_gradients(rows)
        self.optimizer.step()
        total = loss_sum.detach().reshape(1).clone()
        dist.all_reduce(total)
        return float(total) / size

    def _share_private_steps(self) -> None:
        """Give every rank rank 0's secret key and this rank's :class:`Shard` of each private step.

        A resumed run then loads the key of its checkpoint on every rank (each rank
        restores the same checkpoint), so the broadcast matters for a new run only.
        """
        private = self.private
        assert private is not None
        state = [private.randomness.state_dict() if self.rank == 0 else None]
        dist.broadcast_object_list(state, src=0)
        if self.rank != 0:
            received = state[0]
            assert received is not None
            private.close()  # no noise drawn ahead from this rank's own key
            private.randomness = SecretRandomness.from_state_dict(received)
        private.shard = Shard(rank=self.rank, world=self.world, reduce=_all_reduce_sum)

    def _batch_rows(self, batch: torch.Tensor) -> dict[int, torch.Tensor] | None:
        """``{id(entity table): rows}`` that the whole batch ``(B, 1 + K, 3)`` can touch (every rank's
        share, the unseen row that structural dropout reads included), or ``None`` without a table.
        Every rank holds the whole batch, so every rank computes the same rows."""
        structural = getattr(self.model, "structural", None)
        if structural is None:
            return None
        ends = batch[..., [0, 2]].reshape(-1).to(structural.struct_index.device)
        rows = structural.struct_index[ends]
        if structural.dropout > 0:  # a dropped occurrence reads the unseen row
            rows = torch.cat([rows, torch.tensor([structural.unseen_row], device=ends.device)])
        return {id(structural.weight): rows.unique()}

    def _all_reduce_gradients(self, rows: dict[int, torch.Tensor] | None = None) -> None:
        """Sum every gradient across ranks. A parameter no rank touched keeps ``grad=None``, as in one
        process (Adam then leaves it and its moments alone).

        ``rows``: ``{id(table): row ids}`` outside which a table's gradient is zero on every rank
        (:meth:`_batch_rows`): only those rows are sent, ``B (1 + K) 2`` rows at most instead of the
        whole ``(N, d)`` table."""
        rows = rows or {}
        params = [p for p in self.model.parameters() if p.requires_grad]
        device = params[0].device if params else torch.device("cpu")  # NCCL reduces device tensors only
        touched = torch.tensor([p.grad is not None for p in params], dtype=torch.int32, device=device)
        dist.all_reduce(touched)
        live = [p for p, t in zip(params, touched.tolist(), strict=True) if t > 0]
        if live:

            def part(p: torch.Tensor) -> torch.Tensor:
                if p.grad is not None and p.grad.is_sparse:  # lazy Adam: row-sparse, its rows within rows[id(p)]
                    g = p.grad.coalesce()
                    mine = rows[id(p)]
                    dense = torch.zeros((len(mine), *p.shape[1:]), dtype=p.dtype, device=p.device)
                    dense[torch.searchsorted(mine, g.indices()[0])] = g.values()
                    return dense.reshape(-1)
                g = p.grad if p.grad is not None else torch.zeros_like(p)
                return (g[rows[id(p)]] if id(p) in rows else g).reshape(-1)

            parts = [part(p) for p in live]
            flat = torch.cat(parts)
            dist.all_reduce(flat)
            offset = 0
            for p, sent in zip(live, parts, strict=True):
                reduced = flat[offset : offset + sent.numel()]
                offset += sent.numel()
                if id(p) in rows and getattr(self.model, "sparse_entity_rows", False):
                    # lazy Adam: the same row-sparse gradient one process forms (every row the batch read)
                    r = rows[id(p)]
                    values = reduced.view(len(r), *p.shape[1:]).clone()
                    p.grad = torch.sparse_coo_tensor(
                        r[None], values, p.shape, check_invariants=False, is_coalesced=True
                    )
                elif id(p) in rows:
                    grad = p.grad if p.grad is not None else torch.zeros_like(p)
                    grad[rows[id(p)]] = reduced.view(-1, *p.shape[1:])
                    p.grad = grad
                else:
                    p.grad = reduced.view_as(p).clone()
        for p, t in zip(params, touched.tolist(), strict=True):
            if t == 0:
                p.grad = None


def check_supported(cfg) -> None:
    """Raise :class:`ConfigError` for a run the data-parallel runner cannot train."""
    if cfg.privacy.unit == "entity":  # the unit step has no data-parallel share (textkg.training.unit_step)
        raise ConfigError(
            "--privacy-unit entity is not supported with torchrun / --nproc; train it in one process",
            field="privacy.unit",
        )
    if cfg.privacy.private_updates != "all":
        raise ConfigError(
            f"--private-updates {cfg.privacy.private_updates} is not supported with torchrun / --nproc yet",
            field="privacy.private_updates",
        )
    if cfg.train.optimizer == "lazy-adam" and cfg.model is not None and cfg.model.structural_dropout:
        raise ConfigError(  # each rank draws its own rows' dropout: the rows read differ from one process's
            "lazy-adam with structural dropout is not supported with torchrun / --nproc yet; use adam or one process",
            field="train.optimizer",
        )


def rank_device(name: str) -> str:
    """The device this rank computes on: with ``auto`` or ``cuda`` and CUDA present, GPU
    ``LOCAL_RANK`` (modulo the GPU count), one GPU per process as torchrun lays them out;
    any other name (``cpu``, ``cuda:N``, ``mps``) as given."""
    if name in ("auto", "cuda") and torch.cuda.is_available():
        local = int(os.environ.get("LOCAL_RANK", "0"))
        return f"cuda:{local % torch.cuda.device_count()}"
    return name


def _all_gather(part: torch.Tensor) -> list[torch.Tensor]:
    """Every rank's ``part`` (lengths may differ by rank), in rank order, on every rank."""
    parts: list[torch.Tensor | None] = [None] * dist.get_world_size()
    dist.all_gather_object(parts, part)
    return [p for p in parts if p is not None]


def _all_reduce_sum(tensors: dict[str, torch.Tensor]) -> None:
    """Sum every tensor of ``tensors`` across ranks, in place (one ``all_reduce`` per dtype)."""
    by_dtype: dict[torch.dtype, list[torch.Tensor]] = {}
    for t in tensors.values():
        by_dtype.setdefault(t.dtype, []).append(t)
    for group in by_dtype.values():
        flat = torch.cat([t.reshape(-1) for t in group])
        dist.all_reduce(flat)
        offset = 0
        for t in group:
            t.copy_(flat[offset : offset + t.numel()].view_as(t))
            offset += t.numel()


def run_distributed(cfg, out_dir: Path, *, resume: bool = False, progress: bool = True) -> dict | None:
    """:func:`textkg.pipeline.job.run` on every rank of a torchrun job; the metrics on rank 0, ``None`` elsewhere.

    Initialises the default process group from torchrun's environment unless it
    is already initialised (gloo on the CPU; NCCL when the ranks compute on CUDA,
    each on GPU ``LOCAL_RANK``, :func:`rank_device`), and destroys it at the end
    if it created it.
    """
    import dataclasses

    from textkg.pipeline.job import run

    device = rank_device(cfg.train.device)
    if device != cfg.train.device:
        cfg = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, device=device))
    if device.startswith("cuda"):
        torch.cuda.set_device(torch.device(device))  # NCCL's collectives use the current device
    created = not dist.is_initialized()
    if created:
        dist.init_process_group(backend="nccl" if device.startswith("cuda") else "gloo")
    rank = dist.get_rank()
    scratch = None
    try:
        target = Path(out_dir)
        if rank != 0:  # ranks > 0 write their (identical) files to a scratch directory
            scratch = Path(tempfile.mkdtemp(prefix=f"textkg-rank{rank}-"))
            if resume:
                shutil.copytree(target, scratch, dirs_exist_ok=True)
            target = scratch
        dist.barrier()  # every copy is taken before rank 0 writes anything
        shard = QueryShard(rank=rank, world=dist.get_world_size(), gather=_all_gather)
        metrics = run(
            cfg,
            target,
            resume=resume,
            progress=progress and rank == 0,
            trainer_class=DataParallelTrainer,
            query_shard=shard,
        )
        dist.barrier()
        return metrics if rank == 0 else None
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
        if created:
            dist.destroy_process_group()


def launch(nproc: int, argv: list[str]) -> int:
    """``textkg train --nproc N ...``: re-run the command under ``torchrun --standalone --nproc-per-node N``.

    ``argv`` is the command line without ``--nproc``; returns torchrun's exit code.
    """
    if nproc < 1:
        raise ConfigError("must be >= 1", field="nproc")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}", "-m", "textkg"]
    return subprocess.call([*cmd, *argv])
