"""FKGE's PPAT network: an adversarial translation whose only view of the host is PATE's noisy votes.

FKGE (Peng et al. 2021, CIKM, arXiv:2105.07615v2, §3.3, "PPAT network") builds on PATE-GAN
(Jordon, Yoon & van der Schaar, ICLR 2019, Alg. 1) and PATE (Papernot et al., ICLR 2017,
arXiv:1610.05755; ICLR 2018, arXiv:1802.08908). For one pair, the *client* (the sender here) and
the *host* (the receiver, whose space the client's rows are translated into):

- the generator is a linear map W: ``(d_host, d_client)``; a generated sample is ``W x`` for an
  aligned row x of the client (what the client feeds it: :mod:`textkg.federated.cross_graph.
  ppat_exchange`);
- the host splits its aligned rows into T **disjoint** parts (:func:`teacher_parts`, a keyed hash
  of each entity's id, so a part depends on that entity alone); teacher t is a discriminator trained
  on part t (real) against generated samples (fake);
- for a batch of generated samples (the queries) every teacher votes real or fake; the host adds
  N(0, σ²) to each of the two vote counts and returns only the noisy argmax (GNMax, Papernot et al.
  2018, §4.1, :func:`noisy_argmax`);
- a student discriminator is trained on the queries with these labels only; W is trained to make
  the student say "real", with MUSE's orthogonalisation after each step (Conneau et al. 2018,
  arXiv:1710.04087v3, §3.3: W ← (1 + β) W − β (W Wᵀ) W).

**Accounting** (the host's side; the only step that reads the host's rows). Unit: one aligned
entity's embedding at the host. Changing, adding or removing it changes the training data of
exactly one teacher (the parts are disjoint and each entity's part is fixed by its id), so on every
query at most one vote moves: one of the two counts goes down by 1 and the other up by 1 (L1
sensitivity 2, L2 sensitivity √2), whatever the teacher's architecture or training does. No row is
clipped: PATE's bound needs none. GNMax with noise σ on each count is then (λ, λ/σ²)-RDP for every
λ >= 1 (Papernot et al. 2018, arXiv:1802.08908v1, Proposition 8, the data-independent bound), the
Gaussian mechanism's RDP at L2 sensitivity √2 (Mironov 2017, arXiv:1702.07476v3, Prop. 7:
α Δ²/(2σ²)). In the project's accountant that is ``SampledGaussianEvent(1.0, σ/√2)`` per query
(:func:`gnmax_event`), composed over every query (Mironov 2017, Prop. 1; adaptive: a query is a
function of earlier noisy labels) and converted with CKS 2020 (arXiv:2004.00010v3, Prop. 12).

**Not used:** PATE's data-dependent analysis (Papernot et al. 2018, Thm. 6 with the smooth-sensitivity
release of Thm. 20, §B), which can be much smaller when teachers agree. It needs the vote counts to
set the bound, so publishing it would itself leak unless released with smooth sensitivity; that
release is not implemented, so only the data-independent bound above is claimed. FKGE and PATE-GAN
use Laplace noisy-max (ε = 2γ per query at scale 1/γ, pure DP); GNMax is used instead because its
RDP composes in the project's RDP accountant with the sender's Gaussian releases.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from textkg.errors import ConfigError
from textkg.privacy.calibration import calibrate_noise_multiplier
from textkg.privacy.events import SampledGaussianEvent

#: How the client's rows enter the protocol (:attr:`PPATConfig.client_release`).
CLIENT_RELEASES = ("gaussian", "clear")
#: Index of the two classes in a vote histogram ``(n, 2)``.
FAKE, REAL = 0, 1


@dataclass(frozen=True)
class PPATConfig:
    """Settings of the PPAT exchange (``exchange.ppat`` in a holders file); every key optional.

    Attributes:
        teachers: T, the host's teacher discriminators, one per disjoint part of its aligned rows.
        iterations: PATE-GAN iterations per exchange (teachers, then queries and student, then W).
        queries: Generated samples labelled by the teachers per iteration (what the host's budget pays).
        teacher_steps, student_steps, generator_steps: Adam steps per iteration for each network.
        lr: Adam's learning rate for every network.
        hidden: Hidden width of the one-hidden-layer discriminators.
        orthogonality: β of MUSE's orthogonalisation of W after each generator step (0: none).
        vote_share: The share of a party's RDP budget spent on its noisy votes (as host); the rest
            pays its Gaussian releases of its aligned rows (as client). In (0, 1).
        client_release: ``gaussian`` (default): the client releases its aligned rows once under the
            Gaussian mechanism and everything it sends is post-processing of that release.
            ``clear``: FKGE as published, the client's generated samples and translated rows are
            its rows in the clear; only the host's votes are DP (the whole budget), and the party's
            block says ``guarantee: none`` with the votes' ε beside it.
    """

    teachers: int = 20
    iterations: int = 10
    queries: int = 10
    teacher_steps: int = 5
    student_steps: int = 20
    generator_steps: int = 5
    lr: float = 0.01
    hidden: int = 32
    orthogonality: float = 0.01
    vote_share: float = 0.5
    client_release: str = "gaussian"

    def __post_init__(self) -> None:
        if self.client_release not in CLIENT_RELEASES:
            allowed = ", ".join(CLIENT_RELEASES)
            msg = f"exchange.ppat.client_release must be one of {allowed}, got {self.client_release!r}"
            raise ConfigError(msg, field="ppat.client_release")
        ints = ("teachers", "iterations", "queries", "teacher_steps", "student_steps", "generator_steps", "hidden")
        for name in ints:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"exchange.ppat.{name} must be an integer >= 1, got {value!r}", field=f"ppat.{name}")
        if self.teachers < 2:
            raise ConfigError("exchange.ppat.teachers must be >= 2", field="ppat.teachers")
        for name, ok, want in (
            ("lr", _number(self.lr) and self.lr > 0, "> 0"),
            ("orthogonality", _number(self.orthogonality) and 0 <= self.orthogonality < 1, "in [0, 1)"),
            ("vote_share", _number(self.vote_share) and 0 < self.vote_share < 1, "in (0, 1)"),
        ):
            if not ok:
                msg = f"exchange.ppat.{name} must be {want}, got {getattr(self, name)!r}"
                raise ConfigError(msg, field=f"ppat.{name}")

    @property
    def total_queries(self) -> int:
        """Queries one exchange costs the host."""
        return self.iterations * self.queries


def _number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


# -- the host's mechanism -----------------------------------------------------------------------
def teacher_parts(names: list[str], teachers: int, *, session: str) -> torch.Tensor:
    """``(n,)`` the teacher of each aligned entity: SHA-256(session ‖ id) mod T.

    A part is a function of the entity's own id (and the pair's public session), so adding,
    removing or changing one entity moves no other entity between parts: the parts are disjoint
    and one unit touches one teacher (module docstring).
    """
    out = [int.from_bytes(hashlib.sha256(f"{session}\x00{n}".encode()).digest()[:8], "big") % teachers for n in names]
    return torch.tensor(out, dtype=torch.long)


def vote_histogram(votes: torch.Tensor) -> torch.Tensor:
    """``(n, 2)`` counts ``[fake, real]`` from ``votes`` ``(T, n)`` (1 = real, 0 = fake)."""
    real = votes.to(torch.long).sum(0)
    return torch.stack([votes.shape[0] - real, real], dim=1)


def noisy_argmax(counts: torch.Tensor, *, sigma: float, noise: torch.Tensor) -> torch.Tensor:
    """GNMax (Papernot et al. 2018, arXiv:1802.08908v1, §4.1): ``argmax_j (n_j + σ z_j)``.

    Args:
        counts: ``(n, k)`` vote counts.
        sigma: σ >= 0, the std of the noise on each count (0: the plain argmax, no privacy).
        noise: ``(n, k)`` standard normal draws from the host's secret stream.

    Returns:
        ``(n,)`` long, the noisy label; ties (σ = 0) go to the lower index (fake).
    """
    if noise.shape != counts.shape:
        raise ValueError(f"noise {tuple(noise.shape)} does not match counts {tuple(counts.shape)}")
    if not sigma >= 0:
        raise ValueError(f"sigma must be >= 0, got {sigma}")
    return torch.argmax(counts.double() + float(sigma) * noise.double(), dim=1)


def gnmax_event(*, sigma: float, queries: int) -> SampledGaussianEvent:
    """``queries`` GNMax answers at count noise σ as the project's event: (λ, λ/σ²)-RDP each
    (Papernot et al. 2018, arXiv:1802.08908v1, Prop. 8) is the Gaussian mechanism's α/(2m²)
    (Mironov 2017, arXiv:1702.07476v3, Prop. 7) at m = σ/√2."""
    return SampledGaussianEvent(sample_rate=1.0, noise_multiplier=float(sigma) / math.sqrt(2.0), steps=int(queries))


def gnmax_rdp(*, sigma: float, queries: int, orders) -> np.ndarray:
    """``(len(orders),)`` RDP of ``queries`` GNMax answers: ``queries · α / σ²`` (Prop. 8; Mironov
    2017, Prop. 1 for the composition). The formula itself, for checks."""
    return int(queries) * np.asarray(orders, dtype=np.float64) / float(sigma) ** 2


def split_noise(
    sigma: float, *, releases: int, vote_exchanges: int, queries: int, vote_share: float
) -> tuple[float, float]:
    """``(σ_rows, σ_votes)`` whose events together have the RDP of ONE Gaussian mechanism of noise
    multiplier σ: a party's ``releases`` Gaussian releases of its rows (noise multiplier σ_rows) and
    its ``vote_exchanges · queries`` GNMax answers (count noise σ_votes).

    Every event is a Gaussian mechanism without sampling, whose RDP is α/(2m²) at every order
    (Mironov 2017, arXiv:1702.07476v3, Prop. 7; GNMax: m = σ_votes/√2, Papernot et al. 2018, Prop. 8),
    so the composition (Prop. 1) is α/(2σ²) with 1/σ² = releases/σ_rows² + 2·answers/σ_votes²: a share
    ``vote_share`` of 1/σ² goes to the answers and the rest to the releases. σ = 0 gives (0, 0).
    """
    answers = vote_exchanges * queries
    rows = sigma * math.sqrt(releases / (1.0 - vote_share)) if releases else 0.0
    votes = sigma * math.sqrt(2.0 * answers / vote_share) if answers else 0.0
    return rows, votes


def ppat_noise(
    *, target_epsilon: float, delta: float, releases: int, vote_exchanges: int, queries: int, vote_share: float
) -> tuple[float, float]:
    """:func:`split_noise` of the σ calibrated for one Gaussian mechanism to meet ``target_epsilon``
    (``calibrate_noise_multiplier``, never above the target): a party's releases and answers together
    meet it, whatever the share."""
    sigma = calibrate_noise_multiplier(target_epsilon=target_epsilon, delta=delta, sample_rate=1.0, steps=1)
    return split_noise(sigma, releases=releases, vote_exchanges=vote_exchanges, queries=queries, vote_share=vote_share)


# -- the networks -----------------------------------------------------------------------------
def discriminator(dim: int, hidden: int, generator: torch.Generator) -> nn.Module:
    """A one-hidden-layer MLP ``(n, dim) → (n,)`` logits of "real", initialised from ``generator``."""
    net = nn.Sequential(nn.Linear(dim, hidden), nn.LeakyReLU(0.2), nn.Linear(hidden, 1), nn.Flatten(0))
    with torch.no_grad():
        for p in net.parameters():
            bound = 1.0 / math.sqrt(p.shape[-1])
            p.copy_(torch.rand(p.shape, generator=generator) * 2 * bound - bound)
    return net


def _bce_steps(net: nn.Module, opt, x: torch.Tensor, y: torch.Tensor, steps: int) -> None:
    loss_fn = nn.BCEWithLogitsLoss()
    for _ in range(steps):
        opt.zero_grad()
        loss_fn(net(x), y).backward()
        opt.step()


class PPATHost:
    """The host's teachers; its rows never leave this object, only :meth:`votes` (noised by the caller's
    :func:`noisy_argmax`).

    Args:
        rows: ``(n, d)`` the host's aligned rows (the teachers' real data).
        parts: ``(n,)`` each row's teacher (:func:`teacher_parts`).
        config: The PPAT settings.
        seed: Teacher t's initialisation and sampling come from its own generator, seeded ``seed + t``,
            so one teacher's randomness does not depend on another's data.
    """

    def __init__(self, rows: torch.Tensor, parts: torch.Tensor, config: PPATConfig, *, seed: int) -> None:
        self.config = config
        self.real = [rows[parts == t].float() for t in range(config.teachers)]
        self.generators = [torch.Generator().manual_seed(int(seed) + t) for t in range(config.teachers)]
        dim = rows.shape[1]
        self.teachers = [discriminator(dim, config.hidden, g) for g in self.generators]
        self.optims = [torch.optim.Adam(t.parameters(), lr=config.lr) for t in self.teachers]

    def fit(self, fake: torch.Tensor) -> None:
        """``teacher_steps`` steps of every teacher: its part (real) against as many generated rows (fake)."""
        fake = fake.detach().float()
        for real, net, opt, g in zip(self.real, self.teachers, self.optims, self.generators, strict=True):
            if not len(real):
                continue
            pick = torch.randint(len(fake), (len(real),), generator=g)
            x = torch.cat([real, fake[pick]])
            y = torch.cat([torch.ones(len(real)), torch.zeros(len(real))])
            _bce_steps(net, opt, x, y, self.config.teacher_steps)

    @torch.no_grad()
    def votes(self, queries: torch.Tensor) -> torch.Tensor:
        """``(n, 2)`` vote counts ``[fake, real]`` of every teacher on ``queries`` ``(n, d)``
        (a teacher with an empty part votes fake)."""
        q = queries.detach().float()
        votes = torch.stack([(net(q) > 0) & (len(r) > 0) for net, r in zip(self.teachers, self.real, strict=True)])
        return vote_histogram(votes)


class PPATClient:
    """The client's generator W and its student discriminator; neither sees the host's rows.

    Args:
        rows: ``(n, d_c)`` what the client feeds the generator (its released aligned rows).
        host_dim: d_h.
        config: The PPAT settings.
        generator: The client's torch generator (student initialisation, query choice).
    """

    def __init__(self, rows: torch.Tensor, host_dim: int, config: PPATConfig, generator: torch.Generator) -> None:
        self.config, self.generator = config, generator
        self.rows = rows.detach().float()
        self.weight = nn.Parameter(torch.eye(host_dim, rows.shape[1]))  # MUSE's initialisation
        self.student = discriminator(host_dim, config.hidden, generator)
        self.g_opt = torch.optim.Adam([self.weight], lr=config.lr)
        self.s_opt = torch.optim.Adam(self.student.parameters(), lr=config.lr)

    def generate(self) -> torch.Tensor:
        """``(n, d_h)`` the generated samples W x (float32, detached)."""
        return (self.rows @ self.weight.T).detach()

    def pick_queries(self, samples: torch.Tensor) -> torch.Tensor:
        """``(queries, d_h)`` generated samples to be labelled."""
        idx = torch.randperm(len(samples), generator=self.generator)[: self.config.queries]
        return samples[idx]

    def fit_student(self, queries: torch.Tensor, labels: torch.Tensor) -> None:
        """The student learns the noisy labels (1 = real) of the queries: its only view of the host."""
        _bce_steps(self.student, self.s_opt, queries.float(), labels.float(), self.config.student_steps)

    def fit_generator(self) -> None:
        """W moves so that the student calls its samples real; then MUSE's orthogonalisation."""
        loss_fn, beta = nn.BCEWithLogitsLoss(), self.config.orthogonality
        for _ in range(self.config.generator_steps):
            self.g_opt.zero_grad()
            logits = self.student(self.rows @ self.weight.T)
            loss_fn(logits, torch.ones_like(logits)).backward()
            self.g_opt.step()
            if beta:
                with torch.no_grad():
                    w = self.weight
                    w.copy_((1 + beta) * w - beta * (w @ w.T) @ w)

    def translate(self) -> torch.Tensor:
        """``(n, d_h)`` float64: the client's rows in the host's space."""
        return (self.rows.double() @ self.weight.detach().double().T).clone()


def train_ppat(client: PPATClient, host: PPATHost, label: Callable[[torch.Tensor, int], torch.Tensor]) -> list[float]:
    """PATE-GAN's loop (Jordon et al. 2019, Alg. 1) with FKGE's linear generator.

    Each iteration: the host's teachers train on its parts against the current samples; the client
    picks ``queries`` samples and gets their labels from ``label(queries, iteration)`` (the host's
    noisy argmax, its only answer); the student learns them; W trains against the student.

    Returns:
        The fraction of queries labelled real in each iteration (a diagnostic; itself a function of
        the noisy labels).
    """
    real_share = []
    for it in range(client.config.iterations):
        samples = client.generate()
        host.fit(samples)
        queries = client.pick_queries(samples)
        labels = label(queries, it)
        real_share.append(float(labels.double().mean()))
        client.fit_student(queries, labels)
        client.fit_generator()
    return real_share
