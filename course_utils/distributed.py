"""Run one function in fresh worker processes that form a gloo process group on 127.0.0.1 -- and always end them.

:func:`run_workers` calls ``fn(rank, world_size, *args)`` in ``world_size`` processes joined in a gloo group and
returns their results by rank. Whatever happens (a worker raises or hangs, the cell is interrupted) every worker is
ended (terminate, then kill) and the rendezvous port closed before it returns or raises.

- **The port.** This process opens the rendezvous ``TCPStore`` on ``127.0.0.1`` port 0 and keeps it bound while the
  workers connect: no port is picked, closed and bound again later, so two runs at once cannot race for it.
- **The network.** Workers bind gloo to the loopback interface (``GLOO_SOCKET_IFNAME``, set in the worker only).
- **Output.** A worker's stdout and stderr go to a log file; a failure names its rank, with traceback and log tail.
- **Start-up.** Workers fork from a *forkserver* that imported torch and ``torch._dynamo`` once (about 5 CPU-seconds
  saved per worker); where there is none (Windows), each worker is ``spawn``-ed.
- **The function** must be importable by name (e.g. from ``course_utils.comm_hooks``): a fresh process cannot see a
  notebook cell's functions. ``local=`` runs one more function, which may come from a notebook, as rank 0 here.

Usage::

    from course_utils.distributed import run_workers
    from course_utils.comm_hooks import compare_comm_hooks
    results = run_workers(compare_comm_hooks, world_size=2, args=(("fp16",), 3), timeout=60)   # [rank 0's, rank 1's]
"""

from __future__ import annotations

import contextlib
import datetime
import multiprocessing
import os
import pickle
import socket
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

__all__ = ["WorkerError", "WorkerTimeout", "loopback_interface", "run_workers", "single_process_group"]

_POLL_S = 0.02
_GROUPS_HELD: list[Any] = []  # a worker's process group, never released (see _worker_main)
_FAILURE_GRACE_S = 5.0  # how long the other ranks get to report after one failed, so the first failure is found
_END_GRACE_S = 3.0
_LOG_TAIL_CHARS = 2000


class WorkerError(RuntimeError):
    """A worker process raised or died. ``rank`` says which; the message carries its traceback or log."""

    def __init__(self, message: str, rank: int | None = None) -> None:
        super().__init__(message)
        self.rank = rank


class WorkerTimeout(WorkerError, TimeoutError):
    """The workers did not all finish within ``timeout`` seconds (they were ended)."""


def loopback_interface() -> str:
    """The name of the loopback network interface (``lo`` on Linux, ``lo0`` on macOS).

    Usage: ``os.environ["GLOO_SOCKET_IFNAME"] = loopback_interface()`` (in a worker process only)
    """
    names = [name for _, name in socket.if_nameindex()]
    for candidate in ("lo", "lo0"):
        if candidate in names:
            return candidate
    loops = [name for name in names if name.startswith("lo")]
    if loops:
        return loops[0]
    raise OSError(f"No loopback network interface found among {names}; gloo needs one to stay on 127.0.0.1.")


def _check_function(fn: Callable[..., Any]) -> None:
    if not callable(fn):
        raise TypeError(f"fn must be a function, got {type(fn).__name__}.")
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", "")
    if module in (None, "__main__") or "<locals>" in qualname or "<lambda>" in qualname:
        raise ValueError(
            f"Worker processes import the function by name, so {qualname or fn!r} must be defined at the top level "
            "of a module (e.g. course_utils.comm_hooks), not in a notebook cell, a lambda or another function."
        )


# What the forkserver imports once, so that each worker forked from it starts without importing torch again.
# torch._dynamo too: DistributedDataParallel.__init__ imports it (2 CPU-s a worker otherwise).
_PRELOAD = ["torch", "torch.distributed", "torch._dynamo", "course_utils.distributed"]


def _context() -> Any:
    """The multiprocessing context workers start from: forkserver (torch preloaded) where there is one, else spawn.

    Never ``fork``: this process may run threads (a Jupyter kernel does), which a forked copy would not have."""
    if "forkserver" in multiprocessing.get_all_start_methods():
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(_PRELOAD)  # takes effect when the forkserver starts (once per process)
        return context
    return multiprocessing.get_context("spawn")


def _start_worker(work: Path, rank: int) -> Any:
    """Start the worker of ``rank`` (a ``multiprocessing`` process running :func:`_worker_process`)."""
    process = _context().Process(target=_worker_process, args=(str(work), rank), name=f"course-worker-{rank}",
                                 daemon=False)
    process.start()
    return process


def _end(processes: Sequence[Any]) -> None:
    """Terminate every process still running, wait a little, then kill what is left; reap them all."""
    for process in processes:
        if process.is_alive():
            process.terminate()
    deadline = time.monotonic() + _END_GRACE_S
    for process in processes:
        process.join(timeout=max(0.0, deadline - time.monotonic()))
        if process.exitcode is None:
            process.kill()
            process.join()
        process.close()


