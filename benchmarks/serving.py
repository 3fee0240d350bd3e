"""How many visitors the app serves: this commit against an earlier one, two apps on this machine, through
gradio_client.

    python benchmarks/serving.py [--baseline d44dfde] [--seconds 20] [--rounds 2]

Both apps serve the shipped CIFAR-10 model on 127.0.0.1, each in its own process, each with one endpoint added
for this benchmark: /noop, which takes the same upload and returns a fixed label. The earlier commit's code is
taken with `git archive` into a temporary folder and served with that folder first on the import path. Three
loads, the two apps taking turns load by load and round by round (a busy moment of the machine falls on both):

- 8 clients at once, each calling /explain back to back, a new token, layer and head each call: calls per
  second and the 95th percentile of a call's time;
- 30 clients, each clicking every 3 s (the token, then the layer, then the head, as the page does: the image
  uploaded once, each click naming the uploaded file): p95;
- one client: /explain against /noop in the same app, call by call (medians, and their ratio).

Otherwise every /explain uploads its image, as an API caller does, and gets every picture back as a file URL.
With each load's throughput it prints the CPU time a call takes in the app's process and in the clients'
(this process: gradio_client's own work shares the two cores). The clients pass ssl_verify=False: gradio_client
otherwise builds a new TLS context, loading the system's certificates, for every request, even over plain HTTP
(about 40 ms of CPU each), which would count against both apps.
Targets (issue #34): 8 clients at least 2x the earlier throughput with p95 under 1 s; 30 clients p95 under 1 s;
one client /explain at most 1.3x /noop.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(port: int, code: str) -> None:
    """The app of the code in `code` (first on the import path), plus /noop."""
    sys.path.insert(0, code)
    import gradio as gr

    from vitviz.app import build_demo, launch

    demo = build_demo()
    with demo:
        image, label, button = (
            gr.Image(visible=False, type="filepath"),
            gr.Label(visible=False),
            gr.Button(visible=False),
        )
        button.click(lambda img: {"fixed": 1.0}, image, label, preprocess=False, api_name="noop")
    launch(demo, server_name="127.0.0.1", server_port=port, quiet=True)


def start(code: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": code}
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(port), "--code", code],
        cwd=code,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/"
    client(url, server)
    return server, url


def client(url: str, server: subprocess.Popen | None = None, seconds: float = 180):
    from gradio_client import Client

    deadline = time.time() + seconds
    while True:
        try:
            return Client(url, verbose=False, download_files=False, ssl_verify=False)
        except Exception:
            if time.time() > deadline or (server is not None and server.poll() is not None):
                raise SystemExit(f"the app at {url} did not start")
            time.sleep(0.5)


def clicks(n: int):
    """The n-th call's options: a new token, then a new layer, then a new head, in turn (as the page's clicks)."""
    which = n % 3
    return {"patch": (7 * n) % 64, "layer": 1 + (n // 3) % 6, "head": 1 + (n // 9) % 8}, which


def load(url: str, image: str, clients: int, seconds: float, every: float | None) -> list[float]:
    """`clients` threads, each its own gradio_client, calling /explain for `seconds`: back to back, uploading the
    image each call (an API caller), or one call every `every` seconds, spread over that period, naming the image
    uploaded once (a page's clicks); every call's time."""
    from gradio_client import handle_file

    times: list[float] = []
    lock = threading.Lock()
    ready = [client(url) for _ in range(clients)]
    sent = {"path": uploaded(url, image)} if every else None
    start_at = time.perf_counter() + 1.0

    def run(k: int) -> None:
        c, n = ready[k], k * 101
        t0 = start_at + (every * k / clients if every else 0)
        while True:
            now = time.perf_counter()
            if t0 > now:
                time.sleep(t0 - now)
            if time.perf_counter() > start_at + seconds:
                return
            options, _ = clicks(n)
            t = time.perf_counter()
            c.predict(sent or handle_file(image), **options, api_name="/explain")
            took = time.perf_counter() - t
            with lock:
                times.append(took)
            n += 1
            t0 = t0 + every if every else time.perf_counter()

    threads = [threading.Thread(target=run, args=(k,), daemon=True) for k in range(clients)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(seconds + 120)
    return times


def uploaded(url: str, image: str) -> str:
    """The path the app gives `image` once uploaded (what a page's events name afterwards)."""
    import httpx

    with open(image, "rb") as f:
        return httpx.post(f"{url}gradio_api/upload", files={"files": ("image.png", f, "image/png")}).json()[0]


def cpu_seconds(pid: int | None = None) -> float:
    """CPU time used so far by process `pid` (None: this one)."""
    if pid is None:
        return time.process_time()
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measured(server: subprocess.Popen, run) -> tuple[list[float], float, float]:
    """(the call times `run()` gives, the app's and the clients' CPU seconds a call)."""
    s0, c0 = cpu_seconds(server.pid), cpu_seconds()
    times = run()
    n = max(1, len(times))
    return times, (cpu_seconds(server.pid) - s0) / n, (cpu_seconds() - c0) / n


def one_client(url: str, image: str, calls: int) -> dict[str, list[float]]:
    """/noop and /explain, call by call, for one client; the first three rounds warm up."""
    from gradio_client import handle_file

    c = client(url)
    times: dict[str, list[float]] = {"/noop": [], "/explain": []}
    for i in range(calls + 3):
        for endpoint in times:
            kw = clicks(i)[0] if endpoint == "/explain" else {}
            t = time.perf_counter()
            c.predict(handle_file(image), **kw, api_name=endpoint)
            if i >= 3:
                times[endpoint].append(time.perf_counter() - t)
    return times


def p95(ts: list[float]) -> float:
    return sorted(ts)[min(len(ts) - 1, int(0.95 * len(ts)))] if ts else float("nan")


def baseline_code(commit: str, folder: str) -> str:
    """The commit's tree in `folder` (git archive), its shipped checkpoints as this tree's."""
    out = Path(folder) / commit
    out.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "archive", commit], cwd=ROOT, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(out)], input=archive, check=True)
    return str(out)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--baseline", default="d44dfde", help="the earlier commit to serve beside this one")
    p.add_argument("--seconds", type=float, default=20, help="how long each load runs on each app")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--calls", type=int, default=30, help="one client's calls of each endpoint")
    p.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    p.add_argument("--code", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.serve:
        return serve(a.serve, a.code)
    from vitviz.data import gallery

    image = gallery.items("cifar10")[3][0]
    with tempfile.TemporaryDirectory() as tmp:
        apps = {a.baseline: baseline_code(a.baseline, tmp), "this commit": str(ROOT)}
        servers = {name: start(code) for name, code in apps.items()}
        results: dict[tuple[str, str], list[float]] = {}
        cpu: dict[tuple[str, str], list[tuple[float, float]]] = {}
        try:
            for _ in range(a.rounds):
                for clients, every in ((8, None), (30, 3.0)):
                    for name, (server, url) in servers.items():
                        ts, app_s, client_s = measured(server, lambda: load(url, image, clients, a.seconds, every))
                        results.setdefault((name, str(clients)), []).extend(ts)
                        cpu.setdefault((name, str(clients)), []).append((app_s, client_s))
            for name, (_, url) in servers.items():
                for endpoint, ts in one_client(url, image, a.calls).items():
                    results[(name, endpoint)] = ts
        finally:
            for server, _ in servers.values():
                server.terminate()
                server.wait(timeout=30)
    report(results, cpu, list(apps), a.seconds * a.rounds)


def report(results: dict, cpu: dict, names: list[str], seconds: float) -> None:
    rate = {n: len(results[(n, "8")]) / seconds for n in names}
    for (n, load_), pairs in sorted(cpu.items()):
        app_ms, client_ms = (1000 * statistics.mean(x) for x in zip(*pairs))
        print(
            f"{n:12s} {load_:>2s} clients: CPU a call {app_ms:4.0f} ms in the app, {client_ms:4.0f} ms in the clients"
        )
    for n in names:
        eight, thirty = results[(n, "8")], results[(n, "30")]
        noop, explain = statistics.median(results[(n, "/noop")]), statistics.median(results[(n, "/explain")])
        print(
            f"{n:12s} 8 clients: {rate[n]:5.1f} calls/s, p95 {1000 * p95(eight):5.0f} ms | 30 clients every 3 s: "
            f"p95 {1000 * p95(thirty):5.0f} ms ({len(thirty)} calls) | one client: /explain {1000 * explain:4.0f} ms, "
            f"/noop {1000 * noop:4.0f} ms, {explain / noop:4.2f}x",
            flush=True,
        )
    base, now = names
    print(f"8 clients: this commit serves {rate[now] / rate[base]:.2f}x the calls per second of {base}")


if __name__ == "__main__":
    main()
