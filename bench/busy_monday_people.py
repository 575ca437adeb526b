"""The people of a busy Monday (bench/busy_monday.py): browser tabs polling the pages as htmx does,
people submitting through the form, and each team's CI through the API; run in client processes,
each recording the status and latency of every request it makes."""

from __future__ import annotations

import html
import http.client
import json
import random
import re
import threading
import time
import urllib.parse
import uuid
from collections import Counter, defaultdict

PASSWORD = "monday-morning"
SHAPES = [(1, 1), (1, 2), (2, 1), (2, 2), (1, 4), (2, 4), (4, 2), (1, 8), (4, 1)]  # (workers, GPUs each)
IMAGE = "pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime"
TERMINAL = {"succeeded", "failed", "cancelled", "rejected"}
DASHBOARD_PARTS = ("tiles", "teams", "nodes", "queue")
DASHBOARD_POLL, JOB_POLL, LOGS_POLL, MY_JOBS_POLL, CLI_POLL = 5, 3, 10, 10, 5  # seconds, as the pages and CLI say
SETTLED = 20  # seconds: people arrive over the first 5, each loading a whole page, then poll


def job_spec(team: str, name: str, workers: int, gpu: int, seconds: int, tier: str | None = None) -> dict:
    """A job spec as the API takes it, running `seconds` on the simulated cluster."""
    spec = {"team": team, "name": name, "image": IMAGE, "command": ["python", "/app/train.py"],
            "replicas": [{"role": "Worker", "count": workers, "gpu": gpu, "cpu": "2", "memory": "8Gi"}],
            "simulate": {"duration": seconds, "fail": False}}  # fmt: skip
    if tier:
        spec["tier"] = tier
    return spec


class Stats:
    """Requests per kind: status codes, latencies, and how late the polls were sent."""

    def __init__(self):
        self.lock = threading.Lock()
        self.statuses: dict[str, Counter] = defaultdict(Counter)
        self.latencies: dict[str, list[tuple[float, float]]] = defaultdict(list)  # (sent at, seconds), wall clock
        self.late: list[float] = []
        self.bodies: dict[str, list[str]] = defaultdict(list)  # the first few 5xx answers, for the report
        self.same: Counter = Counter()  # polls answered 200 with the HTML of the part's previous answer

    def extras(self) -> dict:
        """The first 5xx answers and the polls that showed the same HTML again, for the report."""
        return {"bodies": dict(self.bodies), "same": dict(self.same)}

    def add(self, kind: str, status, seconds: float, body: str = "") -> None:
        with self.lock:
            self.statuses[kind][status] += 1
            self.latencies[kind].append((time.time() - seconds, seconds))
            if (not isinstance(status, int) or status >= 500) and len(self.bodies[kind]) < 3:
                self.bodies[kind].append(f"{status}: {body[:300]}")


