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

Memory-mapped features (``cached_encode(..., mmap=True)``). The returned
``(n, dim)`` tensor is backed by a file instead of memory, so a run reads only
the pages of the rows it touches and the kernel may drop them again. When one
shard holds exactly the requested texts in order (the usual case after the
first encoding of a graph whose descriptions are distinct), that shard's
``.vec.npy`` is mapped. Otherwise the rows are gathered once, in blocks, into a
*view*::

    <cache_dir>/features/<sha256(identity)[:24]>/views/<sha256(row keys)[:24]>.npy

a float32 ``(n, dim)`` array in the order of the texts, named by the digest of
their keys in order (the keys themselves are unchanged) and written atomically
like a shard. A view is derived data: deleting ``views/`` is always safe. The
mapping is copy-on-write (``mmap_mode="c"``): writing into the tensor changes
this process's copy of the touched pages, never the file.

A cache file that cannot be read (truncated, not a ``.npy`` array, or of the
wrong shape) raises :class:`textkg.errors.DataError` naming the file; it is
never skipped or silently recomputed.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import numpy as np
import torch

from textkg.cache_root import default_cache_dir
from textkg.errors import DataError

from .base import DEFAULT_BATCH_SIZE, TextEncoder, pad_stack, validate_texts
from .registry import get_encoder

MAX_SHARDS = 16
#: Rows gathered at once while a view is written (bounds the temporary copy).
VIEW_BLOCK_ROWS = 65_536


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


def cache_identity(encoder: TextEncoder) -> str:
    """The cache key of ``encoder``: its identity, plus ``@<device type>`` off the CPU.

    A GPU (or MPS) computes the same features up to the last bits, so they are kept
    apart: a CPU run never reads features another device computed, and CPU keys are
    unchanged.
    """
    device = getattr(encoder, "device", None)
    kind = torch.device(device).type if device is not None else "cpu"
    return encoder.identity if kind == "cpu" else f"{encoder.identity}@{kind}"


def encoder_dir(encoder: TextEncoder, cache_dir: str | os.PathLike[str] | None, kind: str) -> Path:
    """The folder holding ``encoder``'s cached rows of ``kind`` ("features"/"tokens")."""
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    identity = cache_identity(encoder)
    folder = root / kind / hashlib.sha256(identity.encode("utf-8")).hexdigest()[:24]
    folder.mkdir(parents=True, exist_ok=True)
    ident = folder / "identity.txt"
    if not ident.exists():
        tmp = folder / f".identity.{uuid.uuid4().hex}.tmp"
        tmp.write_text(identity + "\n", encoding="utf-8")
        os.replace(tmp, ident)
    return folder


def _shards(folder: Path) -> list[str]:
    return sorted(p.name[: -len(".keys.npy")] for p in folder.glob("*.keys.npy"))


def open_array(
    path: Path, *, mmap_mode: Literal["r", "c"] | None = "r", rows: int | None = None, dim: int | None = None
) -> np.ndarray:
    """A cache ``.npy`` file, memory-mapped (``mmap_mode``) or read, checked.

    Raises:
        FileNotFoundError: The file is absent (a shard merged away meanwhile).
        DataError: It cannot be read as an array (truncated, a bad header), or it
            is not ``rows`` long / ``dim`` wide / 2-D where those are given; the
            message names the file and says to delete it.
    """
    try:
        arr = np.load(path, mmap_mode=mmap_mode, allow_pickle=False)
    except FileNotFoundError:
        raise
    except (OSError, ValueError, EOFError) as exc:
        raise DataError(
            f"feature cache file is unreadable (truncated or corrupt: {exc}); delete it and run again "
            "to recompute its rows",
            file=path,
        ) from None
    wrong = None
    if not isinstance(arr, np.ndarray):
        wrong = f"holds a {type(arr).__name__}, not an array"
    elif rows is not None and (arr.ndim < 1 or arr.shape[0] != rows):
        wrong = f"has shape {arr.shape}, expected {rows} rows"
    elif dim is not None and (arr.ndim != 2 or arr.shape[1] != dim):
        wrong = f"has shape {arr.shape}, expected width {dim}"
    if wrong is not None:
        raise DataError(f"feature cache file {wrong}; delete it and run again to recompute its rows", file=path)
    return arr


def _load_keys(path: Path) -> bytes:
    """A shard's ``(k, 32)`` uint8 key file as ``32 * k`` bytes."""
    keys = open_array(path, mmap_mode=None)
    if keys.dtype != np.uint8 or keys.ndim != 2 or keys.shape[1] != 32:
        raise DataError(
            f"feature cache key file has dtype {keys.dtype} and shape {keys.shape}, expected uint8 (k, 32); "
            "delete it and run again to recompute its rows",
            file=path,
        )
    return keys.tobytes()


