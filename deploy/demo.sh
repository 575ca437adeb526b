#!/usr/bin/env bash
# The self-contained demo: SQLite, the simulated cluster and the embedded
# (file-system) broker; web server, Celery worker and beat. Ctrl-C stops them all.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
PORT="${PORT:-8000}"
export DJANGO_DEBUG=1 CLUSTER_BACKEND=simulated
# Debug for a machine of its own (no secret key to make, plain HTTP), but the product's own 400, 404 and 500
# pages, not Django's debug pages; a traceback goes to web.log. Static files come from the web process as
# without debug (WhiteNoise, portal/settings.py), not from runserver's handler (--nostatic), whose answer to a
# missing file is Django's debug page.
export DEBUG_ERROR_PAGES="${DEBUG_ERROR_PAGES:-0}"
export DEMO_PASSWORD="${DEMO_PASSWORD:-demo}"
# A job starves after 90 s here, not half an hour, so the seeded gang's reservation (R4) shows
# within the first minutes.
export STARVATION_AFTER="${STARVATION_AFTER:-90}"
# Once the seeded story has played out, people go on submitting: a job every 40 s or so while
# fewer than four wait, and a Katib sweep once in a while (scheduling/demo_traffic.py).
export DEMO_TRAFFIC="${DEMO_TRAFFIC:-40}"
# The demo's people hear of their own jobs by e-mail at example.com: written to worker.log, never sent
# (whatever EMAIL_BACKEND the shell has).
export EMAIL_BACKEND=django.core.mail.backends.console.EmailBackend
# Links in those e-mails lead back to the demo's pages.
export PUBLIC_URL="${PUBLIC_URL:-http://127.0.0.1:${PORT}}"
export GANGWAY_VAR_DIR="${GANGWAY_VAR_DIR:-$PWD/var}"
LOGS="$GANGWAY_VAR_DIR"
mkdir -p "$LOGS"

$PY manage.py migrate --noinput -v 0
$PY manage.py seed_demo
$PY manage.py seed_demo_notifications

pids=()
stopping=
stop() {
  stopping=1
  trap - INT TERM EXIT
  echo; echo "Stopping the demo..."
  kill "${pids[@]}" 2>/dev/null || true
  wait 2>/dev/null || true
}
trap stop INT TERM EXIT

# One worker for both queues here (production runs one per queue: deploy/entrypoint.sh).
.venv/bin/celery -A portal worker --pool=solo --queues=celery,notifications --loglevel=WARNING \
  >"$LOGS/worker.log" 2>&1 & pids+=($!)
.venv/bin/celery -A portal beat --loglevel=WARNING >"$LOGS/beat.log" 2>&1 & pids+=($!)
$PY manage.py runserver --noreload --nostatic "127.0.0.1:${PORT}" >"$LOGS/web.log" 2>&1 & pids+=($!)

cat <<MSG

  Gangway is running at http://127.0.0.1:${PORT}/
  Log in as admin (staff; finance), lead (lead of perception) or engineer (maps, research);
  the password is '${DEMO_PASSWORD}'.
  The simulated cluster has two GPU types: 4 nodes of 8 l4 GPUs and 2 nodes of 8 a100 GPUs.
  admin, lead and engineer hear of their own jobs by e-mail: the mail is written to worker.log, and
  their Notifications page lists it under "Sent lately".
  Logs: $LOGS/web.log, worker.log, beat.log. Press Ctrl-C to stop.

MSG
status=0
wait -n "${pids[@]}" || status=$?
# Only a failure is news. Ctrl-C reaches Celery's worker and beat as well, and they exit with
# status 0; one can do so before this script hears it, or this script never hears it (a shell
# started in the background ignores Ctrl-C). A process that stops by itself exits non-zero.
if [[ -z $stopping && $status -ne 0 ]]; then
  echo "A demo process stopped by itself (exit status $status); see the logs in $LOGS." >&2
fi
exit "$status"
