"""What keeps one learner's server from the others and from the machine, set up by root before it becomes the learner
(``make hub``; TLJH uses :func:`mount_home`). Instructor guide, "Limits per learner":

- private ``TMPDIR`` and caches (:data:`PRIVATE_DIRS`); ``setrlimit`` limits (processes, memory, file size, no core);
- namespaces of its own: fresh tmpfs for :data:`PRIVATE_TMPFS` and its own System V memory (``unshare(2)``);
- a memory cgroup: shared memory (tmpfs, System V, MAP_SHARED) included, which ``RLIMIT_DATA`` does not count;
- a home that is a filesystem of its own (an ext4 image on a loop device): size and files capped.

Usage: ``isolate_server(512 << 20, str(memory_cgroup("course-ann", 4 << 30)))`` in a ``preexec_fn`` (as root)
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

# Under the learner's home (0700), never the shared /tmp: torch.compile's caches hold code that runs, so a folder
# another learner made there first would run their code.
PRIVATE_DIRS = {
    "TMPDIR": ".cache/tmp",
    "XDG_CACHE_HOME": ".cache",
    "TORCHINDUCTOR_CACHE_DIR": ".cache/torchinductor",
    "TRITON_CACHE_DIR": ".cache/triton",
    "TORCH_EXTENSIONS_DIR": ".cache/torch_extensions",
    "MPLCONFIGDIR": ".cache/matplotlib",
    "PYTHONPYCACHEPREFIX": ".cache/pycache",
    "JUPYTER_RUNTIME_DIR": ".cache/run",  # connection files and the kernels' unix sockets: short (SOCKET_PATH_MAX)
}
SOCKET_PATH_MAX = 107  # sun_path: 108 bytes with the final NUL (Linux)
KERNEL_SOCKET_NAME = "/kernel-" + "0" * 36 + "-ipc-10"  # the longest name jupyter_client gives (a uuid4, port 1..10)
PRIVATE_TMPFS = ("/dev/shm", "/tmp", "/var/tmp", "/run/lock")  # every user may write there: each server its own
CLONE_NEWNS, CLONE_NEWIPC, MS_NOSUID, MS_NODEV, MS_REC, MS_PRIVATE = 0x00020000, 0x08000000, 2, 4, 16384, 1 << 18


def parse_size(text: str) -> int:
    """``"2.5G"`` -> bytes (K, M, G, T: powers of 1024; a plain number is bytes)."""
    import re

    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([KMGT]?)i?B?\s*", str(text), re.IGNORECASE)
    if not match:
        raise ValueError(f"not a size: {text!r}")
    return int(float(match.group(1)) * 1024 ** " KMGT".index(match.group(2).upper() or " "))


def private_environment(home: str) -> dict[str, str]:
    """``TMPDIR`` and the caches of one learner, all under ``home`` (see :data:`PRIVATE_DIRS`)."""
    return {name: f"{home}/{relative}" for name, relative in PRIVATE_DIRS.items()}


def make_private_dirs(env: dict[str, str]) -> None:
    """Run as the learner (after setuid): create the private folders, mode 0700, refusing one that is not theirs."""
    for name in PRIVATE_DIRS:
        path = env[name]
        os.makedirs(path, mode=0o700, exist_ok=True)
        info = os.lstat(path)
        if info.st_uid != os.getuid() or not os.path.isdir(path) or os.path.islink(path):
            raise PermissionError(f"{path} ({name}) is not a folder of this learner's own")
        os.chmod(path, 0o700)


def limit_resources(tasks: int, memory: int, file_size: int) -> None:
    """In a learner's server before it starts: ``tasks`` processes, ``memory`` bytes per process (0: none; a big
    allocation fails with MemoryError before the cgroup ends a process), files of ``file_size`` bytes at most."""
    import resource

    limits = {resource.RLIMIT_NPROC: tasks, resource.RLIMIT_FSIZE: file_size, resource.RLIMIT_CORE: 0}
    for limit, value in ({**limits, resource.RLIMIT_DATA: memory} if memory else limits).items():
        resource.setrlimit(limit, (value, value))


def under_private_tmp(path: str | Path) -> bool:
    """Whether ``path`` is in a folder that each learner's server replaces with one of its own (so it cannot see it)."""
    return any(Path(os.path.abspath(path)).is_relative_to(place) for place in PRIVATE_TMPFS)


