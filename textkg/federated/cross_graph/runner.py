"""Cross-graph federation in one process: PSI alignment, DP exchanges, backtracking, outputs.

FKGE (Peng et al. 2021, CIKM, "Differentially Private Federated Knowledge Graphs Embedding",
arXiv:2105.07615, §3-4): K holders, each with its own graph, vocabulary, model and embedding
space, improve through the entities they share. Here:

1. every party trains its own model alone (``train.epochs``);
2. the ``alone`` baseline: from there, the party fine-tunes ``fine_tune_epochs`` per exchange
   slot, keeping a slot only if its validation MRR improves; its test metrics are recorded and the
   party goes back to the end of step 1;
3. every pair finds its aligned entities by PSI (:mod:`textkg.federated.cross_graph.psi`);
4. every round, every pair exchanges in both directions (:func:`exchange_step`): the sender
   releases its aligned rows under the Gaussian mechanism, the receiver maps them into its space
   (Procrustes), moves its aligned rows toward them and fine-tunes. It keeps the update only if its
   validation MRR beats both the state before and the same slot without the update (fine-tuned from
   the same state with the same sampler): FKGE's backtracking (§4.3), made a paired comparison.
   Otherwise it rolls back to the ``alone`` slot, so a party that never gains ends where
   ``alone`` ends, bit for bit.

``exchange.unit: statement`` (docs/cross_graph.md, "Statement level"): every party trains with
DP-SGD on its own statements; a release is its DP model's aligned rows as they are
(post-processing); a slot moves the aligned rows, then takes the slot's one DP-SGD fine-tuning
(the same steps and secret streams as ``alone``'s slot: the ``alone`` track replays the ledger), and
validation keeps it or rolls back. Both tracks take the same DP-SGD steps, so the same ε.

The pairs and their order follow from the holders file alone, so every party knows when it sends
and receives without a coordinator, and no party holds a model but its own. Each party writes its
PRIVATE ``checkpoint.pt`` (model, optimizer, sampler, noise key, ledger) atomically after each of
its steps; ``resume=True`` continues from them and ends with the same ledgers.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable
from pathlib import Path

import torch

from textkg._version import __version__
from textkg.errors import ConfigError
from textkg.federated.cross_graph.config import HOLDERS_RECORD, RUN_RECORD, CrossGraphConfig
from textkg.federated.cross_graph.ledger import PartyLedger, StatementLedger, planned_noise_multiplier
from textkg.federated.cross_graph.methods import get_exchange_method
from textkg.federated.cross_graph.party import Party
from textkg.federated.cross_graph.procrustes import procrustes, release_rows
from textkg.federated.cross_graph.psi import PSIParty, private_intersection
from textkg.privacy.randomness import SecretRandomness

CHECKPOINT = "checkpoint.pt"
LEDGER = "ledger.json"
METRICS = "metrics.json"


def schedule(names: list[str], rounds: int) -> list[tuple[int, str, str]]:
    """``(round, sender, receiver)`` of every exchange, numbered from step 1 in list order."""
    pairs = list(itertools.combinations(names, 2))
    return [(r, s, t) for r in range(1, rounds + 1) for a, b in pairs for s, t in ((a, b), (b, a))]


class PartyRuntime:
    """A party with its ledger, noise key, current validation MRR and alignment (private state)."""

    def __init__(self, party: Party, ledger: PartyLedger, randomness: SecretRandomness) -> None:
        self.party, self.ledger, self.randomness = party, ledger, randomness
        self.valid = 0.0
        self.alone: dict | None = None
        self.aligned: dict[str, list[str]] = {}
        self.step = 0

    def save(self) -> None:
        from textkg.training import checkpoint as ckpt

        payload = {
            "step": self.step,
            "snapshot": self.party.snapshot(),
            "valid": self.valid,
            "alone": self.alone,
            "randomness": self.randomness.state_dict(),
            "ledger": self.ledger.state_dict(),
            "privacy": self.party.privacy_state(),  # the DP-SGD ledger and key (statement level)
        }
        ckpt.atomic_torch_save(self.party.out_dir / CHECKPOINT, payload, private=True)
        self.ledger.save(self.party.out_dir / LEDGER)

    def load(self) -> bool:
        path = self.party.out_dir / CHECKPOINT
        if not path.is_file():
            return False
        state = torch.load(path, weights_only=True)
        self.party.restore(state["snapshot"])
        self.step, self.valid, self.alone = int(state["step"]), float(state["valid"]), state["alone"]
        self.randomness = SecretRandomness.from_state_dict(state["randomness"])
        self.party.load_privacy_state(state.get("privacy"))
        self.ledger.load_state_dict(state["ledger"])
        return True


def local_slot(rt: PartyRuntime, epochs: int, max_triples: int) -> bool:
    """Fine-tune ``epochs``; keep it if validation MRR improves, else roll back. Returns whether kept."""
    snap = rt.party.snapshot()
    rt.party.train_epochs(epochs)
    mrr = rt.party.valid_mrr(max_triples)
    if mrr > rt.valid:
        rt.valid = mrr
        return True
    rt.party.restore(snap)
    return False


def exchange_step(step: int, rnd: int, sender: PartyRuntime, receiver: PartyRuntime, ex) -> dict:
    """One directed exchange (module docstring, step 4) by ``exchange.method``; returns the transmitted
    message."""
    message = get_exchange_method(ex.method).send(step, sender, receiver, ex)
    apply_release(step, rnd, receiver, message, ex)
    return message


class ProcrustesExchange:
    """``exchange.method: procrustes`` (the default): the sender's Gaussian release of its aligned rows
    (:func:`send_release`) and the receiver's scaled orthogonal Procrustes map
    (:mod:`textkg.federated.cross_graph.procrustes`)."""

    name = "procrustes"
    one_way = True

    def noise_multiplier(self, config: CrossGraphConfig) -> float:
        """σ given, or calibrated so that a party's ``(K − 1)·rounds`` releases meet ε."""
        ex = config.exchange
        if ex.noise_multiplier is not None:
            return ex.noise_multiplier
        releases = ex.rounds * (len(config.holders) - 1)
        return planned_noise_multiplier(target_epsilon=float(ex.target_epsilon or 0), delta=ex.delta, releases=releases)

    def ledger(self, name: str, config: CrossGraphConfig, sigma: float, secret: bool) -> PartyLedger:
        ex = config.exchange
        return PartyLedger(name, delta=ex.delta, noise_multiplier=sigma, clip=ex.clip, secret=secret)

    def send(self, step: int, sender: PartyRuntime, receiver: PartyRuntime, ex) -> dict:
        return send_release(step, sender, receiver.party.name, ex)

    def translate(self, released: torch.Tensor, own: torch.Tensor, ex) -> torch.Tensor:
        return procrustes(released, own)(released)

    def mix_weight(self, receiver: PartyRuntime, rnd: int, ex) -> float:
        """λ of the update ``(1 − λ)·own + λ·translated``: ``exchange.mix``."""
        return ex.mix


