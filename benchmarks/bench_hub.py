"""Capacity of ``make hub``: 1, 2, 4 and 8 simulated learners run notebook 05 through the hub at the same time.

Not a test: it prints a table (and writes it as JSON with ``--json``) for the instructor guide's sizing rule.

Each round starts learner servers through the hub's REST API (the same spawn, workspace hook, system users and
one-thread kernels as a login), then every learner runs the code cells of ``05_guided_backprop.ipynb`` (complete
edition) over a kernel's websocket through the proxy, all at once. Measured: peak memory per learner (PSS: shared pages
split fairly; RSS: what ``top`` shows), notebook wall time and its ratio to one learner alone, the hub's CPU (hub,
proxy, culler) as % of one core, and the machine's CPU use.

Needs root (learners are system users). Takes a few minutes. Usage:
``sudo .venv/bin/python benchmarks/bench_hub.py [--learners 1 2 4 8] [--json out.json]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import secrets
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path

import nbformat
import psutil
from tornado.httpclient import AsyncHTTPClient, HTTPRequest
from tornado.websocket import websocket_connect

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests" / "browser"), str(ROOT / "tests"), str(ROOT)]  # hubserver, hub_client, tools
from hubserver import ThrowAwayHub  # noqa: E402

NOTEBOOK = ROOT / "notebooks" / "05_guided_backprop.ipynb"


class Bench:
    def __init__(self, hub: ThrowAwayHub, token: str) -> None:
        self.hub, self.token = hub, token
        self.http = AsyncHTTPClient(max_clients=64)

    def host(self, path: str) -> str:
        """The Host header a browser would send (each learner's server at its own origin NAME.localhost)."""
        parts = path.split("/")
        return f"{parts[2]}.localhost:{self.hub.port}" if path.startswith("/user/") else f"localhost:{self.hub.port}"

    async def api(self, method: str, path: str, body: object = None) -> object:
        request = HTTPRequest(f"http://127.0.0.1:{self.hub.port}{path}", method=method, request_timeout=600,
                              headers={"Authorization": f"token {self.token}", "Content-Type": "application/json",
                                       "Host": self.host(path)},
                              body=None if body is None and method in ("GET", "DELETE") else json.dumps(body or {}))
        response = await self.http.fetch(request, raise_error=False)
        if response.code >= 400:
            raise RuntimeError(f"{method} {path}: HTTP {response.code} {response.body[:300]!r}")
        return json.loads(response.body) if response.body else None

    async def start_server(self, name: str, timeout: float = 600) -> float:
        started = time.monotonic()
        await self.api("POST", f"/hub/api/users/{name}/server")
        while time.monotonic() - started < timeout:
            model = await self.api("GET", f"/hub/api/users/{name}")
            server = model.get("servers", {}).get("")  # type: ignore[union-attr]
            if server and server.get("ready"):
                return time.monotonic() - started
            await asyncio.sleep(0.5)
        raise TimeoutError(f"{name}'s server did not start in {timeout:.0f} s")

    async def stop_server(self, name: str) -> None:
        await self.api("DELETE", f"/hub/api/users/{name}/server")
        for _ in range(240):
            model = await self.api("GET", f"/hub/api/users/{name}")
            if not model.get("servers"):  # type: ignore[union-attr]
                return
            await asyncio.sleep(0.5)

    async def run_notebook(self, name: str, cells: list[tuple[str, bool]]) -> float:
        """Run every (code, expected_to_raise) cell in order; an unexpected outcome stops the run with an error."""
        kernel = await self.api("POST", f"/user/{name}/api/kernels", {"name": "python3"})
        kernel_id = kernel["id"]  # type: ignore[index]
        path = f"/user/{name}/api/kernels/{kernel_id}/channels"
        connection = await websocket_connect(HTTPRequest(f"ws://127.0.0.1:{self.hub.port}{path}", headers={
            "Authorization": f"token {self.token}", "Host": self.host(path)}))
        session = uuid.uuid4().hex
        try:
            started = time.monotonic()
            for index, (code, should_raise) in enumerate(cells):
                msg_id = uuid.uuid4().hex
                connection.write_message(json.dumps({
                    "header": {"msg_id": msg_id, "username": name, "session": session, "msg_type": "execute_request",
                               "version": "5.3"},
                    "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
                    "content": {"code": code, "silent": False, "store_history": True, "user_expressions": {},
                                "allow_stdin": False, "stop_on_error": True},
                }))
                while True:
                    raw = await asyncio.wait_for(connection.read_message(), timeout=600)
                    if raw is None:
                        raise RuntimeError(f"{name}: the kernel's websocket closed at cell {index}")
                    message = json.loads(raw)
                    if (message.get("channel") == "shell" and message["header"]["msg_type"] == "execute_reply"
                            and message["parent_header"].get("msg_id") == msg_id):
                        if (message["content"]["status"] != "ok") != should_raise:
                            content = message["content"]
                            raise RuntimeError(f"{name}: cell {index} " + (
                                "is tagged raises-exception but did not raise" if should_raise else
                                f"failed: {content.get('ename')}: {content.get('evalue')}"))
                        break
            return time.monotonic() - started
        finally:
            connection.close()
            await self.api("DELETE", f"/user/{name}/api/kernels/{kernel_id}")


class Sampler(threading.Thread):
    """Every 0.5 s: memory (PSS, RSS) of each learner's processes; the peak per learner."""

    def __init__(self, uids: dict[str, int]) -> None:
        super().__init__(daemon=True)
        self.uids = {uid: name for name, uid in uids.items()}
        self.peak_pss = {name: 0 for name in uids}
        self.peak_rss = {name: 0 for name in uids}
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            pss = dict.fromkeys(self.peak_pss, 0)
            rss = dict.fromkeys(self.peak_rss, 0)
            for proc in psutil.process_iter(["uids"]):
                try:
                    name = self.uids.get(proc.info["uids"].real)
                    if name is None:
                        continue
                    full = proc.memory_full_info()
                    pss[name] += full.pss
                    rss[name] += full.rss
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    continue
            for name in pss:
                self.peak_pss[name] = max(self.peak_pss[name], pss[name])
                self.peak_rss[name] = max(self.peak_rss[name], rss[name])
            self.done.wait(0.5)


def hub_cpu_seconds(hub: ThrowAwayHub, learner_uids: set[int]) -> float:
    total = 0.0
    root = psutil.Process(hub.process.pid)  # type: ignore[union-attr]
    for proc in [root, *root.children(recursive=True)]:
        try:
            if proc.uids().real in learner_uids:
                continue
            times = proc.cpu_times()
            total += times.user + times.system
        except psutil.NoSuchProcess:
            continue
    return total


async def round_of(bench: Bench, names: list[str], cells: list[str]) -> dict[str, object]:
    spawn = await asyncio.gather(*(bench.start_server(name) for name in names))
    uids = {name: uid for name, uid in bench.hub.learner_uids().items() if name in names}
    sampler = Sampler(uids)
    sampler.start()
    hub_before = hub_cpu_seconds(bench.hub, set(bench.hub.learner_uids().values()))
    psutil.cpu_percent(None)
    started = time.monotonic()
    walls = await asyncio.gather(*(bench.run_notebook(name, cells) for name in names))
    elapsed = time.monotonic() - started
    machine_cpu = psutil.cpu_percent(None)
    hub_after = hub_cpu_seconds(bench.hub, set(bench.hub.learner_uids().values()))
    sampler.done.set()
    sampler.join()
    await asyncio.gather(*(bench.stop_server(name) for name in names))
    mib = 1024 * 1024
    return {
        "learners": len(names),
        "spawn_s_max": max(spawn),
        "wall_s_mean": statistics.mean(walls), "wall_s_max": max(walls),
        "pss_mib_max": max(sampler.peak_pss.values()) / mib,
        "pss_mib_mean": statistics.mean(sampler.peak_pss.values()) / mib,
        "rss_mib_max": max(sampler.peak_rss.values()) / mib,
        "hub_cpu_pct": 100 * (hub_after - hub_before) / elapsed,
        "machine_cpu_pct": machine_cpu,
    }


async def main_async(counts: list[int]) -> list[dict[str, object]]:
    token = secrets.token_hex(32)
    extra = Path(os.environ.get("TMPDIR", "/tmp")) / f"course-bench-{secrets.token_hex(4)}.py"
    extra.write_text(
        "c = get_config()  # noqa\n"
        f"c.JupyterHub.services.append({{'name': 'course-bench', 'api_token': {token!r}}})\n"
        "c.JupyterHub.load_roles.append({'name': 'course-bench', 'services': ['course-bench'], 'scopes': "
        "['admin:users', 'admin:servers', 'access:servers', 'list:users', 'read:users']})\n")
    extra.chmod(0o600)
    cells = [("".join(cell.source), "raises-exception" in cell.metadata.get("tags", []))
             for cell in nbformat.read(NOTEBOOK, 4).cells if cell.cell_type == "code"]
    results = []
    try:
        with ThrowAwayHub(prefix=f"b{secrets.token_hex(2)}", extra_env={"HUB_EXTRA_CONFIG": str(extra)}) as hub:
            hub.start()
            bench = Bench(hub, token)
            names = [f"{hub.prefix}l{i}" for i in range(1, max(counts) + 1)]
            await bench.api("POST", "/hub/api/users", {"usernames": names})
            await round_of(bench, names[:1], cells[:2])  # warm the page cache: the first import of torch is slow
            for count in counts:
                result = await round_of(bench, names[:count], cells)
                results.append(result)
                print(json.dumps(result), flush=True)
            left = hub.stop()
            if left:
                print(f"WARNING: still running after Ctrl-C: {left}", file=sys.stderr)
    finally:
        extra.unlink(missing_ok=True)
    return results


def table(results: list[dict[str, object]], cores: int) -> str:
    """The guide's table; 'ideal' is what one-thread kernels sharing ``cores`` cores fairly would give."""
    alone = results[0]["wall_s_mean"] if results and results[0]["learners"] == 1 else None
    lines = ["| learners at once | notebook 05 wall time (mean / slowest) | vs one alone | ideal on "
             f"{cores} cores | peak memory per learner, PSS (RSS) | hub CPU | machine CPU |",
             "|---|---|---|---|---|---|---|"]
    for r in results:
        ratio = f"{r['wall_s_mean'] / alone:.1f}x" if alone else "-"  # type: ignore[operator]
        ideal = f"{max(1.0, int(r['learners']) / cores):.1f}x"  # type: ignore[call-overload]
        lines.append(f"| {r['learners']} | {r['wall_s_mean']:.0f} s / {r['wall_s_max']:.0f} s | {ratio} | {ideal} | "
                     f"{r['pss_mib_max']:.0f} MiB ({r['rss_mib_max']:.0f} MiB) | {r['hub_cpu_pct']:.0f} % of a core | "
                     f"{r['machine_cpu_pct']:.0f} % |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--learners", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("bench_hub needs root: each simulated learner is a system user, as in `sudo make hub`.", file=sys.stderr)
        return 2
    load_before = os.getloadavg()[0]  # other work on the machine skews the wall times: say how much there was
    results = asyncio.run(main_async(sorted(args.learners)))
    memory = psutil.virtual_memory().total / 1024**3
    cores = psutil.cpu_count() or 1
    print(f"\nMachine: {platform.processor() or platform.machine()}, {cores} logical cores, "
          f"{memory:.0f} GiB, {platform.platform()}; 1-minute load average before the run {load_before:.1f}")
    print(table(results, cores))
    if args.json:
        args.json.write_text(json.dumps({"machine": {"cores": psutil.cpu_count(), "memory_gib": round(memory, 1),
                                                     "platform": platform.platform()}, "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