def _log_tail(path: Path) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return text[-_LOG_TAIL_CHARS:].strip()


@contextlib.contextmanager
def _joined(store: Any, rank: int, world_size: int, timeout: float) -> Iterator[Any]:
    """Join the default gloo process group on ``store`` (loopback only); destroy it on exit, also on error.

    ``GLOO_SOCKET_IFNAME`` is set only while gloo creates its device, then restored (or removed) again."""
    import torch.distributed as dist

    if dist.is_initialized():
        raise RuntimeError("This process is already in a process group: call torch.distributed.destroy_process_group() "
                           "first (or restart the kernel).")
    previous = os.environ.get("GLOO_SOCKET_IFNAME")
    os.environ["GLOO_SOCKET_IFNAME"] = loopback_interface()
    try:
        dist.init_process_group("gloo", store=store, rank=rank, world_size=world_size,
                                timeout=datetime.timedelta(seconds=timeout))
    finally:
        if previous is None:
            os.environ.pop("GLOO_SOCKET_IFNAME", None)
        else:
            os.environ["GLOO_SOCKET_IFNAME"] = previous
    try:
        yield dist.group.WORLD
    finally:
        dist.destroy_process_group()


@contextlib.contextmanager
def single_process_group(timeout: float = 30.0) -> Iterator[Any]:
    """A gloo process group of one process -- this one -- on an in-memory store (no port is opened for the
    rendezvous); destroyed when the block ends, also when it raises. Yields the group.

    Usage: ``with single_process_group() as group: ddp = DistributedDataParallel(model)``
    """
    import torch.distributed as dist

    with _joined(dist.HashStore(), 0, 1, timeout) as group:
        yield group


def _open_store(world_size: int, timeout: float) -> Any:
    """The rendezvous store, served by this process on 127.0.0.1; port 0: the operating system picks a free port."""
    import torch.distributed as dist

    return dist.TCPStore("127.0.0.1", 0, world_size + 1, is_master=True, wait_for_workers=False,
                         timeout=datetime.timedelta(seconds=timeout))


def run_workers(
    fn: Callable[..., Any],
    *,
    world_size: int = 2,
    args: Sequence[Any] = (),
    timeout: float = 60.0,
    local: Callable[[int, int], Any] | None = None,
) -> list[Any]:
    """Call ``fn(rank, world_size, *args)`` in ``world_size`` fresh processes joined in a gloo group on 127.0.0.1;
    return the results by rank. With ``local``, this process is rank 0 and runs ``local(0, world_size)``.

    Raises :class:`WorkerError` (with the rank and its traceback) when a worker raises or dies, :class:`WorkerTimeout`
    after ``timeout`` seconds; an error in ``local`` as it is. ``fn``, ``args`` and results travel with :mod:`pickle`.

    Usage: ``run_workers(compare_comm_hooks, world_size=2, args=(("fp16",), 3))``
    """
    _check_function(fn)
    if not isinstance(world_size, int) or isinstance(world_size, bool) or world_size < 1:
        raise ValueError(f"world_size must be a positive int, got {world_size!r}.")
    if local is not None and (not callable(local) or world_size < 2):
        raise ValueError("local must be a function local(rank, world_size), and world_size >= 2 with it.")
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout <= 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}.")

    first_worker = 0 if local is None else 1
    processes: list[Any] = []
    store = None
    with tempfile.TemporaryDirectory(prefix="course-workers-") as folder:
        work = Path(folder)
        try:
            store = _open_store(world_size, timeout)
            job = {"fn": fn, "args": tuple(args), "world_size": world_size, "port": store.port,
                   "timeout": float(timeout)}
            (work / "job.pkl").write_bytes(pickle.dumps(job))
            for rank in range(first_worker, world_size):  # each gets this process's sys.path (multiprocessing)
                processes.append(_start_worker(work, rank))
            here: list[Any] = []
            if local is not None:
                with _joined(store, 0, world_size, timeout):
                    here.append(local(0, world_size))
            return here + _collect(processes, work, range(first_worker, world_size), timeout)
        finally:
            _end(processes)
            del store  # the last reference: the store's server socket closes and the port is free again