def send_release(step: int, sender: PartyRuntime, to: str, ex) -> dict:
    """The sender's half: its aligned rows for ``to`` under the Gaussian mechanism (``exchange.unit:
    statement``: as they are, post-processing of its DP-SGD model), with the privacy block.

    Idempotent: on resume a release already in the ledger is drawn again from the same keyed
    stream (the sender's rows have not changed since) and is not composed twice."""
    names = sender.aligned[to]
    rows = sender.party.rows(names)
    if ex.unit == "statement":  # post-processing of the sender's DP-SGD model (its ledger covers it)
        released = rows.double()
    else:
        noise = sender.randomness.normal({"z": tuple(rows.shape)}, step=step, purpose="noise")["z"]
        released = release_rows(rows, clip=ex.clip, noise_multiplier=sender.ledger.noise_multiplier, noise=noise)
    if not any(m["step"] == step for m in sender.ledger.sent):  # idempotent on resume
        sender.ledger.record_release(step=step, to=to, rows=len(names))
        sender.save()
    block = next(m["privacy"] for m in sender.ledger.sent if m["step"] == step)
    return {"step": step, "from": sender.party.name, "to": to, "rows": released, "privacy": block}


def apply_release(step: int, rnd: int, receiver: PartyRuntime, message: dict, ex) -> None:
    """The receiver's half: map, update, fine-tune, keep or roll back; saved (skipped if already applied).

    ``exchange.unit: statement``: the slot takes one DP-SGD fine-tuning, as ``alone``'s slot does (the
    same steps, the same secret streams), from the updated rows; there is no second, paired candidate
    (it would cost a second fine-tuning). Validation keeps it or rolls back to the state before."""
    if receiver.step >= step:
        return
    names, released, block = receiver.aligned[message["from"]], message["rows"], message["privacy"]
    party = receiver.party
    before, snap = receiver.valid, party.snapshot()
    if ex.unit == "statement":  # the slot's one DP-SGD fine-tuning, from the updated rows: alone's cost
        kept_local, local_valid, local_snap = False, before, snap
        _move_aligned_rows(receiver, rnd, names, released, ex)
        party.train_epochs(ex.fine_tune_epochs)
    else:
        kept_local = local_slot(receiver, ex.fine_tune_epochs, ex.valid_max_triples)  # the slot without the update
        local_valid, local_snap = receiver.valid, party.snapshot()
        party.restore(snap)  # the same start, sampler included: a paired comparison
        _move_aligned_rows(receiver, rnd, names, released, ex)
        party.train_epochs(ex.fine_tune_epochs)
    after = party.valid_mrr(ex.valid_max_triples)
    if after > local_valid and after > before:
        kept, receiver.valid = "update", after
    else:  # FKGE's roll-back: the update goes, the slot without it stays (if it helped)
        kept, receiver.valid = ("local" if kept_local else "none"), local_valid
        party.restore(local_snap)
    receiver.ledger.exchanges.append(
        {
            "step": step,
            "round": rnd,
            "from": message["from"],
            "aligned": len(names),
            "valid_before": before,
            "valid_without_update": local_valid,
            "valid_with_update": after,
            "kept": kept,
            "received_privacy": block,
        }
    )
    receiver.step = step
    receiver.save()