class Browser:
    """One person's browser: cookies, the CSRF token of the last page, htmx's headers."""

    def __init__(self, port: int, stats: Stats, session: str | None = None):
        self.port, self.stats = port, stats
        self.cookies = {"sessionid": session} if session else {}
        self.csrf = ""
        self.origin = f"https://127.0.0.1:{port}"

    def request(self, kind: str, method: str, path: str, *, headers: dict | None = None, form: dict | None = None,
                body: bytes | None = None, htmx: bool = False) -> tuple[int, dict, str]:  # fmt: skip
        """Sends one request; returns (status, lower-cased headers, text); status 0 when none came back."""
        head = {"Host": f"127.0.0.1:{self.port}", "X-Forwarded-Proto": "https", "User-Agent": "busy-monday"}
        if self.cookies:
            head["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        if htmx:
            head.update({"HX-Request": "true", "HX-Current-URL": self.origin + path})
        if form is not None:
            body = urllib.parse.urlencode(form, doseq=True).encode()
            head["Content-Type"] = "application/x-www-form-urlencoded"
        if method == "POST":
            head.update({"Origin": self.origin, "Referer": self.origin + path})
            if self.csrf and htmx:
                head["X-CSRFToken"] = self.csrf
        head.update(headers or {})
        started = time.perf_counter()
        try:
            connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
            connection.request(method, path, body=body, headers=head)
            response = connection.getresponse()
            text = response.read().decode("utf-8", "replace")
            status = response.status
            answer = {k.lower(): v for k, v in response.getheaders()}
            for cookie in response.msg.get_all("Set-Cookie") or ():
                name, _, rest = cookie.partition("=")
                self.cookies[name.strip()] = rest.split(";", 1)[0]
            connection.close()
        except (OSError, http.client.HTTPException) as error:
            self.stats.add(kind, type(error).__name__, time.perf_counter() - started, str(error))
            return 0, {}, ""
        self.stats.add(kind, status, time.perf_counter() - started, text if status >= 500 else "")
        if token := re.search(r'"X-CSRFToken": "([^"]+)"', text):
            self.csrf = token.group(1)
        elif token := re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', text):
            self.csrf = token.group(1)
        return status, answer, text


def etags(text: str) -> dict[str, str]:
    """The data-etag of each polled part on a page, by the part's id."""
    found = {}
    for tag in re.finditer(r"<(?:section|div)\b[^>]*>", text):
        ident, etag = re.search(r'\bid="([^"]+)"', tag.group(0)), re.search(r'data-etag="([^"]*)"', tag.group(0))
        if ident and etag:
            found[ident.group(1)] = html.unescape(etag.group(1))
    return found


class Tab:
    """What a browser tab shows and polls: parts with their path, period, ETag and next poll."""

    def __init__(self, browser: Browser, rng: random.Random):
        self.browser, self.rng = browser, rng
        self.polls: dict[str, dict] = {}
        self.job: int | None = None
        self.ended_at: float | None = None

    def open(self, page: str, job: int | None = None) -> None:
        now = time.monotonic()
        self.polls, self.job, self.ended_at = {}, job, None
        if page == "dashboard":
            status, _, text = self.browser.request("dashboard page", "GET", "/")
            tags = etags(text)
            for part in DASHBOARD_PARTS:
                self.polls[part] = {"kind": f"poll {part}", "path": f"/?part={part}", "every": DASHBOARD_POLL,
                                    "etag": tags.get(f"live-{part}", ""), "due": now + DASHBOARD_POLL}  # fmt: skip
        elif page == "my jobs":
            status, _, text = self.browser.request("my jobs page", "GET", "/jobs/")
            self.polls["mine"] = {"kind": "poll my jobs", "path": "/jobs/?state=", "every": MY_JOBS_POLL,
                                  "etag": etags(text).get("my-jobs", ""), "due": now + MY_JOBS_POLL}  # fmt: skip
        else:
            status, _, text = self.browser.request("job page", "GET", f"/jobs/{job}/")
            etag = etags(text).get("job-live")
            if etag is not None:  # a job that has ended is not polled
                self.polls["job"] = {"kind": "poll job", "path": f"/jobs/{job}/", "every": JOB_POLL, "etag": etag,
                                     "due": now + JOB_POLL}  # fmt: skip
                self.polls["logs"] = {"kind": "poll logs", "path": f"/jobs/{job}/logs/", "every": LOGS_POLL,
                                      "etag": None, "due": now}  # fmt: skip
            else:
                self.ended_at = now

    def next_due(self) -> float:
        return min((poll["due"] for poll in self.polls.values()), default=float("inf"))

    def poll(self, late: list[float]) -> None:
        """Sends the poll that is due, as htmx would: If-None-Match with the part's ETag; 286 stops it."""
        name, poll = min(self.polls.items(), key=lambda item: item[1]["due"])
        late.append(max(0.0, time.monotonic() - poll["due"]))
        headers = {"If-None-Match": poll["etag"]} if poll["etag"] else {}
        status, answer, text = self.browser.request(poll["kind"], "GET", poll["path"], headers=headers, htmx=True)
        if status == 200 and answer.get("etag"):
            poll["etag"] = answer["etag"]
            shown = re.sub(r' data-(?:etag|server-now)="[^"]*"', "", text)  # what the part shows, its version aside
            if shown == poll.get("shown"):
                self.browser.stats.same[poll["kind"]] += 1
            poll["shown"] = shown
        if status == 286:
            del self.polls[name]
            if name == "job":
                self.ended_at = time.monotonic()
            return
        poll["due"] = time.monotonic() + poll["every"]  # htmx's `every` counts from the answer


def log_in(browser: Browser, username: str) -> bool:
    """Logs in through the login form, as a person does; returns whether it worked."""
    browser.cookies.pop("sessionid", None)
    browser.request("login page", "GET", "/login/")
    status, answer, _ = browser.request("login post", "POST", "/login/", form={
        "csrfmiddlewaretoken": browser.csrf, "username": username, "password": PASSWORD, "next": "/"})
    return status == 302 and "sessionid" in browser.cookies


def form_fields(text: str) -> dict:
    """The submit form's hidden inputs and the selected kind, as the page gives them."""
    form = text[text.find('id="job-form"'):]
    fields = {name: html.unescape(value) for name, value in
              re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', form)}  # fmt: skip
    fields.update({name: html.unescape(value) for value, name in
                   re.findall(r'<input type="hidden" value="([^"]*)" name="([^"]+)"', form)})  # fmt: skip
    kind = re.search(r'<select name="kind".*?</select>', form, re.S)
    chosen = kind and (re.search(r'<option value="([^"]+)"[^>]*selected', kind.group(0))
                       or re.search(r'<option value="([^"]+)"', kind.group(0)))  # fmt: skip
    fields["kind"] = chosen.group(1) if chosen else "TFJob"
    return fields


def submit_through_form(browser: Browser, person: dict, rng: random.Random, name: str, record: dict) -> int | None:
    """Opens the form, types (fit previews), maybe switches team, posts (a typo first now and then, a double
    click now and then); returns the job's id, or None when the form refused it."""
    status, _, text = browser.request("submit page", "GET", "/jobs/new/")
    if status != 200:
        return None
    fields = form_fields(text)
    team = rng.choice(person["teams"])
    if team != person["teams"][0]:  # the team select asks for the team's tiers and GPU types
        browser.request("submit team switch", "GET", f"/jobs/new/?team={team}&gpu_type=", htmx=True,
                        headers={"HX-Target": "tier-field", "HX-Trigger": "id_team"})  # fmt: skip
    workers, gpu = rng.choice(SHAPES)
    post = {**fields, "team": team, "name": name, "image": IMAGE, "runtime": "", "command": "python /app/train.py",
            "args": "--epochs 3", "tier": "", "max_runtime": "", "env": "DATASET=imagenet", "volumes": "", "shm": "",
            "gpu_type": "", "replicas-TOTAL_FORMS": "1", "replicas-INITIAL_FORMS": "0", "replicas-0-role": "Worker",
            "replicas-0-count": str(workers), "replicas-0-gpu": str(gpu), "replicas-0-cpu": "2",
            "replicas-0-memory": "8Gi"}  # fmt: skip
    post.pop("csrfmiddlewaretoken", None)
    for _ in range(rng.randint(1, 3)):  # the preview follows the typing, 400 ms after it pauses
        browser.request("fit preview", "POST", "/jobs/new/preview/", form=post, htmx=True,
                        headers={"HX-Target": "preview"})  # fmt: skip
    record.update(team=team, gpus=workers * gpu)
    if rng.random() < 0.1:  # a name with capitals: 422, the form comes back bound, the person fixes it
        status, _, _ = browser.request("submit post", "POST", "/jobs/new/", form={**post, "name": name.upper()},
                                       htmx=True, headers={"HX-Target": "job-form"})  # fmt: skip
        record["invalid_first"] = status
    status, answer, _ = browser.request("submit post", "POST", "/jobs/new/", form=post, htmx=True,
                                        headers={"HX-Target": "job-form"})  # fmt: skip
    record["status"] = status
    if rng.random() < 0.1:  # a double click: the same form again makes no second job
        again, answer_again, _ = browser.request("submit post (double click)", "POST", "/jobs/new/", form=post,
                                                 htmx=True, headers={"HX-Target": "job-form"})  # fmt: skip
        record["double"] = _job_id(answer_again.get("hx-redirect", ""))
    return _job_id(answer.get("hx-redirect", "")) if status == 200 else None


def _job_id(location: str) -> int | None:
    found = re.search(r"/jobs/(\d+)/", location or "")
    return int(found.group(1)) if found else None


def person_day(args) -> tuple[dict, dict, list, list]:
    """One client process: the people given, each in a thread, until the deadline; returns
    (statuses, latencies, how late polls went, submissions) for the report."""
    port, people, until, settings, seed = args
    stats, records = Stats(), []
    threads = [threading.Thread(target=_person, args=(port, person, until, settings, random.Random(seed + i),
                                                      stats, records), daemon=True)
               for i, person in enumerate(people)]  # fmt: skip
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=max(1.0, until - time.time() + 60))
    return dict(stats.statuses), dict(stats.latencies), stats.late, [*records, stats.extras()]


def _person(port, person, until, settings, rng, stats, records) -> None:
    time.sleep(rng.uniform(0, 5))  # people open their laptops over a few seconds
    browser = Browser(port, stats, None if person["login"] else person["session"])
    if person["login"] and not log_in(browser, person["username"]):
        records.append({"via": "login", "user": person["username"], "failed": True})
        return
    tab = Tab(browser, rng)
    tab.open(rng.choices(["dashboard", "my jobs"], weights=[4, 1])[0])
    span = until - time.time()
    submits = sorted(time.monotonic() + rng.uniform(5, span * 0.8)
                     for _ in range(person["submits"]))  # fmt: skip
    wander = time.monotonic() + rng.uniform(30, 90)
    cancel_at = None
    end = time.monotonic() + (until - time.time())
    while time.monotonic() < end:
        now = time.monotonic()
        leave = tab.ended_at + rng.uniform(3, 8) if tab.ended_at else float("inf")
        due = min(tab.next_due(), submits[0] if submits else float("inf"), wander, leave,
                  cancel_at or float("inf"), end)  # fmt: skip
        if due > now:
            time.sleep(min(due - now, end - now))
            continue
        if submits and submits[0] <= now:
            submits.pop(0)
            name = f"m-{person['username']}-{uuid.uuid4().hex[:8]}"
            record = {"via": "form", "name": name, "user": person["username"]}
            records.append(record)
            job = submit_through_form(browser, person, rng, name, record)
            record["id"] = job
            tab.open("job", job) if job else tab.open("dashboard")
            cancel_at = now + rng.uniform(5, 25) if job and rng.random() < settings["cancel_share"] else None
        elif cancel_at is not None and cancel_at <= now:
            cancel_at = None
            if tab.job and "job" in tab.polls:  # still running or waiting: the page shows the button
                status, answer, _ = browser.request("cancel post", "POST", f"/jobs/{tab.job}/cancel/", htmx=True,
                                                    headers={"HX-Target": "job-live"})  # fmt: skip
                records.append({"via": "form cancel", "id": tab.job, "status": status})
                tab.open("job", tab.job)  # htmx follows HX-Redirect to the job's page
        elif leave <= now or wander <= now:
            wander = now + rng.uniform(30, 90)
            tab.open(rng.choices(["dashboard", "my jobs"], weights=[4, 1])[0])
        else:
            tab.poll(stats.late)


def ci_day(args) -> tuple[dict, dict, list, list]:
    """The teams' CI, one thread per team token: submit with an Idempotency-Key (some answers lost and the
    request sent again), follow each job every 5 s as `gangway submit --wait` does, cancel some."""
    port, teams, until, settings, seed = args
    stats, records = Stats(), []
    threads = [threading.Thread(target=_ci, args=(port, slug, token, until, settings, random.Random(seed + i),
                                                  stats, records), daemon=True)
               for i, (slug, token) in enumerate(teams)]  # fmt: skip
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=max(1.0, until - time.time() + 60))
    return dict(stats.statuses), dict(stats.latencies), stats.late, [*records, stats.extras()]


