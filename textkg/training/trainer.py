"""The training loop: schedule → steps → validation → checkpoints.

Model selection is by validation MRR (on a seeded subset of at most
``valid_max_triples`` triples). Validation and test statements are treated as
public: only training statements are protected by the privacy mechanism.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from textkg.progress import bar as progress_bar
from textkg.progress import stage
from textkg.training import checkpoint as ckpt
from textkg.training.config import RunConfig
from textkg.training.negatives import corrupt
from textkg.training.one_vs_all import one_vs_all_loss, pool_positions, sample_pool
from textkg.training.optim import build_optimizer
from textkg.training.private_rows import PrivateRowUpdates
from textkg.training.schedule import EpochPlan, interleave, plan_epoch, public_batches


@dataclass
class TrainState:
    """Counters and model-selection state saved in every checkpoint."""

    epoch: int = 0
    step: int = 0
    private_steps: int = 0
    best_mrr: float = -1.0
    best_epoch: int = -1
    seconds: float = 0.0
    stopped: str | None = None
    history: list = field(default_factory=list)
    step_in_epoch: int = 0  # steps of the current epoch already taken (mid-epoch checkpoints)
    epoch_loss_sum: float = 0.0
    epoch_loss_count: int = 0


class Trainer:
    """Trains a KG model with ordinary and/or DP-SGD steps.

    Args:
        model: a :class:`textkg.models.KGEModel`.
        config: the run configuration.
        public_triples: ``(N_U, 3)`` statements trained without DP.
        entity_pool: ``(P,)`` entities negatives are drawn from.
        validate: ``model -> valid MRR`` used for model selection.
        out_dir: where checkpoints go.
        private: a :class:`textkg.training.private_training.PrivateTraining` from
            :meth:`textkg.training.privacy_engine.PrivacyEngine.make_private` (or ``make_private_units``), a
            :class:`textkg.training.unit_step.UnitSGD` (the units trained without noise), or ``None``.
        loss_fn: per-example loss over ``(…, 1 + K)`` scores.
    """

    def __init__(
        self,
        model,
        *,
        config: RunConfig,
        public_triples,
        entity_pool,
        validate: Callable,
        out_dir: Path,
        private=None,
        loss_fn: Callable,
    ) -> None:
        self.model = model
        self.config = config
        self.public = public_triples
        self.entity_pool = entity_pool
        self.validate = validate
        self.out_dir = Path(out_dir)
        self.private = private
        self.loss_fn = loss_fn
        tc = config.train
        self.optimizer = build_optimizer(model, name=tc.optimizer, lr=tc.lr, weight_decay=tc.weight_decay)
        self.generator = torch.Generator().manual_seed(tc.seed)
        self.plan = plan_epoch(
            num_public=len(public_triples),
            num_private=0,
            batch_size=tc.batch_size,
        )
        if private is not None:  # round(N̄/B) steps, from the public size: never from the private count
            self.plan = EpochPlan(public_steps=self.plan.public_steps, private_steps=private.steps_per_epoch)
        #: privacy.private_updates "private-rows": the private steps' own optimizer over the private-only rows
        self.private_rows: PrivateRowUpdates | None = None
        if private is not None and config.privacy.private_updates == "private-rows":
            self.private_rows = PrivateRowUpdates(model, public_triples, lr=tc.lr, weight_decay=tc.weight_decay)
            if config.privacy.unit == "entity":  # a unit's gradient is clipped on the rows the step updates only
                private.trained_rows = self.private_rows.masks
        self.state = TrainState()
        self._base_lrs = [group["lr"] for group in self.optimizer.param_groups]
        self._pool_positions = pool_positions(entity_pool, model.num_entities) if tc.negatives == "all" else None
        #: train.ema_decay: a moving average of the trained weights (post-processing: no privacy cost)
        self.ema: dict[str, torch.Tensor] | None = None
        if tc.ema_decay:
            self.ema = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}

    # -- checkpoints ---------------------------------------------------------------
    def save(self) -> None:
        payload = {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "generator": self.generator.get_state(),
            "state": asdict(self.state),
            "privacy": None if self.private is None else self.private.state_dict(),
            "ema": self.ema,
        }
        if self.private_rows is not None:
            payload["private_optimizer"] = self.private_rows.state_dict()
        ckpt.atomic_torch_save(self.out_dir / ckpt.CHECKPOINT, payload, private=True)  # the noise generator

    def _save_epoch(self, new_best: bool, *, use_ema: bool = False) -> None:
        """Checkpoint the finished epoch, then publish a new best model.

        Order matters for privacy: the best model is staged, the checkpoint that
        records it is written, and only then is it renamed to ``best_model.pt``.
        A crash before the checkpoint leaves no new ``best_model.pt``, so a resumed
        run that replays the epoch cannot leave two models behind from one draw
        of the noise; a crash after it is finished by :meth:`restore`.
        """
        pending = self.out_dir / f"{ckpt.BEST_MODEL}.pending-{self.state.epoch}"
        if new_best:
            if use_ema:
                with self._ema_weights():
                    ckpt.atomic_torch_save(pending, self.model.state_dict())
            else:
                ckpt.atomic_torch_save(pending, self.model.state_dict())
        self.save()
        if new_best:
            os.replace(pending, self.out_dir / ckpt.BEST_MODEL)

    def restore(self, payload: dict) -> None:
        self.model.load_state_dict(payload["model"])
        self.optimizer.load_state_dict(payload["optimizer"])
        self.generator.set_state(payload["generator"])
        self.state = TrainState(**payload["state"])
        if self.private is not None and payload.get("privacy") is not None:
            self.private.load_state_dict(payload["privacy"])
        if self.private_rows is not None and payload.get("private_optimizer") is not None:
            self.private_rows.load_state_dict(payload["private_optimizer"])
        if self.ema is not None and payload.get("ema") is not None:
            self.ema = {n: t.clone() for n, t in payload["ema"].items()}
        for pending in self.out_dir.glob(f"{ckpt.BEST_MODEL}.pending-*"):
            # crashed after staging a best model: publish it only if the checkpoint recorded it
            if pending.name.rsplit("-", 1)[1] == str(self.state.best_epoch):
                os.replace(pending, self.out_dir / ckpt.BEST_MODEL)
            else:
                pending.unlink()

    # -- steps ---------------------------------------------------------------------
    def _public_step(self, idx: torch.Tensor) -> float:
        tc = self.config.train
        self.optimizer.zero_grad(set_to_none=True)
        if self._pool_positions is not None:  # 1-vs-all: every training entity is a negative
            triples = self.public[idx]
            pool, positions = self.entity_pool, self._pool_positions
            if tc.pool_size:  # sampled softmax: a random share of the pool, shared by the batch
                pool, positions = sample_pool(
                    self.entity_pool,
                    triples,
                    tc.pool_size,
                    num_entities=self.model.num_entities,
                    generator=self.generator,
                )
            loss = one_vs_all_loss(
                self.model,
                triples,
                entity_pool=pool,
                positions=positions,
                temperature=tc.temperature,
                generator=self.generator,
            ).mean()
        else:
            batch = corrupt(
                self.public[idx], num_negatives=tc.num_negatives, entity_pool=self.entity_pool, generator=self.generator
            )
            loss = self.loss_fn(self.model(batch, generator=self.generator)).mean()
        loss.backward()
        self.optimizer.step()
        self._update_ema()
        return float(loss.detach())

    def _private_step(self) -> bool:
        """One private step; False when the budget forbids it."""
        if self.private.budget_exhausted():
            return False
        self.optimizer.zero_grad(set_to_none=True)
        self.private.step(self.model)  # its randomness is secret and per step: not self.generator
        if self.private_rows is not None:  # only the private-only rows, by their own optimizer
            self.private_rows.step(self.model)
        else:
            self.optimizer.step()
        self._update_ema()
        self.state.private_steps += 1
        return True

    # -- the moving average (train.ema_decay) ---------------------------------------
    @torch.no_grad()
    def _update_ema(self) -> None:
        """``ema ← d_t·ema + (1 − d_t)·w`` with ``d_t = min(d, (1 + t)/(10 + t))``, ``t`` the
        steps taken before this one (the warm-up of TensorFlow's ExponentialMovingAverage)."""
        if self.ema is None:
            return
        t = self.state.step
        decay = min(self.config.train.ema_decay, (1 + t) / (10 + t))
        for name, param in self.model.named_parameters():
            if name in self.ema:
                self.ema[name].lerp_(param.detach(), 1.0 - decay)

    @contextmanager
    def _ema_weights(self) -> Iterator[None]:
        """The averaged weights in the model for the ``with`` block; the raw ones after it."""
        assert self.ema is not None
        params = dict(self.model.named_parameters())
        raw = {name: params[name].detach().clone() for name in self.ema}
        with torch.no_grad():
            for name, value in self.ema.items():
                params[name].copy_(value)
        try:
            yield
        finally:
            with torch.no_grad():
                for name, value in raw.items():
                    params[name].copy_(value)

    def _validate(self, record: dict) -> tuple[float, bool]:
        """Validation MRR of the epoch's candidate and whether it is the moving average."""
        mrr = self.validate(self.model)
        if self.ema is None:
            return mrr, False
        with self._ema_weights():
            mrr_ema = self.validate(self.model)
        record["valid_mrr_raw"], record["valid_mrr_ema"] = mrr, mrr_ema
        return max(mrr, mrr_ema), mrr_ema > mrr

    def _set_learning_rate(self, step: int) -> None:
        """``train.lr_schedule`` at ``step``; computed from the step count alone, so resuming
        from a checkpoint continues the same schedule."""
        if self.config.train.lr_schedule == "constant":
            return
        total = self.config.train.epochs * (self.plan.public_steps + self.plan.private_steps)
        factor = 0.5 * (1.0 + math.cos(math.pi * min(step, total) / total))
        for group, base in zip(self.optimizer.param_groups, self._base_lrs, strict=True):
            group["lr"] = base * factor
        if self.private_rows is not None:
            self.private_rows.set_lr_factor(factor)

    def _epoch_generator(self) -> torch.Generator:
        """Seeds the epoch's public permutation from (seed, epoch) alone, so a
        run resumed from a mid-epoch checkpoint sees the same batches."""
        return torch.Generator().manual_seed(self.config.train.seed * 1_000_003 + self.state.epoch)

    def _run_epoch(self, bar, deadline: float | None = None) -> float | None:
        """Run the rest of the current epoch (all of it unless resumed mid-epoch).

        ``deadline`` (``time.perf_counter()`` value): stop after the step that
        passes it, so ``max_minutes`` holds even when one epoch is long.
        """
        tc = self.config.train
        kinds = (
            interleave(self.plan)
            if self.plan.public_steps and self.plan.private_steps
            else (["public"] * self.plan.public_steps + ["private"] * self.plan.private_steps)
        )
        public_iter = public_batches(len(self.public), batch_size=tc.batch_size, generator=self._epoch_generator())
        for kind in kinds[: self.state.step_in_epoch]:  # taken before the checkpoint we resumed from
            if kind == "public":
                next(public_iter)
        st = self.state
        self.model.train()
        for kind in kinds[st.step_in_epoch :]:
            self._set_learning_rate(st.step)
            if kind == "public":
                st.epoch_loss_sum += self._public_step(next(public_iter))
                st.epoch_loss_count += 1
            elif not self._private_step():
                st.stopped = "privacy budget reached"
                break
            st.step += 1
            st.step_in_epoch += 1
            bar.update(1)
            if tc.checkpoint_every and st.step % tc.checkpoint_every == 0:
                self.save()
            if deadline is not None and time.perf_counter() > deadline:
                st.stopped = f"max_minutes={tc.max_minutes} reached"
                break
        mean_loss = st.epoch_loss_sum / st.epoch_loss_count if st.epoch_loss_count else None
        st.step_in_epoch, st.epoch_loss_sum, st.epoch_loss_count = 0, 0.0, 0
        postfix = {}
        if mean_loss is not None:
            postfix["public_loss"] = f"{mean_loss:.4f}"
        if self.private is not None and getattr(self.private, "accounted", True):
            postfix["eps"] = f"{self.private.epsilon():.3f}"
        bar.set_postfix(postfix)
        return mean_loss

    def train_epochs(self, epochs: int) -> list[float | None]:
        """Run ``epochs`` more epochs with no validation, checkpoint or model selection.

        For runners that own those themselves (federated rounds): the epoch
        counter, the learning-rate schedule over ``train.epochs`` and the privacy
        ledger carry on from call to call. Returns each epoch's mean public loss.
        """
        losses = []
        steps_per_epoch = self.plan.public_steps + self.plan.private_steps
        with progress_bar(epochs * steps_per_epoch, progress=False) as bar:
            for _ in range(epochs):
                if self.state.stopped is not None:
                    break
                losses.append(self._run_epoch(bar))
                self.state.epoch += 1
        return losses

    def fit(self, *, deadline: float | None = None, progress: bool = True) -> TrainState:
        """Train until ``epochs``, the privacy budget or ``max_minutes``; keep the best model."""
        tc = self.config.train
        steps_per_epoch = self.plan.public_steps + self.plan.private_steps
        bar = progress_bar(
            tc.epochs * steps_per_epoch,
            progress=progress,  # a log gets one line per epoch instead
            initial=self.state.epoch * steps_per_epoch + self.state.step_in_epoch,
            desc="train",
            unit="step",
            dynamic_ncols=True,
            mininterval=2.0,
        )
        start = time.perf_counter() - self.state.seconds
        limit = None if tc.max_minutes is None else start + 60 * tc.max_minutes
        while self.state.epoch < tc.epochs and self.state.stopped is None:
            public_loss = self._run_epoch(bar, limit)
            self.state.epoch += 1
            self.state.seconds = time.perf_counter() - start
            record: dict[str, object] = {
                "epoch": self.state.epoch,
                "step": self.state.step,
                "seconds": self.state.seconds,
                "public_loss": public_loss,
            }
            if self.private is not None and getattr(self.private, "accounted", True):  # not the units' plain SGD
                record["epsilon"] = self.private.epsilon()
            new_best = use_ema = False
            if self.state.epoch % tc.eval_every == 0 or self.state.epoch == tc.epochs or self.state.stopped:
                mrr, use_ema = self._validate(record)
                record["valid_mrr"] = mrr
                if self.ema is not None:
                    record["weights"] = "ema" if use_ema else "raw"
                if mrr > self.state.best_mrr:
                    self.state.best_mrr, self.state.best_epoch = mrr, self.state.epoch
                    new_best = True
            self.state.history.append(record)
            if progress:
                stage(_epoch_line(record, tc.epochs), progress=progress)
            if tc.max_minutes is not None and self.state.seconds > 60 * tc.max_minutes:
                self.state.stopped = f"max_minutes={tc.max_minutes} reached"
            self._save_epoch(new_best, use_ema=use_ema)
        bar.close()
        if self.private is not None:
            self.private.close()
        if (self.out_dir / ckpt.BEST_MODEL).exists():
            self.model.load_state_dict(ckpt.load(self.out_dir / ckpt.BEST_MODEL))
        return self.state


def _epoch_line(record: dict, epochs: int) -> str:
    """``epoch k/K: loss …, validation MRR …, ε …`` (what a log shows when no bar does)."""
    parts = [f"epoch {record['epoch']}/{epochs} ({record['seconds']:.0f} s)"]
    if record.get("public_loss") is not None:
        parts.append(f"loss {record['public_loss']:.4f}")
    if record.get("valid_mrr") is not None:
        parts.append(f"validation MRR {record['valid_mrr']:.4f}")
    if record.get("epsilon") is not None:
        parts.append(f"epsilon {record['epsilon']:.3f}")
    return ", ".join(parts)