def _move_aligned_rows(receiver: PartyRuntime, rnd: int, names: list[str], released: torch.Tensor, ex) -> None:
    """Map the received rows into the party's space (the method's ``translate``: Procrustes on the
    aligned pairs, PPAT's rescaling, ``average``'s matched rotation) and move its aligned rows a
    fraction λ toward them (the method's ``mix_weight``: ``exchange.mix``, or ``average``'s running mean)."""
    party, method = receiver.party, get_exchange_method(ex.method)
    own = party.rows(names)
    translated = method.translate(released, own, ex)
    weight = method.mix_weight(receiver, rnd, ex)
    party.set_rows(names, (1 - weight) * own.double() + weight * translated)


def run_cross_graph(
    config: CrossGraphConfig,
    out_dir: Path,
    *,
    resume: bool = False,
    progress: bool = True,
    on_message: Callable[[dict], None] | None = None,
) -> dict:
    """Run the federation in this process and write every party's outputs; returns the summary.

    ``on_message(message)`` sees every transmitted object (tests, attacks); raising from it stops
    the run as a crash would.
    """
    out_dir = Path(out_dir)
    if not resume and out_dir.exists() and any(out_dir.iterdir()):
        raise ConfigError(f"output directory {out_dir} is not empty; pass --resume", field="out")
    ex = config.exchange
    names = [h.name for h in config.holders]
    steps = schedule(names, ex.rounds)
    releases = ex.rounds * (len(names) - 1)
    sigma = noise_multiplier_of(config)
    runtimes = {spec.name: make_runtime(config, k, out_dir, sigma) for k, spec in enumerate(config.holders)}
    write_start_files(out_dir, config, sigma)
    for rt in runtimes.values():
        start_party(rt, ex, releases, resume=resume, progress=progress)
    for a, b in itertools.combinations(names, 2):
        pa = PSIParty(runtimes[a].party.items(), session=f"{a}|{b}", fraction=ex.aligned_fraction)
        pb = PSIParty(runtimes[b].party.items(), session=f"{a}|{b}", fraction=ex.aligned_fraction)
        found = list(private_intersection(pa, pb).intersection)
        runtimes[a].aligned[b] = runtimes[b].aligned[a] = found
        _say(progress, f"PSI {a} x {b}: {len(found)} aligned entities")
    for step, (rnd, s, t) in enumerate(steps, 1):
        if not runtimes[s].aligned[t]:
            continue
        message = exchange_step(step, rnd, runtimes[s], runtimes[t], ex)
        if on_message is not None:
            on_message(message)
        last = runtimes[t].ledger.exchanges[-1] if runtimes[t].ledger.exchanges else {}
        _say(progress, f"step {step}/{len(steps)} {s} -> {t}: kept {last.get('kept')}")
    return write_outputs(out_dir, config, runtimes, sigma)


