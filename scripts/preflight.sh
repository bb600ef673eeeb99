#!/usr/bin/env bash
# preflight.sh checks that MariaDB/MySQL, Redis and NATS answer at the
# addresses the tests and services use (MYSQL_ADDR, REDIS_ADDR, NATS_URL, with
# the same defaults), and names each one that does not, with the command
# that starts it, with Docker (make infra) and without (Debian, macOS).
# `make test` and `make run` call it first, so a missing dependency is
# reported at once instead of as a hundred failed tests.
set -uo pipefail

# shellcheck source=depaddrs.sh
source "$(dirname "${BASH_SOURCE[0]}")/depaddrs.sh"

# shellcheck source=servers.sh
source "$(dirname "${BASH_SOURCE[0]}")/servers.sh"

missing=0
check() { # name addr debian-command macos-command
  if ! answers "$2"; then
    echo "preflight: $1 is not reachable at $2." >&2
    if [ "${RUN_INFRA:-local}" = docker ]; then
      echo "  make infra selected the containers: start them again with 'make infra'" >&2
      echo "  (or go back to local servers with 'make infra-down')." >&2
    else
      echo "  Docker, any system:  make infra   (MariaDB, Redis and NATS in containers, for make test, lab and run)" >&2
      echo "  Debian/Ubuntu:       $3" >&2
      echo "  macOS (Homebrew):    $4" >&2
    fi
    missing=1
  fi
}

check "MariaDB/MySQL" "$mysql_addr" "$start_mariadb_cmd" "$brew_mariadb_cmd"
check "Redis" "$redis_addr" "$start_redis_cmd" "$brew_redis_cmd"
check "NATS (JetStream)" "$nats_addr" "$start_nats_cmd" "$brew_nats_cmd"

if [ "$missing" -ne 0 ]; then
  echo "preflight: or run 'bash .ci/run' (Debian), which starts whatever is missing and runs the tests;" >&2
  echo "  point MYSQL_ADDR, REDIS_ADDR or NATS_URL elsewhere to use other servers." >&2
  exit 1
fi
