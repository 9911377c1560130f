"""``exchange.method: ppat``: FKGE's PPAT network between a sender (the client) and a receiver (the host).

One directed exchange (:meth:`PPATExchange.send`), FKGE (Peng et al. 2021, arXiv:2105.07615v2, §3.3)
with PATE-GAN's loop (Jordon et al. 2019, Alg. 1), :mod:`textkg.federated.cross_graph.ppat`:

1. the client releases its aligned rows once under the Gaussian mechanism (clipped to C, N(0, σ²C²),
   the ``procrustes`` method's release, composed in its ledger). FKGE sends the client's generated
   samples in the clear; here everything the client sends (the samples W x̃ each iteration and the
   translated rows at the end) is post-processing of this release, so the client's rows are covered.
   ``ppat.client_release: clear`` is FKGE as published: the rows are only clipped, nothing covers
   them, and the party's block says so;
2. the host trains T teachers on disjoint parts of its aligned rows (clipped to C too, so both sides
   live in the same ball) against the generated samples, and answers each query with the GNMax noisy
   argmax of their votes, composed in ITS ledger before the first answer leaves;
3. the client's student learns the noisy labels; its generator W trains against the student;
4. the client sends the translated rows W x̃; the host scales them to its rows' mean norm (its own
   data) and the runner moves its aligned rows toward them, fine-tunes and keeps the update only if
   validation improves (FKGE's backtracking, :func:`textkg.federated.cross_graph.runner.apply_release`).

The protocol is interactive (many messages per exchange), so it runs in process only; ``--processes``
carries one-way methods.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from textkg.federated.cross_graph.ledger import PPATLedger
from textkg.federated.cross_graph.ppat import (
    PPATClient,
    PPATHost,
    noisy_argmax,
    ppat_noise,
    split_noise,
    teacher_parts,
    train_ppat,
)
from textkg.federated.cross_graph.procrustes import clip_rows, release_rows


class PPATExchange:
    """FKGE's PPAT as an exchange method (:mod:`textkg.federated.cross_graph.methods`)."""

    name = "ppat"
    one_way = False

    def noise(self, config) -> tuple[float, float]:
        """``(σ_rows, σ_votes)``: each party's ``(K − 1)·rounds`` releases (as client) and as many
        exchanges of ``iterations · queries`` answers (as host) meet ``exchange.target_epsilon``
        together; a given ``noise_multiplier`` σ is split the same way (:func:`~textkg.federated.
        cross_graph.ppat.split_noise`)."""
        ex = config.exchange
        per_party = ex.rounds * (len(config.holders) - 1)
        kwargs = {
            "releases": per_party,
            "vote_exchanges": per_party,
            "queries": ex.ppat.total_queries,
            "vote_share": ex.ppat.vote_share,
        }
        if ex.ppat.client_release == "clear":  # FKGE as published: the whole budget on the votes
            kwargs.update(releases=0, vote_share=1.0)
        if ex.noise_multiplier is not None:
            return split_noise(float(ex.noise_multiplier), **kwargs)
        return ppat_noise(target_epsilon=float(ex.target_epsilon), delta=ex.delta, **kwargs)

    def noise_multiplier(self, config) -> float:
        return self.noise(config)[0]

    def ledger(self, name: str, config, sigma: float, secret: bool) -> PPATLedger:
        ex = config.exchange
        rows, votes = self.noise(config)
        return PPATLedger(name, delta=ex.delta, noise_multiplier=rows, votes_noise=votes, clip=ex.clip, secret=secret)

    def send(self, step: int, sender, receiver, ex) -> dict:
        """Run the protocol (module docstring) and return the translated rows with the client's block;
        ``replies`` holds what the host sent back (the noisy labels, with the host's block)."""
        cfg, client_name, host_name = ex.ppat, sender.party.name, receiver.party.name
        if receiver.step >= step:  # applied before a crash (resume): nothing is run or answered again
            block = next((m["privacy"] for m in sender.ledger.sent if m["step"] == step), None)
            message = {"step": step, "from": client_name, "to": host_name, "object": "translated rows"}
            return {**message, "rows": None, "privacy": block, "replies": [], "resumed": True}
        names = sender.aligned[host_name]
        released, release_block = _release(step, sender, host_name, ex)
        host_rows = receiver.party.rows(names)
        seed = int(torch.randint(2**62, (1,), generator=receiver.randomness.torch_generator(step=step)))
        parts = teacher_parts(names, cfg.teachers, session=f"{client_name}|{host_name}")
        host = PPATHost(clip_rows(host_rows.double(), ex.clip), parts, cfg, seed=seed)
        labels_block = _once(
            receiver,
            step,
            "noisy teacher labels",
            lambda: receiver.ledger.record_votes(step=step, to=client_name, answers=cfg.total_queries),
        )
        noise = receiver.randomness.normal({"z": (cfg.total_queries, 2)}, step=step, purpose="noise")["z"]
        answers: list[torch.Tensor] = []

        def label(queries: torch.Tensor, it: int) -> torch.Tensor:  # the host's only answer
            counts = host.votes(queries)
            z = noise[it * cfg.queries : it * cfg.queries + len(queries)]
            answers.append(noisy_argmax(counts, sigma=receiver.ledger.votes_noise, noise=z))
            return answers[-1]

        client = PPATClient(released, host_rows.shape[1], cfg, sender.randomness.torch_generator(step=step))
        real_share = train_ppat(client, host, label)
        reply = {
            "step": step,
            "from": host_name,
            "to": client_name,
            "object": "noisy teacher labels",
            "labels": torch.cat(answers),
            "privacy": labels_block,
        }
        return {
            "step": step,
            "from": client_name,
            "to": host_name,
            "object": "translated rows",
            "rows": client.translate(),
            "privacy": release_block,
            "replies": [reply],
            "real_share": real_share,
        }

    def translate(self, released: torch.Tensor, own: torch.Tensor, ex) -> torch.Tensor:
        """The host's post-processing: the translated rows scaled to the mean norm of its own aligned
        rows (its own data). The generator works in the C-ball of clipped rows, and the client's noise
        inflates the norms; the direction is what the translation carries."""
        own, released = own.double(), released.double()
        return released * (own.norm(dim=1).mean() / released.norm(dim=1).mean().clamp_min(1e-12))

    def mix_weight(self, receiver, rnd: int, ex) -> float:
        """λ of the update ``(1 − λ)·own + λ·translated``: ``exchange.mix``."""
        return ex.mix


def _release(step: int, sender, to: str, ex) -> tuple[torch.Tensor, dict]:
    """The client's one Gaussian release of its aligned rows for ``to`` (composed once, also on resume)."""
    rows = sender.party.rows(sender.aligned[to])
    noise = sender.randomness.normal({"z": tuple(rows.shape)}, step=step, purpose="noise")["z"]
    released = release_rows(rows, clip=ex.clip, noise_multiplier=sender.ledger.noise_multiplier, noise=noise)
    block = _once(sender, step, "aligned rows", lambda: sender.ledger.record_release(step=step, to=to, rows=len(rows)))
    return released, block


def _once(rt, step: int, obj: str, record: Callable[[], dict]) -> dict:
    """``record()`` unless the party's ledger already holds ``obj`` at ``step`` (a resumed exchange);
    the party's checkpoint is saved after composing, before anything leaves."""
    for m in rt.ledger.sent:
        if m["step"] == step and m["object"] == obj:
            return m["privacy"]
    block = record()
    rt.save()
    return block