def noise_multiplier_of(config: CrossGraphConfig) -> float:
    """σ of every release: given, or calibrated so that a party's ``(K − 1)·rounds`` releases meet ε
    (0 at the statement level: a release adds no noise)."""
    ex = config.exchange
    if ex.unit == "statement":
        return 0.0
    return float(get_exchange_method(ex.method).noise_multiplier(config))


def make_runtime(config: CrossGraphConfig, k: int, out_dir: Path, sigma: float) -> PartyRuntime:
    """Holder ``k``'s party (validated and prepared), ledger and noise key."""
    ex, spec = config.exchange, config.holders[k]
    party = Party(spec, out_dir / spec.name, planned_epochs=planned_epochs(config, spec))
    secret = ex.reproducible_noise is None
    key = SecretRandomness() if secret else SecretRandomness.from_seed(int(ex.reproducible_noise or 0) + k)
    if party.private is not None:
        return PartyRuntime(party, StatementLedger(spec.name, party.private), key)
    return PartyRuntime(party, get_exchange_method(ex.method).ledger(spec.name, config, sigma, secret), key)


def planned_epochs(config: CrossGraphConfig, spec) -> int:
    """A party's DP-SGD epochs: pre-training, then ``fine_tune_epochs`` in each of its ``(K − 1)·rounds``
    slots (kept or rolled back, every step counts). The ``alone`` track takes the same epochs."""
    ex = config.exchange
    return spec.run_config().train.epochs + ex.rounds * (len(config.holders) - 1) * ex.fine_tune_epochs


def write_start_files(out_dir: Path, config: CrossGraphConfig, sigma: float) -> None:
    """``holders.json`` (what ``--resume`` reads) and ``cross_graph.json`` (settings, σ, the schedule)."""
    from textkg.training import checkpoint as ckpt

    steps = schedule([h.name for h in config.holders], config.exchange.rounds)
    out_dir.mkdir(parents=True, exist_ok=True)
    ckpt.atomic_write_json(out_dir / HOLDERS_RECORD, config.to_dict())
    ckpt.atomic_write_json(
        out_dir / RUN_RECORD,
        {"textkg_version": __version__, **config.to_dict(), "noise_multiplier": sigma, "schedule": steps},
    )


def start_party(rt: PartyRuntime, ex, releases: int, *, resume: bool, progress: bool) -> None:
    """Steps 1-2: train alone, measure the ``alone`` track, go back; or load the party's checkpoint."""
    rt.party.out_dir.mkdir(parents=True, exist_ok=True)
    if resume and rt.load():
        return
    rt.party.train_epochs(rt.party.cfg.train.epochs)
    rt.valid = rt.party.valid_mrr(ex.valid_max_triples)
    pretrained, valid, ledger = rt.party.snapshot(), rt.valid, rt.party.privacy_state()
    for _ in range(releases):
        local_slot(rt, ex.fine_tune_epochs, ex.valid_max_triples)
    rt.alone = {"valid": rt.valid, "test": rt.party.test_metrics()}
    if rt.party.private is not None:  # the alone track's own ledger: pre-training and its slots
        rt.alone["privacy"] = rt.party.private.report()
    rt.party.restore(pretrained)
    # the federated track replays the same DP-SGD streams from the same ledger: a paired comparison.
    # The alone track's model is the owner's counterfactual, never sent (docs/cross_graph.md)
    rt.party.load_privacy_state(ledger)
    rt.valid = valid
    rt.save()
    _say(progress, f"{rt.party.name}: alone test MRR {_mrr(rt.alone)}")