def _load_index(folder: Path, suffix: str) -> dict[bytes, tuple[np.ndarray, int]]:
    """key -> (memory-mapped shard array, row) over all complete shards.

    Raises:
        DataError: A shard file is unreadable, or its rows disagree with its keys (the file is named).
    """
    index: dict[bytes, tuple[np.ndarray, int]] = {}
    for shard in _shards(folder):
        try:
            raw = _load_keys(folder / f"{shard}.keys.npy")
            # token shards are flat (sum of lengths, d): their row count is in the offsets file
            rows = len(raw) // 32 if suffix == ".vec.npy" else None
            data = open_array(folder / f"{shard}{suffix}", rows=rows)
        except FileNotFoundError:  # merged away by another process meanwhile
            continue
        index.update((raw[i : i + 32], (data, i // 32)) for i in range(0, len(raw), 32))
    return index


def _write_shard(folder: Path, keys: list[bytes], arrays: dict[str, np.ndarray]) -> str:
    """Write one complete shard; returns its name."""
    shard = uuid.uuid4().hex
    for suffix, arr in arrays.items():
        _atomic_save(folder / f"{shard}{suffix}", arr)
    # uint8 (k, 32), not "S32": numpy strips trailing NUL bytes from S-dtype items
    _atomic_save(folder / f"{shard}.keys.npy", np.frombuffer(b"".join(keys), dtype=np.uint8).reshape(-1, 32))
    return shard


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
    mmap: bool = False,
) -> torch.Tensor:
    """``encoder.encode(texts)``, reading and writing an on-disk row cache.

    Args:
        encoder: A frozen encoder (or its registry name).
        texts: n descriptions; validated first (blank → DataError).
        cache_dir: Cache root; default ``$TEXTKG_CACHE_DIR`` or ``~/.cache/textkg``.
        batch_size: Batch size for the rows that must be computed.
        mmap: Return a tensor memory-mapped from the cache (copy-on-write; see
            the module docstring) instead of one held in memory.

    Returns:
        FloatTensor (n, dim), equal to ``encoder.encode(texts)``.

    Raises:
        DataError: A blank text, or an unreadable cache file (named).
    """
    encoder = get_encoder(encoder)
    texts = validate_texts(texts)
    folder = encoder_dir(encoder, cache_dir, "features")
    keys = [text_key(t) for t in texts]
    if mmap:
        view = _view_path(folder, keys)
        if view.exists():  # every row is cached already, in this order: no index needed
            return _open_view(view, len(keys), encoder.dim)
    index = _load_index(folder, ".vec.npy")
    missing: dict[bytes, str] = {}
    for k, t in zip(keys, texts, strict=True):
        if k not in index:
            missing.setdefault(k, t)
    if missing:
        new = encoder.encode(list(missing.values()), batch_size=batch_size).numpy().astype(np.float32)
        shard = _write_shard(folder, list(missing), {".vec.npy": new})
        if mmap:  # point at the file just written, so that a shard holding exactly ``texts`` is mapped
            new = open_array(folder / f"{shard}.vec.npy", rows=len(missing), dim=encoder.dim)
        for i, k in enumerate(missing):
            index[k] = (new, i)
        _maybe_merge_features(folder)
    if mmap:
        return _mapped(folder, keys, index, encoder.dim)
    out = np.empty((len(texts), encoder.dim), dtype=np.float32)
    _gather(out, keys, index, 0, len(keys))
    return torch.from_numpy(out)


def _gather(out: np.ndarray, keys: list[bytes], index: dict[bytes, tuple[np.ndarray, int]], lo: int, hi: int) -> None:
    """``out[i - lo] = row of keys[i]`` for ``lo <= i < hi``, one fancy-index per shard."""
    by_shard: dict[int, tuple[np.ndarray, list[int], list[int]]] = {}
    for pos in range(lo, hi):
        arr, row = index[keys[pos]]
        entry = by_shard.setdefault(id(arr), (arr, [], []))
        entry[1].append(pos - lo)
        entry[2].append(row)
    for arr, positions, rows in by_shard.values():
        out[positions] = arr[rows]


def _view_path(folder: Path, keys: list[bytes]) -> Path:
    digest = hashlib.sha256(b"".join(keys)).hexdigest()[:24]
    return folder / "views" / f"{digest}.npy"


def _open_view(path: Path, rows: int, dim: int) -> torch.Tensor:
    arr = open_array(path, mmap_mode="c", rows=rows, dim=dim)
    if arr.dtype != np.float32:
        raise DataError(f"feature cache file holds {arr.dtype}, expected float32; delete it and run again", file=path)
    return torch.from_numpy(arr)


def _mapped(folder: Path, keys: list[bytes], index: dict[bytes, tuple[np.ndarray, int]], dim: int) -> torch.Tensor:
    """The rows of ``keys`` as a memory-mapped tensor: a shard that holds exactly them, else a view."""
    if not keys:
        return torch.empty((0, dim), dtype=torch.float32)
    first = index[keys[0]][0]
    if isinstance(first, np.memmap) and first.filename is not None and len(first) == len(keys):
        if all(index[k][0] is first and index[k][1] == i for i, k in enumerate(keys)):  # one shard, in order
            try:
                return _open_view(Path(first.filename), len(keys), dim)
            except FileNotFoundError:  # merged into a new shard meanwhile: write a view instead
                pass
    path = _view_path(folder, keys)
    path.parent.mkdir(exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        out = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float32, shape=(len(keys), dim))
        for lo in range(0, len(keys), VIEW_BLOCK_ROWS):  # a bounded temporary per block
            hi = min(lo + VIEW_BLOCK_ROWS, len(keys))
            _gather(out[lo:hi], keys, index, lo, hi)
        out.flush()
        del out
        with tmp.open("rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return _open_view(path, len(keys), dim)


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
        shard: open_array(folder / f"{shard}.off.npy", mmap_mode=None)
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
