"""A busy Monday: the whole product as deployed, under a hundred people at once, live.

Creates a scratch PostgreSQL database (dropped at the end), migrates and seeds a world: 8 teams
with quotas per GPU type and priority tiers, a simulated cluster of 4 l4 and 2 a100 nodes of 8
GPUs (48 GPUs), 100 people in one or two teams each (a lead per team, two staff), a team token
per team and a weekend's backlog of jobs. Then it starts the processes of the image as
deploy/entrypoint.sh runs them, with Redis (a database of its own, flushed) as the broker:
gunicorn with deploy/gunicorn.conf.py, the Celery worker (queue celery: admission cycles,
reconciles), the notifier (queue notifications) and beat, on the simulated cluster in real
time (jobs run 15 to 60 s: the API's jobs say so in the spec's `simulate`, the form's take
SIM_DEFAULT_DURATION), with the production settings (DJANGO_DEBUG off, behind a TLS proxy).

For --seconds, client processes act as the people in their browsers: each has one tab open
on the dashboard, My jobs or a job page and polls its live parts as htmx does (the dashboard's
four `?part=` every 5 s, a job page's live part every 3 s and its logs every 10 s, My jobs
every 10 s), sending back each part's ETag as If-None-Match; some log in through the login
form first, the others hold a session from last week. A share of them submits through the form
(CSRF token, the fit preview as they type, a team switch, now and then an invalid post fixed
and sent again, or a double click), watches the job's page and cancels some; each team's CI
submits through the API with its team token and an Idempotency-Key (some answers "lost" and the
request sent again), follows its jobs as `gangway submit --wait` does and cancels some. A
kubelet probes /readyz, a Prometheus scrapes /metrics, and a third of the way in a Katib
experiment of 16 trials and a kubectl job arrive in the simulated cluster (simulate_outside).

Then the clients stop, the loop drains for up to --drain seconds, beat and the workers stop,
one reconcile runs, and it prints: requests per kind with their status codes (any 5xx is a
finding), p50/p95/p99 latency and how many 304s; the admission cycles, their p50/p95 duration
and any that failed; every job submitted, admitted, finished, still open or lost (each
submission is looked up by its unique name: one job each, none missing, none twice) and the
loop's invariants; database connections at peak (pg_stat_activity); deadlocks and rollbacks;
and the errors in each process's log. Every process it started is stopped, on Ctrl-C too.

    .venv/bin/python -m bench.busy_monday [--seconds 120] [--users 100] [--clients 4] [--web-workers 2]
        [--drain 60] [--logins 10] [--keep-logs DIR]
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

from bench.busy_monday_people import (
    PASSWORD, SETTLED, SHAPES, TERMINAL, Browser, Stats, ci_day, job_spec, person_day,
)

ROOT = Path(__file__).resolve().parent.parent
PG = "postgres://postgres@127.0.0.1:5432"
DB = "gangway_busy_monday"
REDIS_DB = 7
REDIS = f"redis://127.0.0.1:6379/{REDIS_DB}"
TEAMS = ["maps", "perception", "finance", "research", "speech", "ranking", "robotics", "search"]
A100_TEAMS = {"perception": 8, "research": 8}  # a100 nominal; the other teams' quotas name l4 only
L4_NODES, A100_NODES, GPUS_PER_NODE = 4, 2, 8
METRICS_TOKEN = "busy-monday-metrics-token"  # as the Secret gives it: Prometheus scrapes with it
PARAMS = "BUSY_MONDAY"  # environment variable carrying the seed's and the account's parameters


# --- The world (run inside manage.py shell, on the scratch database) --------------------------------

def seed() -> None:
    """Seeds the world from the parameters in $BUSY_MONDAY; prints one line "SEED <json>" with the
    people (their teams, roles and session keys) and the team tokens."""
    from django.conf import settings
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
    from django.contrib.auth.hashers import make_password
    from django.contrib.sessions.backends.db import SessionStore

    from jobs.services import job_submit
    from jobs.spec import parse_spec
    from scheduling.models import SimNode
    from tenants.models import GPU_TYPE_LABEL, GpuType, Membership, PriorityTier, Quota, Team
    from tenants.tokens import token_create

    params = json.loads(os.environ[PARAMS])
    rng = random.Random(params["seed"])
    l4 = GpuType.objects.create(name="l4", label=GPU_TYPE_LABEL, value="NVIDIA-L4", order=1, description="24 GB")
    a100 = GpuType.objects.create(name="a100", label=GPU_TYPE_LABEL, value="NVIDIA-A100-SXM4-80GB", order=2,
                                  description="80 GB, NVLink")  # fmt: skip
    for index, kind in enumerate([l4] * L4_NODES + [a100] * A100_NODES, start=1):
        SimNode.objects.create(name=f"node-{index:02d}", gpu=GPUS_PER_NODE, cpu=8000 * GPUS_PER_NODE,
                               memory=64 * 1024**3 * GPUS_PER_NODE, labels={GPU_TYPE_LABEL: kind.value})  # fmt: skip
    tiers = {name: PriorityTier.objects.create(name=name, value=value, preemptible=preemptible, grace_period=30)
             for name, value, preemptible in (("production", 1000, False), ("standard", 100, True),
                                              ("experiment", 10, True))}  # fmt: skip
    teams = {}
    l4_share = L4_NODES * GPUS_PER_NODE // len(TEAMS)
    for slug in TEAMS:
        team = Team.objects.create(slug=slug, name=slug.title(), default_tier=tiers["standard"])
        allowed = ["standard", "experiment"] + (["production"] if slug in ("finance", "perception", "search") else [])
        team.tiers.set([tiers[name] for name in allowed])
        Quota.objects.create(team=team, resource="gpu:l4", nominal=l4_share, borrowing_limit=2 * l4_share,
                             max_per_replica=8)  # fmt: skip
        if slug in A100_TEAMS:
            Quota.objects.create(team=team, resource="gpu:a100", nominal=A100_TEAMS[slug], borrowing_limit=0,
                                 max_per_replica=8)  # fmt: skip
        teams[slug] = team
    User = get_user_model()
    hashed = make_password(PASSWORD)  # hashed once: every person has the same password
    users = User.objects.bulk_create(
        User(username=f"user-{index:03d}", email=f"user-{index:03d}@example.com", password=hashed,
             is_staff=index < 2, is_superuser=index < 2)
        for index in range(params["users"])
    )  # fmt: skip
    people = []
    backend = settings.AUTHENTICATION_BACKENDS[-1]
    for index, user in enumerate(users):
        own = [TEAMS[index % len(TEAMS)]] + ([rng.choice(TEAMS)] if rng.random() < 0.3 else [])
        own = list(dict.fromkeys(own))
        role = Membership.Role.LEAD if index < 2 * len(TEAMS) and index >= len(TEAMS) else Membership.Role.MEMBER
        for slug in own:
            Membership.objects.create(user=user, team=teams[slug], role=role)
        session = SessionStore()  # a session from last week: most people do not log in on Monday morning
        session[SESSION_KEY], session[BACKEND_SESSION_KEY] = str(user.pk), backend
        session[HASH_SESSION_KEY] = user.get_session_auth_hash()
        session.create()
        people.append({"username": user.username, "teams": own, "staff": user.is_staff, "session": session.session_key})
    tokens = {slug: token_create(name="ci-main", team=team)[1] for slug, team in teams.items()}
    backlog = 0
    for index in range(params["backlog"]):  # the weekend's queue, submitted before anyone looks
        slug = TEAMS[index % len(TEAMS)]
        workers, gpu = rng.choice(SHAPES)
        spec = parse_spec(job_spec(slug, f"weekend-{index:03d}", workers, gpu, rng.randint(20, 60)), team=slug)
        backlog += job_submit(team=teams[slug], spec=spec, owner=users[index % len(users)], via="form")[1]
    print("SEED " + json.dumps({"people": people, "tokens": tokens, "backlog": backlog}))


def account() -> None:
    """Once the loop has stopped: one reconcile, then the jobs, cycles and the loop's invariants as one
    line "ACCOUNT <json>". The submissions to look up and the run's start come in $BUSY_MONDAY."""
    from datetime import datetime, timezone as tz

    from django.db.models import Count

    from jobs.models import Job
    from scheduling.cluster import get_cluster
    from scheduling.invariants import check
    from scheduling.models import Cycle
    from scheduling.reconcile import reconcile

    params = json.loads(os.environ[PARAMS])
    started = datetime.fromtimestamp(params["started"], tz.utc)
    cluster = get_cluster()
    reconciled = reconcile(cluster=cluster).summary
    problems = check(cluster, settled=True)
    jobs = list(Job.objects.values("pk", "name", "state", "submitted_via", "admitted_at", "finished_at", "reason"))
    by_name = defaultdict(list)
    for job in jobs:
        by_name[job["name"]].append(job)
    cycles = list(Cycle.objects.filter(started_at__gte=started).order_by("started_at")
                  .values("duration", "failed", "error", "admitted", "preempted", "rejected", "waiting"))  # fmt: skip
    out = {
        "reconcile": reconciled, "problems": problems,
        "jobs": [{**job, "admitted_at": bool(job["admitted_at"]), "finished_at": bool(job["finished_at"])}
                 for job in jobs],
        "duplicates": {name: [j["pk"] for j in same] for name, same in by_name.items() if len(same) > 1},
        "cycles": cycles,
        "states": dict(Job.objects.values_list("state").annotate(n=Count("pk")).order_by()),
        "waiting_because": dict(Job.objects.filter(state=Job.State.QUEUED).values_list("reason_code")
                                .annotate(n=Count("pk")).order_by()),
        "gpus_held": sum(Job.objects.filter(state__in=Job.ACTIVE_STATES).values_list("gpu_total", flat=True)),
    }  # fmt: skip
    print("ACCOUNT " + json.dumps(out, default=str))