def write_outputs(out_dir: Path, config: CrossGraphConfig, runtimes: dict[str, PartyRuntime], sigma: float) -> dict:
    """Every party's ``metrics.json`` (``alone``, ``federated``, ledger) and the summary ``metrics.json``."""
    from textkg.training import checkpoint as ckpt

    rows = [write_party_metrics(rt) for rt in runtimes.values()]
    summary = {"noise_multiplier": sigma, "exchange": config.exchange.to_dict(), "parties": rows}
    ckpt.atomic_write_json(out_dir / METRICS, summary)
    return summary


#: ``sizes.train`` of a party's metrics.json under a ``dp`` guarantee
PUBLIC_SIZES_NOTE = (
    "under a dp guarantee `train` is the declared private_size (a public input; null when none is "
    "declared), never the exact count of training statements; the owner's private_metrics.json holds it"
)
PRIVATE_SIZES_NOTE = (
    "for the data owner: the exact sizes of this party's data, NOT covered by the privacy guarantee; "
    "metrics.json gives the declared private_size instead, and `textkg release` never copies this file."
)


def write_party_metrics(rt: PartyRuntime) -> dict:
    """The party's ``metrics.json``: ``alone``, ``federated``, exchanges, privacy block and ledger; returns
    its summary row."""
    from textkg.pipeline.report import PRIVATE_METRICS
    from textkg.training import checkpoint as ckpt

    party = rt.party
    test = party.test_metrics()
    privacy = rt.ledger.block()
    sizes: dict[str, object] = {
        "train": len(party.train),
        "valid": len(party.valid),
        "test": len(party.test),
        "trained_entities": len(party.trained_entities),
    }
    if privacy.get("guarantee") == "dp":  # the exact count of training statements is private data (issue 51)
        owner = {"note": PRIVATE_SIZES_NOTE, "sizes": sizes}
        ckpt.atomic_write_json(party.out_dir / PRIVATE_METRICS, owner, private=True)
        sizes = {**sizes, "train": privacy.get("private_size"), "train_note": PUBLIC_SIZES_NOTE}
    metrics = {
        "textkg_version": __version__,
        "party": party.name,
        "dataset": party.spec.dataset,
        "source": party.spec.source,
        "model": {"name": party.spec.model, **party.cfg.model.to_dict()},
        "sizes": sizes,
        "aligned": {other: len(names) for other, names in rt.aligned.items()},
        "alone": rt.alone,
        "federated": {"valid": rt.valid, "test": test},
        "exchanges": rt.ledger.exchanges,
        "privacy": privacy,
        "ledger": rt.ledger.state_dict(),
    }
    ckpt.atomic_write_json(party.out_dir / METRICS, metrics)
    alone = (rt.alone or {}).get("test") or {}
    return {
        "party": party.name,
        "alone_test_mrr": alone.get("mrr"),
        "federated_test_mrr": None if test is None else test["mrr"],
        "updates_kept": sum(e["kept"] == "update" for e in rt.ledger.exchanges),
        "exchanges": len(rt.ledger.exchanges),
        "epsilon": privacy["epsilon"],
        "delta": rt.ledger.delta,
    }


def _mrr(block: dict | None) -> str:
    test = (block or {}).get("test")
    return "n/a" if not test else f"{test['mrr']:.4f}"


def _say(progress: bool, line: str) -> None:
    if progress:
        print(line, file=sys.stderr)