def _collect(processes: Sequence[Any], work: Path, ranks: range, timeout: float) -> list[Any]:
    deadline = time.monotonic() + timeout
    results: dict[int, Any] = {}
    while len(results) < len(ranks):
        for rank, process in zip(ranks, processes):
            if rank in results:
                continue
            outcome = work / f"rank{rank}.result.pkl"
            if outcome.exists():  # read as soon as it is written, even while the process is still exiting
                status, value, _ = pickle.loads(outcome.read_bytes())
                if status != "ok":
                    _raise_first_failure(work, ranks)
                results[rank] = value
            elif process.exitcode is not None and not outcome.exists():
                raise WorkerError(
                    f"Worker rank {rank} died (exit code {process.exitcode}) without a result. Its log:\n"
                    f"{_log_tail(work / f'rank{rank}.log') or '(empty)'}", rank)
        if len(results) == len(ranks):
            break
        if time.monotonic() > deadline:
            waiting = [rank for rank in ranks if rank not in results]
            raise WorkerTimeout(
                f"Worker rank(s) {waiting} did not finish within {timeout:g} s and were ended. Is a collective "
                f"waiting for a rank that never calls it? Last log of rank {waiting[0]}:\n"
                f"{_log_tail(work / f'rank{waiting[0]}.log') or '(empty)'}", waiting[0])
        time.sleep(_POLL_S)
    return [results[rank] for rank in ranks]


def _raise_first_failure(work: Path, ranks: range) -> None:
    """Raise the error of the rank that failed FIRST: when one rank raises, the others usually fail a moment later
    in a collective ("Connection closed by peer"), and that echo must not hide the cause. The ranks still running
    get a short grace period to report, then the earliest failure (by the time each worker stamped) is raised and
    the others are named."""
    grace = time.monotonic() + _FAILURE_GRACE_S
    failures: dict[int, tuple[float, str]] = {}
    while True:
        for rank in ranks:
            path = work / f"rank{rank}.result.pkl"
            if rank not in failures and path.exists():
                status, value, failed_at = pickle.loads(path.read_bytes())
                if status != "ok":
                    failures[rank] = (failed_at, value)
        if len(failures) == len(ranks) or time.monotonic() > grace:
            break
        time.sleep(_POLL_S)
    first = min(failures, key=lambda rank: failures[rank][0])
    others = sorted(set(failures) - {first})
    also = f"\n(rank(s) {others} failed after it, most likely because rank {first} stopped.)" if others else ""
    raise WorkerError(f"Worker rank {first} raised:\n{failures[first][1]}{also}", first)


# -- the worker side: a process started by run_workers, running _worker_process(folder, rank) -----------------------
def _watch_parent(deadline: float) -> None:
    """End this worker if the notebook's process goes away or the job overruns (a last line of defence)."""
    parent = multiprocessing.parent_process()  # the process that called run_workers, not the forkserver
    while True:
        if (parent is not None and not parent.is_alive()) or time.monotonic() > deadline:
            os._exit(3)
        time.sleep(0.2)


def _worker_process(folder: str, rank: int) -> None:
    """A worker's life: its stdout and stderr go to ``rank<N>.log`` in ``folder``, never to the caller's output."""
    log = os.open(Path(folder, f"rank{rank}.log"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    for stream, fd in ((sys.stdout, 1), (sys.stderr, 2)):
        if stream is not None:
            stream.flush()
        os.dup2(log, fd)
    os.close(log)
    sys.stdout = open(1, "w", encoding="utf-8", errors="replace", buffering=1, closefd=False)  # line-buffered
    sys.stderr = open(2, "w", encoding="utf-8", errors="replace", buffering=1, closefd=False)
    _worker_main(folder, rank)


def _worker_main(folder: str, rank: int) -> int:
    work = Path(folder)
    outcome: tuple[str, Any, float]
    failed_at: list[float] = []  # when the job itself raised: leaving the group afterwards can take a while
    try:
        job = pickle.loads((work / "job.pkl").read_bytes())
        threading.Thread(target=_watch_parent, args=(time.monotonic() + job["timeout"] + 5.0,), daemon=True).start()
        import torch
        import torch.distributed as dist

        torch.set_num_threads(1)
        store = dist.TCPStore("127.0.0.1", job["port"], job["world_size"] + 1, is_master=False,
                              timeout=datetime.timedelta(seconds=job["timeout"]))
        with _joined(store, rank, job["world_size"], job["timeout"]) as group:
            # Held until the worker exits (os._exit: no destructor runs): else the last reference may go on one of
            # gloo's own threads (a finished future's callback), whose destructor then joins that very thread and
            # aborts the worker ("Resource deadlock avoided").
            _GROUPS_HELD.append(group)
            try:
                value = job["fn"](rank, job["world_size"], *job["args"])
            except BaseException:
                failed_at.append(time.time())
                raise
        outcome = ("ok", value, time.time())
    except BaseException:  # reported to the parent, which raises it with this rank's number
        # the time tells a cause from its echoes: the moment the job raised, not when this rank left the group
        outcome = ("error", traceback.format_exc(), failed_at[0] if failed_at else time.time())
    partial = work / f"rank{rank}.result.tmp"
    try:
        partial.write_bytes(pickle.dumps(outcome))
    except Exception:  # an unpicklable result: say so instead of dying silently
        partial.write_bytes(pickle.dumps(("error", traceback.format_exc(), time.time())))
    partial.replace(work / f"rank{rank}.result.pkl")
    return 0
