"""Sustained submissions per second through POST /api/v1/jobs/, against the floor of one authenticated DRF write.

Starts gunicorn on a scratch PostgreSQL database (created, then dropped) with
Redis for the throttle counts, seeds two teams, a cluster reading of 4 nodes
(so every submission runs the R10 check through the policy) and a team token,
then drives both endpoints from several client processes over keep-alive
connections and prints requests/s, latencies and the ratio.

    .venv/bin/python -m bench.api_bench [--seconds 10] [--clients 8] [--workers 5]
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import signal
import statistics
import subprocess
import sys
import time
import urllib.parse
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


def hammer(args) -> tuple[int, int, list[float]]:
    """One client: POST as fast as answers come back for `seconds`; returns (ok, errors, latencies)."""
    port, path, token, seconds, index = args
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    # As behind the TLS-terminating Ingress: without the header every request is redirected to HTTPS.
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json", "X-Forwarded-Proto": "https"}
    ok = errors = 0
    latencies = []
    deadline = time.monotonic() + seconds
    n = 0
    while time.monotonic() < deadline:
        n += 1
        body = json.dumps({**SPEC, "name": f"bench-{index}-{n}"}).encode()
        started = time.perf_counter()
        connection.request("POST", path, body=body, headers=headers)
        answer = connection.getresponse()
        answer.read()
        latencies.append(time.perf_counter() - started)
        if answer.status == 201:
            ok += 1
        else:
            errors += 1
            if errors == 1:
                print(f"  {path}: HTTP {answer.status}", file=sys.stderr)
    connection.close()
    return ok, errors, latencies


def measure(port: int, path: str, token: str, *, clients: int, seconds: float) -> dict:
    with multiprocessing.Pool(clients) as pool:
        pool.map(hammer, [(port, path, token, 1.0, i) for i in range(clients)])  # warm up every worker
        started = time.monotonic()
        results = pool.map(hammer, [(port, path, token, seconds, 1000 + i) for i in range(clients)])
        elapsed = time.monotonic() - started
    latencies = sorted(l for _, _, ls in results for l in ls)
    ok = sum(r[0] for r in results)
    return {
        "rate": ok / elapsed, "ok": ok, "errors": sum(r[1] for r in results),
        "p50": statistics.median(latencies) * 1000, "p95": latencies[int(len(latencies) * 0.95)] * 1000,
    }  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--clients", type=int, default=8, help="Client processes, each with one keep-alive connection.")
    parser.add_argument("--workers", type=int, default=2 * (os.cpu_count() or 1) + 1,
                        help="gunicorn sync workers (default: gunicorn's advice, 2 per CPU + 1).")
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
            [str(Path(sys.executable).parent / "gunicorn"), "-w", str(args.workers), "-b", f"127.0.0.1:{args.port}",
             "--log-level", "warning", "--keep-alive", "30", "portal.wsgi:application"],
            cwd=ROOT, env=env,
        )  # fmt: skip
        wait_ready(args.port)
        print(f"gunicorn {args.workers} sync workers, {args.clients} client processes, {args.seconds:.0f} s each, "
              f"{os.cpu_count()} CPUs, PostgreSQL + Redis")  # fmt: skip
        submit = measure(args.port, "/api/v1/jobs/", token, clients=args.clients, seconds=args.seconds)
        floor = measure(args.port, "/bench/floor/", token, clients=args.clients, seconds=args.seconds)
    finally:
        if server is not None:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=30)
        psql(f"DROP DATABASE IF EXISTS {DB}")
    for label, result in (("POST /api/v1/jobs/ (submit)", submit), ("POST /bench/floor/ (one row)", floor)):
        print(f"{label:<30} {result['rate']:8.1f} req/s   p50 {result['p50']:6.1f} ms   p95 {result['p95']:6.1f} ms"
              f"   ({result['ok']} ok, {result['errors']} errors)")  # fmt: skip
    print(f"submit costs {floor['rate'] / submit['rate']:.2f}x the floor (target <= 3x); "
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
