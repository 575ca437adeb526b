"""The pages `make demo` shows answer on the demo's own database, SQLite, as each demo user.

The rest of the suite runs on PostgreSQL, which accepts SQL that SQLite refuses (a LIMIT inside a
UNION's parts, for one); this reads the pages a newcomer opens first, in a process set up as
deploy/demo.sh sets it up, in a scratch folder.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

READ_PAGES = """
import json
import django
from django.core.management import call_command

django.setup()
call_command("migrate", interactive=False, verbosity=0)
call_command("seed_demo", verbosity=0)

from django.contrib.auth.models import User
from django.test import Client

from jobs.selectors import jobs_for
from notifications.models import Delivery
from notifications.selectors import recent_deliveries

# The lead of perception reads what was sent to them and to their team's webhook, never another's.
people = {name: User.objects.get(username=name) for name in ("lead", "engineer")}
job = jobs_for(people["lead"]).filter(team__slug="perception").first()
event = job.events.first()
for target, user in (("lead@example.com", people["lead"]), ("https://hooks.example.com/p", None),
                     ("engineer@example.com", people["engineer"])):
    Delivery.objects.create(event=event, job=job, target=target, user=user, state=Delivery.State.SENT,
                            channel=Delivery.Channel.WEBHOOK if user is None else Delivery.Channel.EMAIL)
shown = sorted(delivery.target for delivery in recent_deliveries(people["lead"]))

answers = {}
for username in ("admin", "lead", "engineer"):
    user = User.objects.get(username=username)
    job = jobs_for(user).order_by("pk").first()
    pages = ["/", "/jobs/", "/teams/", "/teams/perception/", f"/jobs/{job.pk}/", f"/jobs/{job.pk}/logs/",
             "/jobs/new/", "/notifications/", "/tokens/",
             "/api/v1/jobs/", "/api/v1/jobs/?state=queued,running", "/api/v1/queue/"]  # the API, as a script reads it
    client = Client(raise_request_exception=False)  # a failing page is a 500 in the table, not the end
    client.force_login(user)
    answers[username] = {page: client.get(page).status_code for page in pages}
print(json.dumps({"pages": answers, "shown": shown}))
"""


def test_every_demo_user_reads_the_demos_pages_and_latest_deliveries_on_sqlite(tmp_path):
    keep = {key: value for key, value in os.environ.items() if not key.startswith(("DATABASE_", "CELERY_", "DJANGO_"))}
    env = {**keep, "DJANGO_SETTINGS_MODULE": "portal.settings", "DJANGO_DEBUG": "1", "CLUSTER_BACKEND": "simulated",
           "GANGWAY_VAR_DIR": str(tmp_path), "ALLOWED_HOSTS": "testserver"}  # fmt: skip
    run = subprocess.run([sys.executable, "-c", READ_PAGES], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=180)  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    read = json.loads(run.stdout.strip().splitlines()[-1])
    assert read["shown"] == ["https://hooks.example.com/p", "lead@example.com"]
    failed = {user: {page: status for page, status in pages.items() if status != 200}
              for user, pages in read["pages"].items()}
    assert failed == {"admin": {}, "lead": {}, "engineer": {}}, run.stderr[-3000:]