# --- A browser, and the people behind it ----------------------------------------------------------

# --- Running the product ---------------------------------------------------------------------------

def environment(port: int, var: Path) -> dict:
    """The production settings as the ConfigMap and Secret give them, on the scratch database."""
    return {
        **os.environ, "DJANGO_SETTINGS_MODULE": "portal.settings", "DJANGO_DEBUG": "0",
        "SECRET_KEY": "busy-monday-bench-secret-key-not-for-production-use", "METRICS_TOKEN": METRICS_TOKEN,
        "DATABASE_URL": f"{PG}/{DB}", "CELERY_BROKER_URL": REDIS, "ALLOWED_HOSTS": "127.0.0.1",
        "TRUST_X_FORWARDED_PROTO": "1", "LOG_FORMAT": "json", "LOG_LEVEL": "INFO", "GANGWAY_VAR_DIR": str(var),
        "CLUSTER_BACKEND": "simulated", "SIM_DEFAULT_DURATION": "45", "SIM_FAILURE_RATE": "0.05",
        "NOTIFY_BATCH_SECONDS": "10",
        "EMAIL_BACKEND": "django.core.mail.backends.locmem.EmailBackend", "PORT": str(port),
        "PYTHONUNBUFFERED": "1",
    }  # fmt: skip


def manage(env: dict, *args: str, prefix: str = "") -> str:
    """Runs a manage.py command; returns its stdout, or the JSON after `prefix` on the line that has it."""
    done = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"manage.py {args[0]} failed:\n{done.stderr[-3000:]}")
    if not prefix:
        return done.stdout
    return next(line[len(prefix):] for line in done.stdout.splitlines() if line.startswith(prefix))


