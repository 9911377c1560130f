"""On-disk feature cache keyed by (encoder identity, sha256 of the text).

Layout::

    <cache_dir>/features/<sha256(identity)[:24]>/
        identity.txt                 the full identity string
        <shard>.vec.npy              float32 (k, dim) rows
        <shard>.keys.npy             uint8 (k, 32) sha256 digests of the texts, row order

A shard is complete once its ``.keys.npy`` exists: vectors are written first,
each file to a temporary name and then ``os.replace``-d (atomic on POSIX), so
readers never see half a shard. Each call that computes new rows adds one
shard; when more than :data:`MAX_SHARDS` exist they are merged into one.
Duplicate keys across shards are harmless (same identity + text → same row).
A changed description has a new hash, so only its row is recomputed.

Token-level features (:func:`cached_encode_tokens`) use the same layout under
``tokens/``, one float16 ``(L_i, d)`` array per text flattened into a shard
with an offsets file.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from .base import DEFAULT_BATCH_SIZE, TextEncoder, default_cache_dir, pad_stack, validate_texts
from .registry import get_encoder

MAX_SHARDS = 16


def text_key(text: str) -> bytes:
    """sha256 digest (32 bytes) of the UTF-8 text."""
    return hashlib.sha256(text.encode("utf-8")).digest()


def _atomic_save(path: Path, array: np.ndarray) -> None:
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    with tmp.open("wb") as f:
        np.save(f, array)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def encoder_dir(encoder: TextEncoder, cache_dir: str | os.PathLike[str] | None, kind: str) -> Path:
    """The folder holding ``encoder``'s cached rows of ``kind`` ("features"/"tokens")."""
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    folder = root / kind / hashlib.sha256(encoder.identity.encode("utf-8")).hexdigest()[:24]
    folder.mkdir(parents=True, exist_ok=True)
    ident = folder / "identity.txt"
    if not ident.exists():
        tmp = folder / f".identity.{uuid.uuid4().hex}.tmp"
        tmp.write_text(encoder.identity + "\n", encoding="utf-8")
        os.replace(tmp, ident)
    return folder


def _shards(folder: Path) -> list[str]:
    return sorted(p.name[: -len(".keys.npy")] for p in folder.glob("*.keys.npy"))


def _load_index(folder: Path, suffix: str) -> dict[bytes, tuple[np.ndarray, int]]:
    """key -> (memory-mapped shard array, row) over all complete shards."""
    index: dict[bytes, tuple[np.ndarray, int]] = {}
    for shard in _shards(folder):
        try:
            raw = np.load(folder / f"{shard}.keys.npy").tobytes()
            data = np.load(folder / f"{shard}{suffix}", mmap_mode="r")
        except FileNotFoundError:  # merged away by another process meanwhile
            continue
        index.update((raw[i : i + 32], (data, i // 32)) for i in range(0, len(raw), 32))
    return index


def _write_shard(folder: Path, keys: list[bytes], arrays: dict[str, np.ndarray]) -> None:
    shard = uuid.uuid4().hex
    for suffix, arr in arrays.items():
        _atomic_save(folder / f"{shard}{suffix}", arr)
    # uint8 (k, 32), not "S32": numpy strips trailing NUL bytes from S-dtype items
    _atomic_save(folder / f"{shard}.keys.npy", np.frombuffer(b"".join(keys), dtype=np.uint8).reshape(-1, 32))


def _maybe_merge_features(folder: Path) -> None:
    shards = _shards(folder)
    if len(shards) <= MAX_SHARDS:
        return
    index = _load_index(folder, ".vec.npy")
    keys = list(index)
    vecs = np.stack([index[k][0][index[k][1]] for k in keys]).astype(np.float32)
    _write_shard(folder, keys, {".vec.npy": vecs})
    for shard in shards:
        for suffix in (".keys.npy", ".vec.npy"):
            (folder / f"{shard}{suffix}").unlink(missing_ok=True)


def cached_encode(
    encoder: TextEncoder | str,
    texts: Sequence[str],
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
) -> torch.Tensor:
    """``encoder.encode(texts)``, reading and writing an on-disk row cache.

    Args:
        encoder: A frozen encoder (or its registry name).
        texts: n descriptions; validated first (blank → DataError).
        cache_dir: Cache root; default ``$TEXTKG_CACHE_DIR`` or ``~/.cache/textkg``.
        batch_size: Batch size for the rows that must be computed.

    Returns:
        FloatTensor (n, dim), equal to ``encoder.encode(texts)``.
    """
    encoder = get_encoder(encoder)
    texts = validate_texts(texts)
    folder = encoder_dir(encoder, cache_dir, "features")
    keys = [text_key(t) for t in texts]
    index = _load_index(folder, ".vec.npy")
    missing: dict[bytes, str] = {}
    for k, t in zip(keys, texts, strict=True):
        if k not in index:
            missing.setdefault(k, t)
    out = np.empty((len(texts), encoder.dim), dtype=np.float32)
    if missing:
        new = encoder.encode(list(missing.values()), batch_size=batch_size).numpy().astype(np.float32)
        _write_shard(folder, list(missing), {".vec.npy": new})
        for i, k in enumerate(missing):
            index[k] = (new, i)
        _maybe_merge_features(folder)
    by_shard: dict[int, tuple[np.ndarray, list[int], list[int]]] = {}
    for pos, k in enumerate(keys):  # gather per shard with one fancy-index each
        arr, row = index[k]
        entry = by_shard.setdefault(id(arr), (arr, [], []))
        entry[1].append(pos)
        entry[2].append(row)
    for arr, positions, rows in by_shard.values():
        out[positions] = arr[rows]
    return torch.from_numpy(out)


def cached_encode_tokens(
    encoder: TextEncoder | str,
    texts: Sequence[str],
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``encoder.encode_tokens(texts)`` through the cache (stored as float16).

    Returns:
        ``(tokens, mask)``: FloatTensor (n, L, token_dim) (float16-rounded) and
        BoolTensor (n, L).
    """
    encoder = get_encoder(encoder)
    texts = validate_texts(texts)
    folder = encoder_dir(encoder, cache_dir, "tokens")
    keys = [text_key(t) for t in texts]
    index = _load_index(folder, ".tok.npy")
    offsets = {
        shard: np.load(folder / f"{shard}.off.npy")
        for shard in _shards(folder)
        if (folder / f"{shard}.off.npy").exists()
    }
    rows: dict[bytes, torch.Tensor] = {}
    for k in set(keys):
        if k in index:
            arr, i = index[k]
            assert isinstance(arr, np.memmap) and arr.filename is not None  # as _load_index opens every shard
            shard = Path(arr.filename).name[: -len(".tok.npy")]
            off = offsets[shard]
            rows[k] = torch.from_numpy(np.asarray(arr[off[i] : off[i + 1]], dtype=np.float32))
    missing = {k: t for k, t in zip(keys, texts, strict=True) if k not in rows}
    if missing:
        tok, mask = encoder.encode_tokens(list(missing.values()), batch_size=batch_size)
        new = [tok[i, mask[i]].half() for i in range(len(missing))]
        lengths = np.cumsum([0] + [r.shape[0] for r in new])
        flat = torch.cat(new).numpy() if new else np.zeros((0, encoder.token_dim), np.float16)
        _write_shard(folder, list(missing), {".tok.npy": flat, ".off.npy": lengths.astype(np.int64)})
        rows.update((k, r.float()) for k, r in zip(missing, new, strict=True))
    return pad_stack([rows[k] for k in keys], encoder.token_dim)
