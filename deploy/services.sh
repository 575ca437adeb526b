#!/usr/bin/env bash
# Make sure PostgreSQL (127.0.0.1:5432) and Redis (127.0.0.1:6379) answer, starting
# them when they are installed but stopped. Under CI=true a missing service fails.
set -u

postgres_up() { pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; }
redis_up() { [ "$(redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null)" = "PONG" ]; }

if ! postgres_up && command -v pg_ctlcluster >/dev/null 2>&1; then
  echo "Starting PostgreSQL..."
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -1)" main start || true
fi
if ! redis_up && command -v redis-server >/dev/null 2>&1; then
  echo "Starting Redis..."
  mkdir -p /var/lib/redis /var/log/redis
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log || true
fi
for _ in $(seq 1 30); do
  postgres_up && redis_up && exit 0
  sleep 1
done
postgres_up || echo "PostgreSQL is not answering on 127.0.0.1:5432." >&2
redis_up || echo "Redis is not answering on 127.0.0.1:6379." >&2
exit 1