def psql(sql: str, database: str = "postgres") -> str:
    return subprocess.run(["psql", f"{PG}/{database}", "-qAt", "-c", sql], check=True, capture_output=True,
                          text=True).stdout.strip()  # fmt: skip


class Processes:
    """The product's processes, each logging to its own file; all stopped by stop(), whatever happened."""

    def __init__(self, env: dict, logs: Path):
        self.env, self.logs, self.running = env, logs, {}

    def start(self, name: str, *command: str) -> None:
        log = open(self.logs / f"{name}.log", "w")
        self.running[name] = subprocess.Popen(command, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                              start_new_session=True)  # fmt: skip

    def stop(self, *names: str, timeout: float = 30) -> None:
        """SIGTERM (gunicorn's and Celery's warm shutdown: a running task finishes), SIGKILL after `timeout`."""
        for name in names or list(self.running):
            process = self.running.pop(name, None)
            if process is None or process.poll() is not None:
                continue
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def start_product(processes: Processes, web_workers: int) -> None:
    """Web, worker, notifier and beat as deploy/entrypoint.sh starts them."""
    bin_dir = Path(sys.executable).parent
    processes.start("web", str(bin_dir / "gunicorn"), "--config", "deploy/gunicorn.conf.py", "-w", str(web_workers),
                    "-b", f"127.0.0.1:{processes.env['PORT']}", "portal.wsgi:application")  # fmt: skip
    celery = [str(bin_dir / "celery"), "-A", "portal"]
    processes.start("worker", *celery, "worker", "--loglevel=INFO", "--concurrency=2", "--without-mingle",
                    "--without-gossip", "--queues=celery", "--hostname=worker@%h")  # fmt: skip
    processes.start("notifier", *celery, "worker", "--loglevel=INFO", "--concurrency=2", "--without-mingle",
                    "--without-gossip", "--queues=notifications", "--hostname=notifier@%h")  # fmt: skip
    processes.start("beat", *celery, "beat", "--loglevel=INFO")


