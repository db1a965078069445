"""What a learner's session holds that an exercise check must leave as it found it: random states, grad mode,
threads, print options, default dtype and device, anomaly and determinism flags, torch modes, saved-tensor hooks,
global hooks, matmul precision, numpy's error handling, recursion limit, working directory, two often-patched
PyTorch functions.

Usage: ``before = session_state(); check(...); assert same_session(before, session_state())``
"""

from __future__ import annotations

import os
import random
import sys
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
        "device": str(torch.get_default_device()),
        "modes": (torch._C._len_torch_function_stack(), torch._C._len_torch_dispatch_stack()),
        "saved_tensor_hooks": torch._C._autograd._top_saved_tensors_default_hooks(False) is None,
        "global_hooks": _global_hook_counts(),
        "matmul": torch.get_float32_matmul_precision(),
        "np_errors": np.geterr(),
        "recursion": sys.getrecursionlimit(),
        "cwd": os.getcwd(),
        "torch.allclose": torch.allclose,
        "F.relu": torch.nn.functional.relu,
    }


def _global_hook_counts() -> dict[str, int]:
    import torch.nn.modules.module as module_globals
    import torch.optim.optimizer as optimizer_globals

    return {f"{m.__name__}.{name}": len(value) for m in (module_globals, optimizer_globals)
            for name, value in vars(m).items()
            if name.startswith("_global_") and "hook" in name and isinstance(value, dict)}


def same_session(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """True when two snapshots of :func:`session_state` are equal."""
    return all(torch.equal(a[k], b[k]) if isinstance(a[k], torch.Tensor) else
               (np.array_equal(a[k], b[k]) if isinstance(a[k], np.ndarray) else a[k] == b[k]) for k in a)
