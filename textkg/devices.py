"""Which torch device a run computes on: ``--device`` / ``train.device``.

A device name is resolved once, at the start of a command, into a
:class:`torch.device` that is then passed explicitly to whatever needs it
(encoders, the model, evaluation, prediction); nothing here sets a global
default. ``auto`` takes CUDA when ``torch.cuda.is_available()``, else Apple's
MPS when available, else the CPU. A device that is named but not available is
an error (:class:`textkg.errors.ConfigError`, exit status 2), never a silent
fallback to the CPU.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from textkg.errors import ConfigError

if TYPE_CHECKING:  # torch is imported when a name is resolved: configs are checked without it
    import torch

#: The accepted forms of a device name (``cuda:N`` is CUDA device number N).
DEVICE_CHOICES = ("auto", "cpu", "cuda", "cuda:N", "mps")

_PATTERN = re.compile(r"auto|cpu|mps|cuda(?::(\d+))?")


def check_device_name(name: object, *, field: str = "train.device") -> str:
    """``name`` if it is one of :data:`DEVICE_CHOICES` (syntax only: whether it is available is not checked).

    Raises:
        ConfigError: ``name`` is not a string of one of those forms (the field is named).
    """
    if not isinstance(name, str) or _PATTERN.fullmatch(name) is None:
        raise ConfigError(f"{name!r} is not one of {', '.join(DEVICE_CHOICES)}", field=field)
    return name


def mps_available() -> bool:
    """Whether Apple's Metal (MPS) backend can be used."""
    import torch

    mps = getattr(torch.backends, "mps", None)
    return bool(mps is not None and mps.is_available())


def resolve_device(name: object = "auto", *, field: str = "train.device") -> torch.device:
    """The :class:`torch.device` that ``name`` stands for on this machine.

    Args:
        name: ``auto``, ``cpu``, ``cuda``, ``cuda:N`` or ``mps``.
        field: the setting named in error messages (``train.device``, ``device``).

    Returns:
        ``cpu``, ``cuda`` / ``cuda:N`` or ``mps``; ``auto`` gives ``cuda`` if CUDA is
        available, else ``mps`` if MPS is, else ``cpu``.

    Raises:
        ConfigError: a malformed name, or a device this machine does not have
            (``cuda`` without a CUDA build or GPU, ``cuda:N`` with N out of range,
            ``mps`` off Apple silicon).
    """
    import torch

    name = check_device_name(name, field=field)
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        return torch.device("mps") if mps_available() else torch.device("cpu")
    if name == "cpu":
        return torch.device("cpu")
    if name == "mps":
        if not mps_available():
            raise ConfigError(
                "device 'mps' is not available on this machine (torch.backends.mps.is_available() is false); "
                "use 'cpu' or 'auto'",
                field=field,
            )
        return torch.device("mps")
    if not torch.cuda.is_available():
        built = torch.version.cuda
        why = f"torch {torch.__version__} was built without CUDA" if built is None else "no CUDA GPU is visible"
        raise ConfigError(
            f"device {name!r} is not available on this machine ({why}; torch.cuda.is_available() is false); "
            "use 'cpu' or 'auto'",
            field=field,
        )
    match = _PATTERN.fullmatch(name)
    index = match.group(1) if match is not None else None
    if index is None:
        return torch.device("cuda")
    count = torch.cuda.device_count()
    if int(index) >= count:
        raise ConfigError(
            f"device {name!r} does not exist: this machine has {count} CUDA device(s) (cuda:0 .. cuda:{count - 1})",
            field=field,
        )
    return torch.device("cuda", int(index))


def describe_device(device: torch.device) -> str:
    """What ``metrics.json`` records: ``cpu``, ``mps``, or ``cuda:N (GPU name)``."""
    import torch

    if device.type != "cuda":
        return str(device)
    index = device.index if device.index is not None else torch.cuda.current_device()
    return f"cuda:{index} ({torch.cuda.get_device_name(index)})"