def wait_ready(port: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            connection.request("GET", "/healthz")
            if connection.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.3)
    raise SystemExit(f"gunicorn did not answer on port {port} within {timeout:.0f} s")


class Watch(threading.Thread):
    """Beside the run: the database's connections every half second, the kubelet's readiness probe every
    10 s and a Prometheus scrape every 15 s."""

    def __init__(self, port: int, stats: Stats):
        super().__init__(daemon=True)
        self.port, self.stats, self.stop = port, stats, threading.Event()
        self.peak, self.peak_states, self.samples = 0, {}, []
        self.cpu: dict[tuple[str, int], float] = {}  # (process kind, pid) -> its CPU seconds when last seen
        self.cpu_at_start: dict[tuple[str, int], float] = {}

    def run(self) -> None:
        import psycopg

        browser = Browser(self.port, self.stats)
        probe = scrape = time.monotonic()
        with psycopg.connect(f"{PG}/postgres", autocommit=True) as conn:
            while not self.stop.wait(0.5):
                rows = conn.execute("SELECT state, count(*) FROM pg_stat_activity WHERE datname = %s "
                                    "GROUP BY state", (DB,)).fetchall()  # fmt: skip
                total = sum(n for _, n in rows)
                self.samples.append(total)
                if total > self.peak:
                    self.peak, self.peak_states = total, {str(state): n for state, n in rows}
                if len(self.samples) % 4 == 1:
                    self.cpu.update(cpu_by_process())
                if time.monotonic() >= probe:
                    probe += 10
                    browser.request("readyz probe", "GET", "/readyz?exclude=cluster&exclude=cycles")
                if time.monotonic() >= scrape:
                    scrape += 15
                    browser.request("metrics scrape", "GET", "/metrics",
                                    headers={"Authorization": f"Bearer {METRICS_TOKEN}"})  # fmt: skip


def cpu_by_process() -> dict[tuple[str, int], float]:
    """CPU seconds (user + system) of each live process of the run, by (kind, pid); empty without /proc."""
    kinds = ((b"gunicorn", "web"), (b"--queues=celery", "worker"), (b"--queues=notifications", "notifier"),
             (b" beat ", "beat"), (f" {DB} ".encode(), "PostgreSQL"), (b"bench.busy_monday", "clients"))
    found = {}
    for pid in (p for p in os.listdir("/proc") if p.isdigit()) if os.path.isdir("/proc") else ():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as file:
                cmdline = file.read().replace(b"\0", b" ") + b" "
            kind = next((name for mark, name in kinds if mark in cmdline), None)
            if kind is None or (kind == "PostgreSQL" and not cmdline.startswith(b"postgres: ")):
                continue
            with open(f"/proc/{pid}/stat") as file:
                fields = file.read().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        found[(kind, int(pid))] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return found


def katib_burst(env: dict, after: float, stop: threading.Event, out: list) -> None:
    """A third of the way in: a Katib experiment of 16 trials and a kubectl job in research's namespace."""
    if stop.wait(after):
        return
    started = time.monotonic()
    said = manage(env, "simulate_outside", "--team", "research", "--experiment", "monday-sweep", "--trials", "16",
                  "--trial-gpus", "2", "--kubectl", "monday-bert", "--user", "user-003")  # fmt: skip
    out.append(f"{said.strip()} ({time.monotonic() - started:.1f} s)")


# --- The report ------------------------------------------------------------------------------------

def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] if ordered else float("nan")


