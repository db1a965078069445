"""course_utils.distributed: results come back by rank, and worker processes are always ended and the rendezvous
port freed -- after success, when a worker raises, when a worker hangs, and when the calling cell fails or is
interrupted while the workers run. Each test starts real processes (a few seconds each)."""

from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

import course_utils.distributed as distributed
from course_utils.distributed import WorkerError, WorkerTimeout, loopback_interface, run_workers, single_process_group


def _link(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:  # the descriptor os.listdir read /proc/self/fd with: closed by the time it is looked at
        return ""


def listening_addresses() -> set[str] | None:
    """The local IPv4/IPv6 addresses this process listens on (Linux /proc), or None where /proc is missing."""
    if not os.path.isdir("/proc/self/fd"):
        return None
    links = [_link(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd")]
    inodes = {link[8:-1] for link in links if link.startswith("socket:[")}
    rows = [line.split() for table in ("/proc/net/tcp", "/proc/net/tcp6") if os.path.exists(table)
            for line in Path(table).read_text().splitlines()[1:]]
    return {fields[1].split(":")[0] for fields in rows if fields[3] == "0A" and fields[9] in inodes}  # 0A: LISTEN


# -- worker functions: module level, so the worker processes can import them by name ---------------------------------
def report(rank: int, world_size: int, folder: str) -> dict:
    """Sum the ranks with a real all-reduce; say who we are."""
    Path(folder, f"pid{rank}").write_text(str(os.getpid()))
    total = torch.tensor([float(rank + 1)])
    dist.all_reduce(total)
    print("a worker's print goes to its log, not to the caller")
    return {"rank": rank, "world_size": world_size, "sum": float(total), "backend": dist.get_backend(),
            "listening": listening_addresses(), "ifname": os.environ.get("GLOO_SOCKET_IFNAME")}


def fail_on_rank_one(rank: int, world_size: int, folder: str) -> None:
    """Rank 1 raises; rank 0 is then stuck in a collective that never completes."""
    Path(folder, f"pid{rank}").write_text(str(os.getpid()))
    if rank == 1:
        raise ValueError("rank one fails on purpose")
    dist.all_reduce(torch.ones(1))
    time.sleep(60)


def hang(rank: int, world_size: int, folder: str) -> None:
    """Never finishes (a deadlock, an endless loop)."""
    Path(folder, f"pid{rank}").write_text(str(os.getpid()))
    time.sleep(600)


def exit_hard(rank: int, world_size: int, folder: str) -> None:
    """Dies without a word, as a crash (or the kernel's OOM killer) would."""
    Path(folder, f"pid{rank}").write_text(str(os.getpid()))
    os._exit(7)


def parent_of_worker(rank: int, world_size: int) -> dict:
    """The worker's parent process: its pid and whether torch's library is already loaded in it; whether this worker
    started with torch._dynamo imported (DistributedDataParallel imports it)."""
    maps = Path(f"/proc/{os.getppid()}/maps")
    return {"ppid": os.getppid(), "torch_loaded": "libtorch_cpu" in maps.read_text() if maps.exists() else None,
            "dynamo_loaded": "torch._dynamo" in sys.modules}


# -- helpers ---------------------------------------------------------------------------------------------------------
def _recording(monkeypatch: pytest.MonkeyPatch, name: str, attribute: str) -> list[int]:
    """``attribute`` of everything ``distributed.<name>`` makes during the test (whether or not the run got far)."""
    seen: list[int] = []
    original = getattr(distributed, name)

    def recording(*args: object) -> object:
        made = original(*args)
        seen.append(getattr(made, attribute))
        return made

    monkeypatch.setattr(distributed, name, recording)
    return seen


@pytest.fixture()
def ports(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The ports of every rendezvous store run_workers opens during the test."""
    return _recording(monkeypatch, "_open_store", "port")


@pytest.fixture()
def launched(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The process ids of every worker run_workers starts during the test."""
    return _recording(monkeypatch, "_start_worker", "pid")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _assert_free(port: int) -> None:
    """Nothing listens on 127.0.0.1:port any more (SO_REUSEADDR ignores TIME_WAIT, never a listening socket)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind(("127.0.0.1", port))


def _assert_cleaned_up(launched: list[int], count: int, ports: list[int], environment: dict[str, str]) -> None:
    assert len(ports) == 1 and len(launched) == count
    for pid in launched:
        assert not _alive(pid), f"worker {pid} is still running"
    _assert_free(ports[0])
    assert dict(os.environ) == environment, "run_workers changed this process's environment"
    assert not dist.is_initialized(), "a process group was left in this process"


# -- tests -----------------------------------------------------------------------------------------------------------
def test_results_come_back_by_rank_from_a_real_gloo_group(tmp_path: Path, ports: list[int], launched: list[int],
                                                          capfd: pytest.CaptureFixture[str]) -> None:
    environment = dict(os.environ)
    results = run_workers(report, world_size=2, args=(str(tmp_path),), timeout=60)
    assert [r["rank"] for r in results] == [0, 1]
    assert all(r["world_size"] == 2 and r["sum"] == 3.0 and r["backend"] == "gloo" for r in results)
    loopback = {"0100007F", "00000000000000000000000001000000"}  # 127.0.0.1 and ::1 as /proc/net/tcp{,6} write them
    for r in results:  # gloo listens on the loopback interface only; the variable that chose it was put back
        assert r["listening"] is None or (r["listening"] and r["listening"] <= loopback), r["listening"]
        assert r["ifname"] is None
    assert "a worker's print" not in capfd.readouterr().out
    _assert_cleaned_up(launched, 2, ports, environment)


@pytest.mark.parametrize(("fn", "timeout", "error", "match"), [
    (fail_on_rank_one, 60, WorkerError, "rank 1 raised"),
    (exit_hard, 60, WorkerError, r"died \(exit code 7\)"),
    (hang, 5, WorkerTimeout, "did not finish within 5 s"),  # the wait is bounded: timeout plus ending the workers
])
def test_a_worker_that_raises_dies_or_hangs_is_reported_and_every_worker_is_ended(
        fn: object, timeout: int, error: type[Exception], match: str, tmp_path: Path, ports: list[int],
        launched: list[int]) -> None:
    environment = dict(os.environ)
    start = time.monotonic()
    with pytest.raises(error, match=match) as caught:
        run_workers(fn, world_size=2, args=(str(tmp_path),), timeout=timeout)  # type: ignore[arg-type]
    assert time.monotonic() - start < timeout + 10
    if fn is fail_on_rank_one:
        assert caught.value.rank == 1 and "rank one fails on purpose" in str(caught.value)  # type: ignore[attr-defined]
    _assert_cleaned_up(launched, 2, ports, environment)


def test_workers_are_ended_when_the_calling_cell_fails_or_is_interrupted(tmp_path: Path, ports: list[int],
                                                                        launched: list[int]) -> None:
    """The cell's own code (here ``local``, rank 0 in this process) raises while a worker runs: the error is the
    caller's, raised as it is, and the worker is ended first. KeyboardInterrupt is what a notebook's stop button
    raises."""
    environment = dict(os.environ)
    for error in (RuntimeError("the cell failed"), KeyboardInterrupt()):
        for stale in tmp_path.glob("pid*"):
            stale.unlink()

        def local(rank: int, world_size: int, error: BaseException = error) -> None:
            deadline = time.monotonic() + 60
            while not (tmp_path / "pid1").exists():  # bounded: the worker is running before we fail
                assert time.monotonic() < deadline, "the worker never started"
                time.sleep(0.05)
            raise error

        with pytest.raises(type(error)):
            run_workers(hang, world_size=2, args=(str(tmp_path),), timeout=60, local=local)
        pid = int((tmp_path / "pid1").read_text())
        assert pid == launched[-1] and not _alive(pid), f"worker {pid} survived a {type(error).__name__} in the cell"
        _assert_free(ports[-1])
        assert dict(os.environ) == environment and not dist.is_initialized()
    assert len(ports) == 2


def test_local_rank_zero_joins_the_group_with_the_workers(tmp_path: Path, ports: list[int],
                                                          launched: list[int]) -> None:
    environment = dict(os.environ)

    def local(rank: int, world_size: int) -> float:
        value = torch.tensor([float(rank + 1)])
        dist.all_reduce(value)
        return float(value)

    results = run_workers(report, world_size=2, args=(str(tmp_path),), timeout=60, local=local)
    assert results[0] == 3.0 and results[1]["sum"] == 3.0 and results[1]["rank"] == 1
    _assert_cleaned_up(launched, 1, ports, environment)


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads /proc (Linux)")
def test_workers_fork_from_a_server_that_imported_torch_once(ports: list[int], launched: list[int]) -> None:
    """The workers' parent is the forkserver, not this process, and it has torch loaded: a worker does not import
    torch or torch._dynamo again (about 5 CPU-seconds each); both runs' workers come from the same server."""
    first = run_workers(parent_of_worker, world_size=2, timeout=60)
    second = run_workers(parent_of_worker, world_size=2, timeout=60)
    parents = {r["ppid"] for r in first + second}
    assert len(parents) == 1 and os.getpid() not in parents, parents
    assert all(r["torch_loaded"] and r["dynamo_loaded"] for r in first + second)
    assert len(launched) == 4 and not any(_alive(pid) for pid in launched)


def test_two_runs_at_once_get_different_ports(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ports come from the operating system while the store holds them: two stores open at once never collide."""
    first, second = distributed._open_store(2, 5), distributed._open_store(2, 5)
    try:
        assert first.port != second.port and first.port > 0
    finally:
        del first, second


def test_functions_a_worker_cannot_import_are_refused_with_a_clear_error() -> None:
    def inner(rank: int, world_size: int) -> None:
        return None

    for fn in (inner, lambda rank, world_size: None):
        with pytest.raises(ValueError, match="top level of a module"):
            run_workers(fn)
    with pytest.raises(ValueError, match="world_size"):
        run_workers(report, world_size=0)
    with pytest.raises(ValueError, match="timeout"):
        run_workers(report, timeout=0)
    with pytest.raises(ValueError, match="local"):
        run_workers(report, world_size=1, local=lambda rank, world_size: None)


def test_single_process_group_is_destroyed_also_on_error_and_leaves_the_environment_alone() -> None:
    environment = dict(os.environ)
    with single_process_group() as group:
        assert dist.is_initialized() and group.size() == 1 and dist.get_backend() == "gloo"
        with pytest.raises(RuntimeError, match="already in a process group"):  # a second group is refused clearly
            with single_process_group():
                pass
    assert not dist.is_initialized() and dict(os.environ) == environment
    with pytest.raises(KeyError):
        with single_process_group():
            raise KeyError("inside")
    assert not dist.is_initialized() and dict(os.environ) == environment
    assert loopback_interface() in {name for _, name in socket.if_nameindex()}
