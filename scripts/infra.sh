#!/usr/bin/env bash
# infra.sh runs MariaDB, Redis and NATS in Docker (the mysql, redis and nats
# services of docker-compose.yml) and selects them for make test, make lab,
# make run and make bench, or goes back to the local servers.
#
#   scripts/infra.sh up     docker compose up -d --wait mysql redis nats, then
#                           write .infra.mk, which the Makefile includes
#   scripts/infra.sh down   remove .infra.mk, then docker compose down
#   scripts/infra.sh env    print what .infra.mk says for the environment
#                           of now (the ports and passwords compose will use)
#
# .infra.mk holds the addresses and the administrators' credentials (root,
# the Redis password, NATS's admin user) for the tests and tools, and tells
# scripts/run.sh that the containers are there (RUN_INFRA=docker): the
# services then log in as their own users, which the containers created.
# Its assignments are ?=, so a variable set in the environment or on make's
# command line still wins. Without the file nothing is set, and every tool
# uses the local servers' defaults.
set -euo pipefail
cd "$(dirname "$0")/.."

# mk_value escapes a value for the right-hand side of a make assignment.
mk_value() { printf '%s' "$1" | sed -e 's/\$/$$/g' -e 's/#/\\#/g'; }

infra_env() {
  local mysql_port=${MYSQL_PORT:-3306} redis_port=${REDIS_PORT:-6379} nats_port=${NATS_PORT:-4222}
  local names=() name value
  echo "# Written by make infra (scripts/infra.sh): make test, make lab, make run and"
  echo "# make bench use the containers of docker-compose.yml. make infra-down removes it."
  # The same defaults as docker-compose.yml; deploytest checks they agree.
  while IFS='=' read -r name value; do
    echo "$name ?= $(mk_value "$value")"
    names+=("$name")
  done <<VARS
MYSQL_ADDR=127.0.0.1:$mysql_port
MYSQL_USER=root
MYSQL_PASSWORD=${MYSQL_ROOT_PASSWORD:-dev-mysql-root-password}
REDIS_ADDR=127.0.0.1:$redis_port
REDIS_PASSWORD=${REDIS_PASSWORD:-dev-redis-password}
NATS_URL=nats://admin:${NATS_ADMIN_PASSWORD:-dev-nats-admin-password}@127.0.0.1:$nats_port
RUN_INFRA=docker
RUN_REDIS_ADDR=127.0.0.1:$redis_port
RUN_NATS_ADDR=127.0.0.1:$nats_port
VARS
  # The services' own passwords, when make infra was given other ones than
  # the defaults, so that make run logs in with what the containers have.
  for name in $(compgen -e | grep -E '^(MYSQL|NATS)_[A-Z0-9_]+_PASSWORD$' | grep -vE '^(MYSQL_ROOT|NATS_ADMIN)_PASSWORD$' || true); do
    echo "$name ?= $(mk_value "${!name}")"
    names+=("$name")
  done
  echo "export ${names[*]}"
}

case "${1:-}" in
  up)
    docker compose up -d --wait mysql redis nats
    infra_env >.infra.mk
    echo "infra: MariaDB, Redis and NATS are up in Docker; make test, lab, run and bench use them (make infra-down to stop)."
    ;;
  down)
    rm -f .infra.mk
    docker compose down
    echo "infra: back to the local servers."
    ;;
  env) infra_env ;;
  *) echo "usage: $0 up|down|env" >&2; exit 2 ;;
esac