def print_requests(statuses: dict, latencies: dict, seconds: float, settled: float) -> list[str]:
    """The table of requests per kind; returns the findings (5xx, no answer). The last latency column
    leaves out the morning rush: requests sent before `settled` (everyone arrived and loaded a page)."""
    findings = []
    total = sum(sum(c.values()) for c in statuses.values())
    print(f"\nRequests: {total:,} in {seconds:.0f} s ({total / seconds:.1f}/s)")
    print(f"{'kind':<28}{'count':>7}  {'p50 ms':>7}{'p95 ms':>8}{'p99 ms':>8}{'p95 later':>10}  statuses")
    for kind in sorted(statuses, key=lambda k: -sum(statuses[k].values())):
        counts, ms = statuses[kind], [s * 1000 for _, s in latencies[kind]]
        later = pct([s * 1000 for at, s in latencies[kind] if at >= settled], .95)
        said = ", ".join(f"{status}: {n}" for status, n in sorted(counts.items(), key=lambda i: str(i[0])))
        print(f"{kind:<28}{sum(counts.values()):>7}  {pct(ms, .5):>7.1f}{pct(ms, .95):>8.1f}{pct(ms, .99):>8.1f}"
              f"{later:>10.1f}  {said}")  # fmt: skip
        bad = {status: n for status, n in counts.items() if not isinstance(status, int) or status >= 500}
        if bad:
            findings.append(f"{kind}: {bad}")
    not_modified = sum(c.get(304, 0) for c in statuses.values())
    polls = sum(sum(c.values()) for k, c in statuses.items() if k.startswith("poll "))
    print(f"304 Not Modified: {not_modified:,} of {polls:,} polls ({100 * not_modified / max(polls, 1):.0f}%)")
    return findings


def print_jobs(account: dict, records: list, backlog: int) -> list[str]:
    """Every submission accounted for; returns the findings."""
    findings = []
    jobs = {job["pk"]: job for job in account["jobs"]}
    by_name = defaultdict(list)
    for job in account["jobs"]:
        by_name[job["name"]].append(job)
    submissions = [r for r in records if r.get("via") in ("form", "api")]
    accepted = lost = refused = 0
    for record in submissions:
        found = by_name.get(record["name"], [])
        if record.get("id"):
            accepted += 1
            if record["id"] not in jobs:
                lost += 1
                findings.append(f"{record['via']} job {record['name']} (#{record['id']}) was accepted but is not "
                                "in the database")  # fmt: skip
        elif found:
            findings.append(f"{record['via']} job {record['name']} answered {record.get('status')} but was made: "
                            f"#{found[0]['pk']}")  # fmt: skip
        else:
            refused += 1
        if len(found) > 1:
            findings.append(f"{record['name']} made {len(found)} jobs: {[j['pk'] for j in found]}")
        if record.get("retry_id") and record.get("id") and record["retry_id"] != record["id"]:
            findings.append(f"retried {record['name']}: first #{record['id']}, then #{record['retry_id']}")
        if record.get("double") and record.get("id") and record["double"] != record["id"]:
            findings.append(f"double click on {record['name']}: #{record['id']} and #{record['double']}")
    made = [j for j in account["jobs"] if not j["name"].startswith("weekend-")]
    adopted = [j for j in made if not j["name"].startswith(("m-", "ci-"))]
    states = Counter(job["state"] for job in account["jobs"])
    admitted = sum(job["admitted_at"] for job in account["jobs"])
    finished = sum(job["state"] in TERMINAL for job in account["jobs"])
    retries = [r for r in submissions if "retry" in r]
    doubles = [r for r in submissions if "double" in r]
    print(f"\nJobs: {backlog} from the weekend's backlog, {len(submissions)} submissions during the run "
          f"({sum(r['via'] == 'form' for r in submissions)} through the form, {sum(r['via'] == 'api' for r in submissions)} "
          f"through the API), {accepted} accepted, {refused} refused with a 4xx; {len(adopted)} adopted from the "
          f"cluster (Katib trials, kubectl)")  # fmt: skip
    print(f"  API retries with the same Idempotency-Key: {len(retries)} (answers "
          f"{dict(Counter(r['retry'] for r in retries))}); form double clicks: {len(doubles)}; invalid form posts "
          f"fixed: {sum('invalid_first' in r for r in submissions)}")  # fmt: skip
    cancels = Counter((r["via"], r["status"]) for r in records if r.get("via", "").endswith("cancel"))
    print(f"  cancels: {dict(cancels)}")
    print(f"  in the database: {len(jobs)} jobs, admitted at some point {admitted}, ended {finished}; by state "
          f"{dict(sorted(states.items()))}")  # fmt: skip
    print(f"  lost (accepted, not in the database): {lost}; duplicates by name: {len(account['duplicates'])}")
    if account["duplicates"]:
        findings.append(f"duplicate jobs: {account['duplicates']}")
    print(f"  waiting at the end, by reason: {account['waiting_because']}; GPUs held by admitted and running jobs: "
          f"{account['gpus_held']} of {(L4_NODES + A100_NODES) * GPUS_PER_NODE}")
    print(f"  after the final reconcile: {account['reconcile']}")
    print(f"  the loop's invariants: {'all hold' if not account['problems'] else account['problems']}")
    findings += [f"invariant: {problem}" for problem in account["problems"]]
    return findings


