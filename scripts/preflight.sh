#!/usr/bin/env bash
# preflight.sh checks that MariaDB/MySQL, Redis and NATS answer at the
# addresses the tests and services use (MYSQL_ADDR, REDIS_ADDR, NATS_URL, with
# the same defaults), and names each one that does not, with the command
# that starts it. `make test` and `make run` call it first, so a missing
# dependency is reported at once instead of as a hundred failed tests.
set -uo pipefail

# shellcheck source=depaddrs.sh
source "$(dirname "${BASH_SOURCE[0]}")/depaddrs.sh"

missing=0
check() { # name addr start-command
  if ! answers "$2"; then
    echo "preflight: $1 is not reachable at $2." >&2
    echo "  start it with: $3" >&2
    missing=1
  fi
}

check "MariaDB/MySQL" "$mysql_addr" "start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd"
check "Redis" "$redis_addr" 'redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no'
check "NATS (JetStream)" "$nats_addr" "start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server -- -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server"

if [ "$missing" -ne 0 ]; then
  echo "preflight: or run 'bash .ci/run', which starts whatever is missing and runs the tests;" >&2
  echo "  point MYSQL_ADDR, REDIS_ADDR or NATS_URL elsewhere to use other servers." >&2
  exit 1
fi
