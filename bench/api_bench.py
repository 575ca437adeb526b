"""Sustained submissions per second through POST /api/v1/jobs/, against the floor of one authenticated DRF write.

Starts gunicorn with the image's configuration (deploy/gunicorn.conf.py) on a
scratch PostgreSQL database (created, then dropped) with Redis for the
throttle counts, seeds two teams, a cluster reading of 4 nodes (so every
submission runs the R10 check through the policy) and a team token, then
drives both endpoints from several client processes and prints requests/s,
latencies, the ratio, and the CPU each request took in gunicorn, PostgreSQL
and the client. Requests/s depend on whatever else runs on the machine (the
load average is printed), so the endpoints take turns in short slices and
share it alike; CPU per request depends on it much less.

The clients send pre-encoded requests over plain sockets and read only the
status line and Content-Length: http.client's header parsing and a JSON
encoding per request took the load generator half a millisecond of CPU a
request, which the server has to share on a 2-CPU machine. Both endpoints
get the same client and the same body (a job spec with a new name each time).

Workers are sync (`-k sync --threads 1`: more threads would make gunicorn run
threaded workers), as the image's were before it ran threaded ones
(WEB_THREADS): this bench measures what a request costs, which threads do not
change, so its figures stay comparable. A sync worker closes the connection
after each answer, so clients reconnect. A request is CPU-bound apart from its waits
on PostgreSQL and Redis, so one worker more than there are CPUs keeps them
busy during those waits; on an idle 2-CPU machine 3, 4 and 5 workers gave
the same rate within the noise, and more only add processes contending for
the same CPUs (gunicorn's general advice, 2 per CPU + 1, is for workers that
mostly wait).

    .venv/bin/python -m bench.api_bench [--seconds 10] [--slices 5] [--clients 6] [--workers 3]
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PG = "postgres://postgres@127.0.0.1:5432"
DB = "gangway_api_bench"
REDIS = "redis://127.0.0.1:6379/12"
SEED = """
from django.utils import timezone
from scheduling.models import ClusterNode
from tenants.models import PriorityTier, Quota, Team
standard = PriorityTier.objects.create(name="standard", value=100)
for slug in ("maps", "vision"):
    team = Team.objects.create(slug=slug, name=slug.title(), default_tier=standard)
    team.tiers.set([standard])
    Quota.objects.create(team=team, resource="gpu", nominal=16, borrowing_limit=16, max_per_replica=8)
for i in range(4):
    ClusterNode.objects.create(name=f"node-{i}", position=i, gpu=8, cpu=64000, memory=512 * 1024**3, seen_at=timezone.now())
"""
SPEC = {"team": "maps", "name": "bench", "image": "tensorflow/tensorflow:2.12.0-gpu", "command": ["python", "train.py"],
        "replicas": [{"role": "Worker", "count": 2, "gpu": 1, "cpu": "2", "memory": "4Gi"}]}  # fmt: skip


def environment(port: int) -> dict:
    return {
        **os.environ, "DATABASE_URL": f"{PG}/{DB}", "SECRET_KEY": "bench-only-secret-key-not-for-production",
        "ALLOWED_HOSTS": "127.0.0.1", "CELERY_BROKER_URL": REDIS, "CELERY_RESULT_BACKEND": REDIS,
        "API_RATE": "100000000/min", "DJANGO_SETTINGS_MODULE": "bench.api_bench_settings", "LOG_LEVEL": "WARNING",
        "DJANGO_DEBUG": "0", "TRUST_X_FORWARDED_PROTO": "1",
    }  # fmt: skip


def manage(env: dict, *args: str) -> str:
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, check=True,
                          capture_output=True, text=True).stdout.strip()  # fmt: skip


def psql(sql: str) -> None:
    subprocess.run(["psql", f"{PG}/postgres", "-q", "-c", sql], check=True, capture_output=True)


def hammer(args) -> tuple[int, int, list[float], float]:
    """One client: POST as fast as answers come back for `seconds`; returns (ok, errors, latencies, its CPU seconds)."""
    port, path, token, seconds, index = args
    cpu = time.process_time()
    # As behind the TLS-terminating Ingress: without X-Forwarded-Proto every request is redirected to HTTPS.
    head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n"
            "Content-Type: application/json\r\nX-Forwarded-Proto: https\r\n").encode()  # fmt: skip
    before, after = json.dumps({**SPEC, "name": "NAME"}).encode().split(b"NAME")
    ok = errors = 0
    latencies = []
    connection = None
    deadline = time.monotonic() + seconds
    n = 0
    while time.monotonic() < deadline:
        n += 1
        body = b"%sbench-%d-%d%s" % (before, index, n, after)
        if connection is None:
            connection = socket.create_connection(("127.0.0.1", port), timeout=30)
            connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        started = time.perf_counter()
        connection.sendall(b"%sContent-Length: %d\r\n\r\n%s" % (head, len(body), body))
        status, keep = read_answer(connection)
        latencies.append(time.perf_counter() - started)
        if not keep:
            connection.close()
            connection = None
        if status == 201:
            ok += 1
        else:
            errors += 1
            if errors == 1:
                print(f"  {path}: HTTP {status}", file=sys.stderr)
    if connection is not None:
        connection.close()
    return ok, errors, latencies, time.process_time() - cpu


def read_answer(connection: socket.socket) -> tuple[int, bool]:
    """Reads one HTTP/1.1 response; returns (status, whether the server keeps the connection open)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = connection.recv(65536)
        if not chunk:
            raise ConnectionError("the server closed the connection before answering")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.lower().split(b"\r\n")
    length = next(int(line[15:]) for line in lines if line.startswith(b"content-length:"))
    while len(body) < length:
        chunk = connection.recv(65536)
        if not chunk:
            raise ConnectionError("the server closed the connection mid-answer")
        body += chunk
    return int(lines[0].split()[1]), b"connection: close" not in lines


