"""Secret randomness for DP-SGD: per-step streams from a key that is never released.

Why this exists. DP-SGD's guarantee is a statement about the *distribution*
of the noise. It holds only if the adversary cannot predict the noise. A
noise generator seeded from a released ``--seed`` can be replayed: whoever
holds the config retrains on a candidate dataset and compares bit for bit,
which gives no finite ε at all. Even a secret seed is weak with torch's CPU
generator: ``torch.Generator.manual_seed`` keeps only the low 32 bits of the
seed (MT19937's ``init_with_uint32``), so there are 2³² candidate noise streams
(``tests/privacy/test_randomness.py`` pins this).

What we do instead, and how it compares with Opacus's ``secure_mode``:

* **Key.** 128 bits from the operating system's CSPRNG (:func:`secrets.token_bytes`),
  drawn when a private run starts. It is kept only in the private checkpoint
  (so ``--resume`` replays the same streams exactly) and never written to
  ``config.json``, ``metrics.json`` or a release bundle.
* **Generator.** AES-128 in counter mode (``randomgen.AESCounter``, AES-NI
  where the CPU has it), a block cipher in counter mode as in NIST SP 800-90A's
  CTR_DRBG. Opacus's ``secure_mode`` reads ``/dev/urandom`` through
  ``torchcsprng``, which is no longer maintained for current torch; AES-CTR keyed
  from the OS is a CSPRNG of the same strength whose streams can be replayed
  from the checkpoint.
* **Streams.** Every (purpose, step) pair has its own key,
  ``HMAC-SHA256(key, purpose ‖ step)`` truncated to 128 bits (a PRF, RFC 2104),
  so the noise of step t does not depend on how much randomness earlier steps
  consumed (which depends on private batch sizes), a resumed run draws exactly
  what the uninterrupted run drew, and the noise of step t+1 can be drawn
  ahead of time (:class:`NoisePrefetcher`).
* **Floating point** (Mironov 2012, "On significance of the least significant
  bits for differential privacy", CCS; Jin et al. 2022, "Are we there yet?
  Timing and floating-point attacks on differential privacy systems", IEEE S&P,
  arXiv:2112.05307). Textbook samplers cannot produce every float, so
  ``x + noise`` computed in the output precision can reveal ``x``. Opacus's
  ``secure_mode`` answers with the sum of several draws. We draw the noise in
  **float64** (numpy's ziggurat on 64-bit words), add the clipped gradients to
  it in float64, and round once to the parameter's float32: each float32 output
  value collects about 2²⁹ float64 values, so the sampler's gaps at float64
  resolution are averaged away in what is released.

A key derived from a public seed (:meth:`SecretRandomness.from_seed`) gives
the same streams for tests and research; such a source reports
``secure = False`` and a run that uses it is labelled ``simulation``, never ``dp``.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np
import torch

#: the purposes that get their own streams (``bounding``: which statements of a unit with more than m a
#: unit-level step keeps, textkg.training.unit_step)
STREAMS = ("sampling", "noise", "auxiliary", "bounding")

KEY_BYTES = 16


def _aes_generator(key: bytes) -> np.random.Generator:
    from randomgen import AESCounter

    return np.random.Generator(AESCounter(key=int.from_bytes(key[:KEY_BYTES], "little"), counter=0))


class SecretRandomness:
    """Per-(purpose, step) random streams from one 128-bit key.

    Args:
        key: ``KEY_BYTES`` bytes; ``None`` draws a fresh key from the OS CSPRNG.
        secure: whether ``key`` is secret (False for :meth:`from_seed`).
    """

    def __init__(self, key: bytes | None = None, *, secure: bool = True) -> None:
        if key is None:
            key, secure = secrets.token_bytes(KEY_BYTES), True
        if not isinstance(key, (bytes, bytearray)) or len(key) != KEY_BYTES:
            raise ValueError(f"key must be {KEY_BYTES} bytes")
        self._key = bytes(key)
        self.secure = bool(secure)

    @classmethod
    def from_seed(cls, seed: int) -> SecretRandomness:
        """Reproducible streams from a PUBLIC seed (tests, research): ``secure`` is False."""
        digest = hashlib.sha256(f"textkg-reproducible-noise:{int(seed)}".encode()).digest()
        return cls(digest[:KEY_BYTES], secure=False)

    @classmethod
    def for_run(cls, reproducible_noise: int | None) -> SecretRandomness:
        """A run's source: a fresh secret key, or under ``--reproducible-noise SEED`` the PUBLIC seed's streams
        (the run is then labelled ``simulation``)."""
        return cls() if reproducible_noise is None else cls.from_seed(reproducible_noise)

    # -- streams ---------------------------------------------------------------
    def _stream_key(self, purpose: str, step: int) -> bytes:
        if purpose not in STREAMS:
            raise ValueError(f"unknown stream {purpose!r}; choose one of {STREAMS}")
        if step < 0:
            raise ValueError(f"step must be >= 0, got {step}")
        return hmac.new(self._key, f"{purpose}:{int(step)}".encode(), hashlib.sha256).digest()[:KEY_BYTES]

    def generator(self, purpose: str, step: int) -> np.random.Generator:
        """A numpy ``Generator`` on AES-128-CTR for (purpose, step); same arguments, same stream."""
        return _aes_generator(self._stream_key(purpose, step))

    def uniform(self, n: int, *, step: int, purpose: str = "sampling") -> torch.Tensor:
        """``(n,)`` float64 uniforms on [0, 1) (53-bit resolution)."""
        return torch.from_numpy(self.generator(purpose, step).random(int(n)))

    def normal(
        self, shapes: Mapping[str, Sequence[int]], *, step: int, purpose: str = "noise"
    ) -> dict[str, torch.Tensor]:
        """Standard normal float64 tensors, one per named shape, in the mapping's order."""
        g = self.generator(purpose, step)
        return {name: torch.from_numpy(g.standard_normal(tuple(shape))) for name, shape in shapes.items()}

    def torch_generator(self, *, step: int, purpose: str = "auxiliary") -> torch.Generator:
        """A torch generator for per-example randomness (negatives, dropout) of one step.

        Its seed comes from the secret stream; torch keeps 32 bits of it. That is
        enough here: DP-SGD needs this randomness to be independent of the data
        (it is: it depends on the key and the step only), not secret. The noise and
        the Poisson sample, which must be secret, never come from torch's generator.
        """
        seed = int(self.generator(purpose, step).integers(0, 2**63 - 1))
        return torch.Generator().manual_seed(seed)

    # -- ledger ------------------------------------------------------------------
    def state_dict(self) -> dict[str, str | bool]:
        """For the PRIVATE checkpoint only: holds the key."""
        return {"key": self._key.hex(), "secure": self.secure, "generator": "aes-128-ctr"}

    @classmethod
    def from_state_dict(cls, state: Mapping[str, Any]) -> SecretRandomness:
        return cls(bytes.fromhex(state["key"]), secure=bool(state["secure"]))

    def describe(self) -> str:
        """What the privacy block says about the randomness (never the key)."""
        if self.secure:
            return "secret: AES-128-CTR keyed from the OS CSPRNG; noise drawn in float64"
        return "reproducible from a public seed (--reproducible-noise): NOT secret, not DP"


