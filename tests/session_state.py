"""What a learner's session holds that an exercise check must leave as it found it: random states, grad mode,
threads, print options, default dtype, anomaly and determinism flags.

Usage: ``before = session_state(); check(...); assert same_session(before, session_state())``
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch


def session_state() -> dict[str, Any]:
    """A snapshot of every global a check could change."""
    return {
        "torch": torch.random.get_rng_state(),
        "numpy": np.random.get_state()[1].copy(),
        "random": random.getstate(),
        "grad": torch.is_grad_enabled(),
        "threads": torch.get_num_threads(),
        "print": torch._tensor_str.PRINT_OPTS.precision,
        "np_print": np.get_printoptions()["precision"],
        "dtype": torch.get_default_dtype(),
        "anomaly": torch.is_anomaly_enabled(),
        "deterministic": torch.are_deterministic_algorithms_enabled(),
    }


def same_session(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """True when two snapshots of :func:`session_state` are equal."""
    return all(torch.equal(a[k], b[k]) if isinstance(a[k], torch.Tensor) else
               (np.array_equal(a[k], b[k]) if isinstance(a[k], np.ndarray) else a[k] == b[k]) for k in a)