def measure(port: int, token: str, paths: tuple[str, ...], *, clients: int, seconds: float, slices: int) -> list[dict]:
    """Requests/s and latencies of each path; and CPU per request of the server, PostgreSQL and the clients.

    The paths take turns, `slices` times each, so whatever else runs on the
    machine weighs on both alike; CPU per request changes far less with it
    than requests/s do.
    """
    server = (lambda cmdline: f"127.0.0.1:{port}".encode() in cmdline and b"gunicorn" in cmdline)
    database = (lambda cmdline: cmdline.startswith(b"postgres: ") and f" {DB} ".encode() in cmdline)
    runs = [{"elapsed": 0.0, "server": 0.0, "database": 0.0, "results": []} for _ in paths]
    with multiprocessing.Pool(clients) as pool:
        for path in paths:
            pool.map(hammer, [(port, path, token, 1.0, i) for i in range(clients)])  # warm up every worker
        for turn in range(slices):
            for path, run in zip(paths, runs):
                cpu = cpu_seconds(server), cpu_seconds(database)
                started = time.monotonic()
                run["results"] += pool.map(
                    hammer, [(port, path, token, seconds / slices, 1000 * (turn + 1) + i) for i in range(clients)]
                )
                run["elapsed"] += time.monotonic() - started
                run["server"] += cpu_seconds(server) - cpu[0]
                run["database"] += cpu_seconds(database) - cpu[1]
    return [summary(run) for run in runs]


def summary(run: dict) -> dict:
    results = run["results"]
    latencies = sorted(latency for _, _, some, _ in results for latency in some)
    ok = sum(r[0] for r in results)
    return {
        "rate": ok / run["elapsed"], "ok": ok, "errors": sum(r[1] for r in results),
        "p50": statistics.median(latencies) * 1000, "p95": latencies[int(len(latencies) * 0.95)] * 1000,
        "server": run["server"] / len(latencies) * 1000, "database": run["database"] / len(latencies) * 1000,
        "client": sum(r[3] for r in results) / len(latencies) * 1000,
    }  # fmt: skip


def cpu_seconds(match) -> float:
    """User + system CPU seconds of the live processes whose command line `match` accepts (0 without /proc)."""
    total = 0
    pids = [pid for pid in os.listdir("/proc") if pid.isdigit()] if os.path.isdir("/proc") else []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as file:
                if not match(file.read().replace(b"\0", b" ")):
                    continue
            with open(f"/proc/{pid}/stat") as file:
                fields = file.read().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile, or not a process
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / os.sysconf("SC_CLK_TCK")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10, help="Time on each endpoint.")
    parser.add_argument("--slices", type=int, default=5, help="Turns the endpoints take within that time.")
    parser.add_argument("--clients", type=int, default=6, help="Client processes, each with one connection at a time.")
    parser.add_argument("--workers", type=int, default=(os.cpu_count() or 1) + 1,
                        help="gunicorn sync workers (default: one per CPU + 1; see above).")
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args()
    env = environment(args.port)
    psql(f"DROP DATABASE IF EXISTS {DB}")
    psql(f"CREATE DATABASE {DB}")
    subprocess.run(["redis-cli", "-n", "12", "FLUSHDB"], check=True, capture_output=True)
    server = None
    try:
        manage(env, "migrate", "--no-input")
        manage(env, "shell", "-c", SEED)
        token = manage(env, "create_token", "--team", "maps", "--name", "bench")
        server = subprocess.Popen(
            [str(Path(sys.executable).parent / "gunicorn"), "--config", "deploy/gunicorn.conf.py",
             "-k", "sync", "--threads", "1", "-w", str(args.workers), "-b", f"127.0.0.1:{args.port}",
             "portal.wsgi:application"],
            cwd=ROOT, env=env,
        )  # fmt: skip
        wait_ready(args.port)
        load = ", ".join(f"{average:.2f}" for average in os.getloadavg())
        print(f"gunicorn {args.workers} sync workers, {args.clients} client processes, {args.seconds:.0f} s each "
              f"in {args.slices} turns, "
              f"{os.cpu_count()} CPUs (load average {load}), PostgreSQL + Redis")  # fmt: skip
        submit, floor = measure(args.port, token, ("/api/v1/jobs/", "/bench/floor/"), clients=args.clients,
                                seconds=args.seconds, slices=args.slices)  # fmt: skip
    finally:
        if server is not None:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=30)
        psql(f"DROP DATABASE IF EXISTS {DB}")
    for label, result in (("POST /api/v1/jobs/ (submit)", submit), ("POST /bench/floor/ (one row)", floor)):
        print(f"{label:<30} {result['rate']:8.1f} req/s   p50 {result['p50']:6.1f} ms   p95 {result['p95']:6.1f} ms"
              f"   ({result['ok']} ok, {result['errors']} errors)")  # fmt: skip
        print(f"{'':<30} CPU per request: gunicorn {result['server']:.2f} ms, PostgreSQL {result['database']:.2f} ms,"
              f" client {result['client']:.2f} ms")  # fmt: skip
    print(f"submit costs {floor['rate'] / submit['rate']:.2f}x the floor in requests/s (target <= 3x), "
          f"{submit['server'] / floor['server']:.2f}x in gunicorn CPU; "
          f"target >= 200 submissions/s: {'met' if submit['rate'] >= 200 else 'NOT met'}")  # fmt: skip
    return 0


def wait_ready(port: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            connection.request("GET", "/healthz")
            if connection.getresponse().status < 500:
                return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"gunicorn did not answer on port {port} within {timeout:.0f} s")


if __name__ == "__main__":
    sys.exit(main())
