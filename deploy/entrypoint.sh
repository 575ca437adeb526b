#!/bin/sh
# The container's entrypoint: runs one Gangway process, chosen by the first argument.
#   web        gunicorn serving the portal, the API, /healthz, /readyz and /metrics
#   worker     the Celery worker that runs admission cycles, reconciles and tenant syncs (queue celery)
#   notifier   the Celery worker that sends notifications, e-mails and webhooks (queue notifications)
#   beat       the Celery scheduler; run exactly one
#   migrate    apply database migrations, then exit (an init container or a one-off Job)
#   wait-for-schema  wait (SCHEMA_WAIT seconds at most) until the database has every migration this
#              code needs, then exit: the init container of worker, notifier and beat on Kubernetes
#   manage ... any manage.py command (doctor, sync_tenants, seed_demo, createsuperuser)
# Worker, notifier and beat first wait (SCHEMA_WAIT seconds at most, 600 by default) until the
# database has every migration they need: during an upgrade the migrate Job runs beside them. The
# web instead starts at once and answers /readyz 503 until then. On Kubernetes an init container
# has already waited (so the pod is not Ready meanwhile, and no liveness probe watches the wait):
# this second look then finds the schema complete at once.
# Each process runs Django's system checks first and stops on an error, such as a bad setting: the web
# in gunicorn's on_starting hook (deploy/gunicorn.conf.py), worker, notifier and beat in wait_for_schema,
# migrate as management commands do.
# Anything else is executed as given (e.g. a shell for debugging).
set -eu
cd "$(dirname "$0")/.."

command="${1:-web}"
[ "$#" -gt 0 ] && shift
case "$command" in
  worker|notifier|beat|wait-for-schema)
    python manage.py wait_for_schema --timeout "${SCHEMA_WAIT:-600}" ;;
esac
case "$command" in
  web)
    exec gunicorn --config deploy/gunicorn.conf.py portal.wsgi:application "$@" ;;
  # Each worker consumes one queue (CELERY_TASK_ROUTES in portal/settings.py): a notification
  # waiting on a server that never answers holds a notifier, never an admission cycle.
  worker)
    exec celery -A portal worker --loglevel="${LOG_LEVEL:-INFO}" --concurrency="${WORKER_CONCURRENCY:-2}" \
      --without-mingle --without-gossip --queues=celery "$@" ;;
  notifier)
    exec celery -A portal worker --loglevel="${LOG_LEVEL:-INFO}" --concurrency="${WORKER_CONCURRENCY:-2}" \
      --without-mingle --without-gossip --queues=notifications "$@" ;;
  beat)
    exec celery -A portal beat --loglevel="${LOG_LEVEL:-INFO}" "$@" ;;
  migrate)
    exec python manage.py migrate --noinput "$@" ;;
  wait-for-schema)
    exit 0 ;;
  manage)
    exec python manage.py "$@" ;;
  *)
    exec "$command" "$@" ;;
esac