def print_cycles(cycles: list) -> list[str]:
    durations = [c["duration"] * 1000 for c in cycles if not c["failed"]]
    failed = [c for c in cycles if c["failed"]]
    print(f"\nAdmission cycles: {len(cycles)} run, {len(failed)} failed; duration p50 {pct(durations, .5):.0f} ms, "
          f"p95 {pct(durations, .95):.0f} ms, max {max(durations, default=0):.0f} ms; admitted "
          f"{sum(c['admitted'] for c in cycles)}, preempted {sum(c['preempted'] for c in cycles)}, rejected "
          f"{sum(c['rejected'] for c in cycles)}; waiting at the last {cycles[-1]['waiting'] if cycles else 0}")  # fmt: skip
    return [f"failed cycle: {c['error'][:300]}" for c in failed]


def print_logs(logs: Path) -> list[str]:
    """Errors and warnings in each process's log; returns the errors, each distinct message once."""
    findings = []
    print("\nLogs:")
    for path in sorted(logs.glob("*.log")):
        levels, distinct = Counter(), Counter()
        for line in path.read_text(errors="replace").splitlines():
            try:
                entry = json.loads(line)
                level, message = entry.get("level", ""), entry.get("message", "")
                if entry.get("exception"):
                    message += " | " + entry["exception"].strip().splitlines()[-1]
            except ValueError:
                level = next((w for w in ("CRITICAL", "ERROR", "WARNING") if w in line), "")
                level = level or ("ERROR" if line.startswith("Traceback") else "")
                message = line
            if level in ("WARNING", "ERROR", "CRITICAL"):
                levels[level] += 1
                if level != "WARNING":
                    distinct[re.sub(r"\d+", "N", message)[:240]] += 1
        print(f"  {path.stem}: {dict(levels) or 'no warnings or errors'}")
        for message, n in distinct.most_common(8):
            print(f"    {n} x {message}")
            findings.append(f"{path.stem} log: {message}")
    return findings


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])  # fmt: skip
    parser.add_argument("--seconds", type=float, default=120, help="How long the people act (default 120).")
    parser.add_argument("--users", type=int, default=100, help="People with a browser tab open (default 100).")
    parser.add_argument("--clients", type=int, default=4, help="Client processes the people are spread over (default 4).")
    parser.add_argument("--web-workers", type=int, default=2,
                        help="gunicorn workers (default 2, the image's WEB_CONCURRENCY).")
    parser.add_argument("--logins", type=int, default=10, help="People who log in through the form (default 10).")
    parser.add_argument("--form-share", type=float, default=0.3, help="Share of people who submit through the form.")
    parser.add_argument("--ci-every", type=float, default=12, help="Mean seconds between two CI submissions of a team.")
    parser.add_argument("--retry-share", type=float, default=0.2, help="Share of API submissions sent twice.")
    parser.add_argument("--cancel-share", type=float, default=0.15, help="Share of jobs their submitter cancels.")
    parser.add_argument("--backlog", type=int, default=24, help="Jobs queued before the run (default 24).")
    parser.add_argument("--drain", type=float, default=60, help="Seconds the loop may go on once the people stop.")
    parser.add_argument("--port", type=int, default=8791)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--keep-logs", metavar="DIR", help="Copy the processes' logs here (else they are deleted).")
    args = parser.parse_args()
    # Ctrl-C, and SIGTERM too, end the run through the cleanup below, even when started in the background
    # (where a shell starts it with SIGINT ignored).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _interrupted)
    var = Path(tempfile.mkdtemp(prefix="busy-monday-"))
    env = environment(args.port, var)
    processes = Processes(env, var)
    stop_side = threading.Event()
    load_before = os.getloadavg()
    try:
        psql(f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)')
        psql(f'CREATE DATABASE "{DB}"')
        subprocess.run(["redis-cli", "-n", str(REDIS_DB), "FLUSHDB"], check=True, capture_output=True)
        manage(env, "migrate", "--no-input")
        seeded = json.loads(manage({**env, PARAMS: json.dumps({"seed": args.seed, "users": args.users,
                                                                "backlog": args.backlog})},
                                   "shell", "-c", "from bench.busy_monday import seed; seed()", prefix="SEED "))  # fmt: skip
        start_product(processes, args.web_workers)
        wait_ready(args.port)
        time.sleep(3)  # beat's first cycle
        threads = os.environ.get("WEB_THREADS", "8")  # the image's default, read by deploy/gunicorn.conf.py
        print(f"gunicorn {args.web_workers} workers of {threads} threads, Celery worker and notifier (2 processes "
              "each) and beat; "
              f"{args.users} people over {args.clients} client processes and {len(TEAMS)} CI threads for "
              f"{args.seconds:.0f} s; {os.cpu_count()} CPUs, load average before "
              f"{', '.join(f'{x:.2f}' for x in load_before)}")  # fmt: skip
        rng = random.Random(args.seed)
        people = seeded["people"]
        for index, person in enumerate(people):
            person["login"] = index % max(1, len(people) // max(args.logins, 1)) == 0 and args.logins > 0
            person["submits"] = (1 + (rng.random() < 0.3)) if rng.random() < args.form_share else 0
        settings = {"cancel_share": args.cancel_share, "retry_share": args.retry_share, "ci_every": args.ci_every}
        side_stats = Stats()
        watch = Watch(args.port, side_stats)
        watch.start()
        katib: list[str] = []
        burst = threading.Thread(target=katib_burst, args=(env, args.seconds / 3, stop_side, katib), daemon=True)
        burst.start()
        cpu_start = cpu_by_process()
        started = time.time()
        until = started + args.seconds
        shards = [(args.port, people[i::args.clients], until, settings, args.seed * 1000 + i * 100)
                  for i in range(args.clients)]  # fmt: skip
        with multiprocessing.Pool(args.clients + 1, initializer=_client_signals) as pool:
            ci = pool.apply_async(ci_day, [(args.port, sorted(seeded["tokens"].items()), until, settings, args.seed)])
            results = pool.map(person_day, shards) + [ci.get()]
        elapsed = time.time() - started
        load_during = os.getloadavg()
        cpu = Counter()
        for (kind, pid), seconds in {**watch.cpu, **cpu_by_process()}.items():
            cpu[kind] += seconds - cpu_start.get((kind, pid), 0)
        drained = drain(env, args.drain)
        stop_side.set()
        watch.stop.set()
        watch.join(timeout=5)
        processes.stop("beat")
        processes.stop("worker", "notifier", timeout=60)
        account = json.loads(manage({**env, PARAMS: json.dumps({"started": started})}, "shell", "-c",
                                    "from bench.busy_monday import account; account()", prefix="ACCOUNT "))  # fmt: skip
        deadlocks = psql(f"SELECT deadlocks || ' deadlocks, ' || xact_rollback || ' rollbacks, ' || xact_commit "
                         f"|| ' commits' FROM pg_stat_database WHERE datname = '{DB}'")  # fmt: skip
        processes.stop()
        statuses, latencies, late, records, bodies, same = defaultdict(Counter), defaultdict(list), [], [], {}, Counter()
        for some_statuses, some_latencies, some_late, some_records in [*results, (side_stats.statuses,
                                                                               side_stats.latencies, [], [])]:  # fmt: skip
            for kind, counts in some_statuses.items():
                statuses[kind].update(counts)
                latencies[kind] += some_latencies[kind]
            late += some_late
            for record in some_records:
                if "bodies" in record:
                    bodies.update({k: v for k, v in record["bodies"].items() if v})
                    same.update(record["same"])
                else:
                    records.append(record)
        findings = print_requests(statuses, latencies, elapsed, started + SETTLED)
        print(f"(p95 later: requests sent after the first {SETTLED} s, when everyone has arrived)")
        print(f"Polls sent late (behind htmx's schedule, the client's own wait included): "
              f"p50 {pct(late, .5) * 1000:.0f} ms, "
              f"p95 {pct(late, .95) * 1000:.0f} ms, p99 {pct(late, .99) * 1000:.0f} ms")  # fmt: skip
        print("Polls answered 200 with the same HTML as the part's previous answer (its ETag moved, what it shows "
              "did not): " + (", ".join(f"{kind} {n} of {statuses[kind][200]}" for kind, n in sorted(same.items()))
                              or "none"))  # fmt: skip
        logins = [r for r in records if r.get("via") == "login"]
        print(f"Logins through the form: {sum(p['login'] for p in people)}, failed {len(logins)}")
        findings += [f"login of {r['user']} failed" for r in logins]
        for kind, some in bodies.items():
            print(f"  first answers of {kind}: {some}")
        findings += print_cycles(account["cycles"])
        print(f"Katib and kubectl: {katib[0] if katib else 'not run'}")
        findings += print_jobs(account, records, seeded["backlog"])
        print(f"  drained for {drained[0]:.0f} s after the people stopped; open then: {drained[1]}")
        print(f"\nDatabase: {watch.peak} connections at peak ({watch.peak_states}), median "
              f"{statistics.median(watch.samples) if watch.samples else 0:.0f}; {deadlocks}")  # fmt: skip
        if deadlocks and not deadlocks.startswith("0 deadlocks"):
            findings.append(f"database: {deadlocks}")
        served = sum(sum(c.values()) for c in statuses.values())
        print(f"CPU seconds during the drive ({elapsed:.0f} s, {os.cpu_count()} CPUs): "
              + ", ".join(f"{kind} {seconds:.1f}" for kind, seconds in cpu.most_common())
              + f"; gunicorn {cpu['web'] / max(served, 1) * 1000:.1f} ms and PostgreSQL "
              f"{cpu['PostgreSQL'] / max(served, 1) * 1000:.1f} ms per request (the loop's queries included)")  # fmt: skip
        findings += print_logs(var)
        print(f"\nLoad average: {', '.join(f'{x:.2f}' for x in load_before)} before, "
              f"{', '.join(f'{x:.2f}' for x in load_during)} at the end of the drive "
              f"({os.cpu_count()} CPUs)")  # fmt: skip
        print(f"\nFindings: {len(findings)}" + "".join(f"\n  - {finding}" for finding in findings))
        return 1 if findings else 0
    finally:
        stop_side.set()
        processes.stop(timeout=10)
        subprocess.run(["psql", f"{PG}/postgres", "-q", "-c", f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)'],
                       capture_output=True)  # fmt: skip
        subprocess.run(["redis-cli", "-n", str(REDIS_DB), "FLUSHDB"], capture_output=True)
        if args.keep_logs:
            shutil.copytree(var, args.keep_logs, dirs_exist_ok=True, ignore=shutil.ignore_patterns("celerybeat*"))
        shutil.rmtree(var, ignore_errors=True)


def _interrupted(signum, frame) -> None:
    raise KeyboardInterrupt


def _client_signals() -> None:
    """A client process leaves Ctrl-C to the parent, which stops the pool, and dies on the pool's SIGTERM."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def drain(env: dict, seconds: float) -> tuple[float, str]:
    """Lets the loop go on, people gone, until no job is open or `seconds` pass; returns (how long, open jobs)."""
    started = time.monotonic()
    query = ("SELECT coalesce(string_agg(state || ': ' || n, ', '), 'none') FROM (SELECT state, count(*) n "
             "FROM jobs_job WHERE state NOT IN ('succeeded', 'failed', 'cancelled', 'rejected') GROUP BY state) s")
    while True:
        still = psql(query, DB)
        if still == "none" or time.monotonic() - started >= seconds:
            return time.monotonic() - started, still
        time.sleep(2)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit("Interrupted: every process it started is stopped and the scratch database dropped.")