def _ci(port, slug, token, until, settings, rng, stats, records) -> None:
    browser = Browser(port, stats)
    auth = {"Authorization": f"Bearer {token}", "Content-Type": "application/json", "Accept": "application/json"}
    following: dict[int, float] = {}
    cancels: dict[int, float] = {}
    end = time.monotonic() + (until - time.time())
    submit_at = time.monotonic() + rng.uniform(1, settings["ci_every"])
    while time.monotonic() < end:
        now = time.monotonic()
        due = min([submit_at, end, *following.values(), *cancels.values()])
        if due > now:
            time.sleep(due - now)
            continue
        if submit_at <= now:
            submit_at = now + rng.expovariate(1 / settings["ci_every"])
            workers, gpu = rng.choice(SHAPES)
            name = f"ci-{slug}-{uuid.uuid4().hex[:8]}"
            tier = "experiment" if rng.random() < 0.2 else None
            body = json.dumps(job_spec(slug, name, workers, gpu, rng.randint(15, 60), tier)).encode()
            key = uuid.uuid4().hex
            record = {"via": "api", "name": name, "team": slug, "gpus": workers * gpu}
            records.append(record)
            status, _, text = browser.request("api submit", "POST", "/api/v1/jobs/", body=body,
                                              headers={**auth, "Idempotency-Key": key})  # fmt: skip
            record["status"] = status
            job = json.loads(text).get("id") if status in (200, 201) else None
            if rng.random() < settings["retry_share"]:  # the answer was lost on the way: CI sends it again
                again, _, text = browser.request("api submit (retried)", "POST", "/api/v1/jobs/", body=body,
                                                 headers={**auth, "Idempotency-Key": key})  # fmt: skip
                record["retry"] = again
                record["retry_id"] = json.loads(text).get("id") if again in (200, 201) else None
                job = job or record["retry_id"]
            record["id"] = job
            if job:
                following[job] = now + CLI_POLL
                if rng.random() < settings["cancel_share"]:
                    cancels[job] = now + rng.uniform(3, 20)
            continue
        job = next((j for j, at in cancels.items() if at <= now), None)
        if job is not None:
            del cancels[job]
            status, _, _ = browser.request("api cancel", "POST", f"/api/v1/jobs/{job}/cancel/", headers=auth)
            records.append({"via": "api cancel", "id": job, "status": status})
            continue
        job = min(following, key=following.get)
        status, _, text = browser.request("api get job", "GET", f"/api/v1/jobs/{job}/", headers=auth)
        if status == 200 and json.loads(text).get("state") in TERMINAL:
            del following[job]
        else:
            following[job] = time.monotonic() + CLI_POLL