#: steps whose noise :class:`NoisePrefetcher` draws ahead, each on its own thread: with two, a draw
#: that takes longer than a training step also uses the core the step leaves idle while it waits
_AHEAD = 2


class NoisePrefetcher:
    """Draws the noise of steps t+1 and t+2 on background threads while step t computes.

    The noise of a step depends only on (key, step, shapes), never on the data,
    so drawing it ahead changes no value: ``get(step)`` returns exactly what
    ``randomness.normal(shapes, step=step)`` would. numpy's samplers release the
    GIL, so the draws run on other cores. Up to ``1 + _AHEAD`` steps' noise is
    held at once.

    Args:
        randomness: the source.
        shapes: ``{name: shape}`` of every noised parameter.
    """

    def __init__(self, randomness: SecretRandomness, shapes: Mapping[str, Sequence[int]]) -> None:
        self.randomness = randomness
        self.shapes = {k: tuple(v) for k, v in shapes.items()}
        self._pool = ThreadPoolExecutor(max_workers=_AHEAD, thread_name_prefix="textkg-noise")
        self._pending: dict[int, Future[dict[str, torch.Tensor]]] = {}
        self._lock = threading.Lock()

    def _draw(self, step: int) -> dict[str, torch.Tensor]:
        return self.randomness.normal(self.shapes, step=step)

    def get(self, step: int) -> dict[str, torch.Tensor]:
        """Unit-variance float64 noise of ``step``; starts drawing ``step + 1``, …, ``step + _AHEAD``."""
        ahead = range(step + 1, step + 1 + _AHEAD)
        with self._lock:
            pending = self._pending
            current = pending.pop(step, None)
            for s in [s for s in pending if s not in ahead]:
                pending.pop(s).cancel()
            for s in ahead:  # queued before waiting, so the pool never idles while this step waits
                if s not in pending:
                    pending[s] = self._pool.submit(self._draw, s)
        return self._draw(step) if current is None else current.result()

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        with self._lock:
            self._pending.clear()
