#!/usr/bin/env bash
# A throwaway PostgreSQL whose lock table holds a 10,000-job claim storm (the `cluster -- storm`
# bench; docs/PERFORMANCE.md): max_locks_per_transaction = 1024 instead of 64. The shared server's
# table (6,400 entries) is too small for 8 replicas × 10,000 session locks, see docs/guards.md.
#
#   benches/scripts/sized-postgres.sh start   # prints the URL for SLOTGUARD_TEST_DATABASE_URL
#   benches/scripts/sized-postgres.sh stop    # stops it and removes its directory
#
# Environment: SG_SIZED_DIR (default /tmp/sg-sized-postgres), SG_SIZED_PORT (default 55432).
# initdb and pg_ctl refuse to run as root: as root they run as the `postgres` user.
set -euo pipefail

dir="${SG_SIZED_DIR:-/tmp/sg-sized-postgres}"
port="${SG_SIZED_PORT:-55432}"
bin="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)"
[ -x "$bin/initdb" ] || { echo "initdb not found under /usr/lib/postgresql/*/bin" >&2; exit 1; }

as_owner() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

case "${1:-}" in
  start)
    if [ ! -d "$dir/data" ]; then
      mkdir -p "$dir"
      [ "$(id -u)" = 0 ] && chown postgres "$dir"
      as_owner "$bin/initdb" -D "$dir/data" -A trust -U postgres >/dev/null
      cat >> "$dir/data/postgresql.conf" <<CONF
max_locks_per_transaction = 1024
port = $port
listen_addresses = '127.0.0.1'
unix_socket_directories = '$dir'
CONF
    fi
    if ! as_owner "$bin/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
      as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w start >/dev/null
    fi
    psql -h 127.0.0.1 -p "$port" -U postgres -tAc "SELECT 1 FROM pg_database WHERE datname = 'test'" \
      | grep -q 1 || psql -h 127.0.0.1 -p "$port" -U postgres -qc "CREATE DATABASE test"
    echo "postgres://postgres@127.0.0.1:$port/test"
    ;;
  stop)
    [ -d "$dir/data" ] && as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null || true
    rm -rf "$dir"
    ;;
  *)
    echo "usage: $0 start|stop" >&2
    exit 2
    ;;
esac