@functools.cache
def _libc() -> Any:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    libc.unshare.argtypes = [ctypes.c_int]
    return libc


def isolate_server(shm: int, cgroup: str | None) -> None:
    """In a learner's server before it starts (root, before setuid; :func:`_libc` loaded in the parent): join
    ``cgroup`` (or None), then if ``shm`` namespaces whose :data:`PRIVATE_TMPFS` and System V memory hold ``shm``
    bytes each. Raises OSError where the system refuses."""
    import ctypes

    if cgroup:
        descriptor = os.open(f"{cgroup}/cgroup.procs", os.O_WRONLY)
        try:
            os.write(descriptor, b"0")  # this process, and so everything it starts
        finally:
            os.close(descriptor)
    if not shm:
        return
    libc = _libc()
    calls = [(libc.unshare, (CLONE_NEWNS | CLONE_NEWIPC,)),
             (libc.mount, (b"none", b"/", None, MS_REC | MS_PRIVATE, None))]  # nothing leaks back out
    calls += [(libc.mount, (b"tmpfs", place.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, f"size={shm},mode=1777".encode()))
              for place in PRIVATE_TMPFS if os.path.isdir(place)]
    for call, args in calls:
        if call(*args) != 0:
            error = ctypes.get_errno()
            raise OSError(error, f"{call.__name__}{args[:2]}: {os.strerror(error)}")
    for name, value in (("shmmax", shm), ("shmall", shm // os.sysconf("SC_PAGE_SIZE"))):  # this IPC namespace's
        with open(f"/proc/sys/kernel/{name}", "w") as handle:
            handle.write(str(value))


def memory_cgroup(name: str, limit: int) -> Path:
    """A memory cgroup ``name`` of ``limit`` bytes below this process's own (v1, or v2), made if needed."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            parent, limit_file = Path("/sys/fs/cgroup/memory", path.lstrip("/")), "memory.limit_in_bytes"
            break
    else:
        parent, limit_file = Path("/sys/fs/cgroup", path.lstrip("/")), "memory.max"
        if "memory" not in (parent / "cgroup.subtree_control").read_text().split():
            (parent / "cgroup.subtree_control").write_text("+memory")
    group = parent / name
    group.mkdir(exist_ok=True)
    (group / limit_file).write_text(str(limit))
    return group


def mount_home(home: Path, image: Path, size: int) -> bool:
    """``home`` as the ext4 file ``image`` of ``size`` bytes on a loop device (made on first use with what ``home``
    held, one file per 16 KiB at most). True if it mounts it now.

    Usage: ``mount_home(Path("/home/ann"), Path(".hub/private/homes/ann.img"), 2 << 30)`` (as root)"""
    if os.path.ismount(home):
        return False
    mount = ["mount", "-o", "loop,nosuid,nodev", str(image)]
    if not image.exists():
        info = home.stat()
        os.close(os.open(image, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        os.truncate(image, size)  # sparse: the disk holds what the learner writes, no more
        try:
            subprocess.run(["mkfs.ext4", "-q", "-m", "0", "-i", "16384", "-E",
                            f"root_owner={info.st_uid}:{info.st_gid}", str(image)], check=True, capture_output=True)
            with tempfile.TemporaryDirectory() as staging:
                subprocess.run([*mount, staging], check=True, capture_output=True)
                try:
                    os.rmdir(f"{staging}/lost+found")
                    subprocess.run(["cp", "-a", f"{home}/.", staging], check=True, capture_output=True)
                finally:
                    subprocess.run(["umount", staging], check=True, capture_output=True)
        except (OSError, subprocess.CalledProcessError) as error:
            image.unlink()
            raise RuntimeError(f"could not give {home} a filesystem of its own ({getattr(error, 'stderr', b'')!r}"
                               f" {error}): does it hold more than its size, {size} bytes?") from None
        for entry in os.scandir(home):  # now in the image: the machine's disk keeps no second copy
            shutil.rmtree(entry.path) if entry.is_dir(follow_symlinks=False) else os.unlink(entry.path)
    subprocess.run([*mount, str(home)], check=True, capture_output=True)
    return True


def mount_learner_homes(images: Path) -> None:
    """At the hub's start: mount every ``images/ACCOUNT.img`` again, so the dashboard reads it before a login."""
    import pwd

    for image in sorted(images.glob("*.img")):
        try:
            mount_home(Path(pwd.getpwnam(image.stem).pw_dir), image, 0)
        except (KeyError, OSError, subprocess.CalledProcessError):
            continue


def try_isolation(shm: int, memory: int, disk: int) -> None:
    """Everything above, once (a throw-away child, a tiny home); OSError or RuntimeError where the machine refuses."""
    _libc()
    group = memory_cgroup(f"course-probe-{os.getpid()}", 1 << 30) if memory else None
    try:
        subprocess.run(["/bin/sh", "-c", ""], check=True, timeout=60,
                       preexec_fn=lambda: isolate_server(min(shm, 1 << 20), str(group) if group else None))
    finally:
        if group is not None:
            group.rmdir()
    if disk:
        with tempfile.TemporaryDirectory() as folder:
            Path(folder, "home").mkdir()
            mount_home(Path(folder, "home"), Path(folder, "home.img"), 16 << 20)
            subprocess.run(["umount", f"{folder}/home"], check=True, capture_output=True)


SHARED_TEMP = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")


def remove_shared_temp_files(uid: int, places: tuple[str, ...] = SHARED_TEMP) -> list[str]:
    """Remove (and return) what ``uid`` left at the top of the machine's shared temporary folders."""
    import stat

    if uid == 0:
        raise ValueError("refusing to remove root's files")
    removed = []
    for place in places:
        try:
            entries = list(os.scandir(place))
        except OSError:
            continue
        for entry in entries:
            try:
                info = entry.stat(follow_symlinks=False)
                if info.st_uid != uid:
                    continue
                if stat.S_ISDIR(info.st_mode):
                    shutil.rmtree(entry.path)  # never follows a link (fd-based on Linux)
                else:
                    os.unlink(entry.path)
                removed.append(entry.path)
            except OSError:
                continue
    return removed


def capped_log(path: Path, limit: int) -> int:
    """A pipe's write end whose output a thread appends to ``path`` (0600), at most ``limit`` bytes (past half,
    ``path.1`` takes the older half). A file the learner's processes wrote would grow outside their home's size
    (attack N2). Close the returned end once the server has it."""
    import threading

    read, write = os.pipe()

    def copy() -> None:
        out = -1
        with open(read, "rb", buffering=0) as source:
            while chunk := source.read(1 << 16):
                if out < 0 or os.fstat(out).st_size + len(chunk) > limit // 2:
                    if out >= 0:
                        os.close(out)
                        os.replace(path, f"{path}.1")
                    out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
                os.write(out, chunk[:limit // 2])
        if out >= 0:
            os.close(out)

    threading.Thread(target=copy, name=f"log of {path.name}", daemon=True).start()
    return write


def end_learner_processes(uid: int, grace: float = 5.0) -> list[int]:
    """SIGTERM, then SIGKILL after ``grace`` s, to every process of ``uid``; returns their pids. Then ``kill -KILL
    -1`` as ``uid`` until none is left (``2 * grace`` s at most): a re-forking loop outlives a pass over pids (N3)."""
    import psutil

    if uid == 0:
        raise ValueError("refusing to end root's processes")
    procs = [p for p in psutil.process_iter(["uids"]) if p.info["uids"] and uid in p.info["uids"][:2]]
    for proc in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.terminate()
    _, alive = psutil.wait_procs(procs, timeout=grace)
    for proc in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()
    psutil.wait_procs(alive, timeout=grace)
    deadline = time.monotonic() + 2 * grace
    while True:  # at least once: a list of processes can miss the one a forking loop has now
        with contextlib.suppress(subprocess.TimeoutExpired):  # kill -1: every process of its user but itself
            subprocess.run(["kill", "-KILL", "-1"], user=uid, stderr=subprocess.DEVNULL, timeout=grace, check=False)
        time.sleep(0.05)
        if time.monotonic() > deadline or not any(
                p.info["uids"] and p.info["uids"].real == uid and p.info["status"] != psutil.STATUS_ZOMBIE
                for p in psutil.process_iter(["uids", "status"])):
            return [p.pid for p in procs]
