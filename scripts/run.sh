#!/usr/bin/env bash
# run.sh starts oncemall as local processes against the MariaDB/MySQL, Redis
# and NATS already running on this machine (no Docker), and stops them.
#
#   scripts/run.sh start   build bin/, start every program, wait until each is
#                          ready, print where it listens and logs; then stay in
#                          the foreground until Ctrl-C (or return at once with
#                          RUN_DETACH=1)
#   scripts/run.sh stop    stop the programs a detached start left running
#
# Programs: the fault proxy and the PSP simulator (when their cmd/ directories
# exist), then identity, order, coupon and payment, and the storefront (web). Like docker-compose.yml, the coupon
# service reaches MySQL through the fault proxy when there is one. Logs go to
# .run/<name>.log, pids to .run/<name>.pid.
#
# REPLICAS=n (make run REPLICAS=3) starts n instances of each service:
# replica i listens on its service's port + 100 × i (order 8081, 8181,
# 8281; coupon 8082, 8182, …), is named <service>-<i> in .run/ (replica 0
# keeps the plain name), and calls replica i of the other services. All of
# them share the databases, NATS and Redis, so the relays, consumers and
# jobs run on every replica; the simulator spreads its notifications over
# the payment replicas (PSP_CALLBACK_URL lists them all). Each instance then
# opens at most MYSQL_MAX_OPEN_CONNS (8 unless set) connections to MySQL.
#
# Each service logs in as it does in compose: as its own MySQL user
# (oncemall_<name>, created here with deploy/mysql-init), as its own NATS
# user of deploy/nats.conf, and to Redis with a password. On the local
# servers that means two servers of make run's own, started when they do
# not answer and left running like the shared ones (scripts/servers.sh):
# NATS from deploy/nats.conf on RUN_NATS_ADDR (127.0.0.1:4223) and Redis
# with a password on RUN_REDIS_ADDR (127.0.0.1:6380). After `make infra`
# (RUN_INFRA=docker) both addresses are the containers', which compose
# configured the same way, and nothing is started.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=depaddrs.sh
source scripts/depaddrs.sh
# shellcheck source=servers.sh
source scripts/servers.sh
root=$PWD
run_dir=$root/.run
bin_dir=$root/bin
stop_timeout=${STOP_TIMEOUT:-30}
# A developer's machine: the published development secrets are allowed
# (see docs/security.md). The broken variants are not; make lab runs those.
export ONCEMALL_ENV=${ONCEMALL_ENV:-dev}
run_infra=${RUN_INFRA:-local}
run_nats_addr=${RUN_NATS_ADDR:-127.0.0.1:4223}
run_redis_addr=${RUN_REDIS_ADDR:-127.0.0.1:6380}
replicas=${REPLICAS:-1}
case $replicas in
  [1-9]) ;;
  *) echo "run: REPLICAS must be 1 to 9, not '$replicas'" >&2; exit 2 ;;
esac
if [ "$replicas" -gt 1 ]; then
  # The services share one MySQL server; keep n replicas within its
  # connections.
  export MYSQL_MAX_OPEN_CONNS=${MYSQL_MAX_OPEN_CONNS:-8} MYSQL_MAX_IDLE_CONNS=${MYSQL_MAX_IDLE_CONNS:-8}
fi

# name | main package | health URL | extra environment
programs() {
  if [ -d scripts/tools/faultproxy ]; then
    echo "faultproxy|scripts/tools/faultproxy|http://127.0.0.1:8091/healthz|FAULTPROXY_ADDR=:3307 FAULTPROXY_ADMIN_ADDR=:8091 FAULTPROXY_UPSTREAM=${MYSQL_ADDR:-127.0.0.1:3306}"
  fi
  # The simulator spreads its notifications over the payment replicas.
  local i callbacks="" refunds=""
  for ((i = 0; i < ${replicas:-1}; i++)); do
    callbacks+="${callbacks:+,}http://127.0.0.1:$((8083 + 100 * i))/payments/callback"
    refunds+="${refunds:+,}http://127.0.0.1:$((8083 + 100 * i))/payments/refunds/callback"
  done
  if [ -d services/psp-sim/cmd/psp-sim ]; then
    echo "psp-sim|services/psp-sim/cmd/psp-sim|http://127.0.0.1:8090/healthz|PSP_HTTP_ADDR=:8090 PSP_CALLBACK_URL=$callbacks PSP_REFUND_CALLBACK_URL=$refunds"
  fi
  # The issuer of the access tokens (services/identity/README.md), first
  # so that a token can be had as soon as the services answer.
  echo "identity|services/identity/cmd/identity|http://127.0.0.1:8084/readyz|HTTP_ADDR=:8084 MYSQL_DATABASE=oncemall_identity"
  echo "order|services/order/cmd/order|http://127.0.0.1:8081/readyz|"
  local coupon_db=""
  if [ -d scripts/tools/faultproxy ]; then coupon_db="MYSQL_ADDR=127.0.0.1:3307"; fi
  echo "coupon|services/coupon/cmd/coupon|http://127.0.0.1:8082/readyz|HTTP_ADDR=:8082 MYSQL_DATABASE=oncemall_coupon $coupon_db"
  echo "payment|services/payment/cmd/payment|http://127.0.0.1:8083/readyz|HTTP_ADDR=:8083 MYSQL_DATABASE=oncemall_payment"
  # The storefront (services/web), last: it owns no data and is ready once
  # identity and order answer.
  echo "web|services/web/cmd/web|http://127.0.0.1:8085/readyz|HTTP_ADDR=:8085"
}

# instances prints programs() with each service (services/<svc>/cmd/<svc>)
# REPLICAS times: replica i > 0 is named <svc>-<i>, listens on the port of
# replica 0 + 100 × i, and calls replica i of the order, coupon and payment
# services.
instances() {
  local name pkg url extra i port peers
  while IFS='|' read -r name pkg url extra; do
    echo "$name|$pkg|$url|$extra"
    [ "$pkg" = "services/$name/cmd/$name" ] || continue
    port=${url#http://127.0.0.1:}
    port=${port%%/*}
    for ((i = 1; i < replicas; i++)); do
      peers="ORDER_URL=http://127.0.0.1:$((8081 + 100 * i)) COUPON_URL=http://127.0.0.1:$((8082 + 100 * i)) PAYMENT_URL=http://127.0.0.1:$((8083 + 100 * i))"
      echo "$name-$i|$pkg|${url/:$port\//:$((port + 100 * i))/}|$extra HTTP_ADDR=:$((port + 100 * i)) $peers"
    done
  done < <(programs)
}

# binary PKG prints the name of the binary bin/ holds for the main package
# PKG: the last element of its path (the replicas of a service share one).
binary() { echo "${1##*/}"; }

build() {
  mkdir -p "$bin_dir"
  local pkg
  while read -r pkg; do
    echo "run: building bin/$(binary "$pkg")"
    go build -o "$bin_dir/$(binary "$pkg")" "./$pkg"
  done < <(programs | cut -d'|' -f2)
}

# stop_all sends SIGTERM to every program with a pid file, newest first, and
# waits for each to exit (SIGKILL after STOP_TIMEOUT seconds).
stop_all() {
  local names=() pidfile name pid
  while IFS='|' read -r name _ _ _; do names=("$name" "${names[@]}"); done < <(instances)
  # Replicas a start with a larger REPLICAS left running go first.
  for pidfile in "$run_dir"/*-[0-9].pid; do
    [ -e "$pidfile" ] || continue
    name=$(basename "$pidfile" .pid)
    case " ${names[*]} " in *" $name "*) ;; *) names=("$name" "${names[@]}") ;; esac
  done
  for name in "${names[@]}"; do
    pidfile=$run_dir/$name.pid
    [ -f "$pidfile" ] || continue
    pid=$(cat "$pidfile")
    if kill -0 "$pid" 2>/dev/null; then
      echo "run: stopping $name (pid $pid)"
      kill -TERM "$pid" 2>/dev/null || true
      for _ in $(seq 1 $((stop_timeout * 10))); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
      done
      if kill -0 "$pid" 2>/dev/null; then
        echo "run: $name did not stop within ${stop_timeout}s; killing it" >&2
        kill -KILL "$pid" 2>/dev/null || true
      fi
    fi
    rm -f "$pidfile"
  done
}

# run_servers starts make run's own NATS and Redis when they do not answer
# (local servers only), and waits for them.
run_servers() {
  [ "$run_infra" = docker ] && return 0
  if ! answers "$run_nats_addr"; then
    echo "run: starting NATS from deploy/nats.conf on $run_nats_addr (log .run/nats-server.log)"
    start_run_nats "$run_dir" "$run_nats_addr"
  fi
  if ! answers "$run_redis_addr"; then
    echo "run: starting Redis with a password on $run_redis_addr"
    if ! command -v redis-server >/dev/null 2>&1; then
      echo "run: redis-server is not installed; install Redis, or use the containers: make infra" >&2
      return 1
    fi
    start_run_redis "$run_dir" "$run_redis_addr"
  fi
  local addr
  for addr in "$run_nats_addr" "$run_redis_addr"; do
    for _ in $(seq 1 100); do answers "$addr" && break; sleep 0.1; done
    if ! answers "$addr"; then
      echo "run: nothing answers at $addr; see .run/nats-server.log or .run/redis-server.log" >&2
      return 1
    fi
  done
}

# db_users creates or updates each service's MySQL user on the local server,
# as the database image does from deploy/mysql-init on its first start, with
# the administrator MYSQL_USER (root by default). Running it again changes
# nothing. The containers of make infra created theirs already.
db_users() {
  [ "$run_infra" = docker ] && return 0
  local client svc upper var services
  client=$(command -v mariadb || command -v mysql || true)
  if [ -z "$client" ]; then
    echo "run: no mariadb or mysql client to create the services' database users with; install one, or use the containers: make infra" >&2
    return 1
  fi
  services=$(run_services | tr '\n' ' ')
  for svc in $services; do
    upper=$(printf '%s' "$svc" | tr '[:lower:]' '[:upper:]')
    var=MYSQL_${upper}_PASSWORD
    export "$var=${!var:-dev-mysql-$svc-password}"
  done
  echo "run: creating the services' MySQL users (oncemall_<service>) on $mysql_addr"
  ONCEMALL_DB_SERVICES=$services sh deploy/mysql-init/10-service-users.sh |
    MYSQL_PWD=${MYSQL_PASSWORD:-} "$client" --protocol=tcp -h "${mysql_addr%:*}" -P "${mysql_addr##*:}" -u "${MYSQL_USER:-root}"
}

# service_env NAME prints the credentials the service NAME logs in with,
# NAME=value words: those of compose, with the same development defaults
# and the same variables to change them.
service_env() {
  local name=$1 upper mysql_var nats_var
  upper=$(printf '%s' "$name" | tr '[:lower:]' '[:upper:]')
  mysql_var=MYSQL_${upper}_PASSWORD nats_var=NATS_${upper}_PASSWORD
  printf 'MYSQL_USER=oncemall_%s MYSQL_PASSWORD=%s NATS_URL=nats://%s:%s@%s REDIS_ADDR=%s REDIS_PASSWORD=%s' \
    "$name" "${!mysql_var:-dev-mysql-$name-password}" "$name" "${!nats_var:-dev-nats-$name-password}" "$run_nats_addr" \
    "$run_redis_addr" "${REDIS_PASSWORD:-dev-redis-password}"
}

wait_ready() { # name pid url
  local name=$1 pid=$2 url=$3
  for _ in $(seq 1 600); do
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "run: $name exited during start-up; the end of .run/$name.log:" >&2
      tail -n 20 "$run_dir/$name.log" >&2
      return 1
    fi
    if curl -fsS -o /dev/null --max-time 2 "$url" 2>/dev/null && kill -0 "$pid" 2>/dev/null; then
      return 0
    fi
    sleep 0.1
  done
  echo "run: $name not ready at $url after 60s; see .run/$name.log" >&2
  return 1
}

start() {
  mkdir -p "$run_dir"
  for f in "$run_dir"/*.pid; do
    [ -e "$f" ] || continue
    if kill -0 "$(cat "$f")" 2>/dev/null; then
      echo "run: $(basename "$f" .pid) is already running (pid $(cat "$f")); run 'make stop' first" >&2
      exit 1
    fi
    rm -f "$f"
  done
  bash scripts/preflight.sh
  build
  run_servers
  db_users

  trap 'echo; stop_all; exit 130' INT
  trap 'stop_all; exit 143' TERM

  local name pkg url extra pid port summary=()
  while IFS='|' read -r name pkg url extra; do
    # A port someone else holds would make the readiness check succeed
    # against the wrong process, so refuse it up front.
    port=${url#http://127.0.0.1:}
    port=${port%%/*}
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "run: port $port, which $name needs, is already in use:" >&2
      ss -ltnp "sport = :$port" 2>/dev/null | tail -n +2 >&2 || true
      stop_all
      exit 1
    fi
    # A service of services/<svc>/cmd/<svc> logs in as itself, every
    # replica alike.
    local creds="" svc
    svc=$(binary "$pkg")
    if [ "$pkg" = "services/$svc/cmd/$svc" ] && run_services | grep -qx "$svc"; then creds=$(service_env "$svc"); fi
    # shellcheck disable=SC2086 # extra and creds are lists of NAME=value words.
    env $creds $extra "$bin_dir/$svc" >"$run_dir/$name.log" 2>&1 &
    pid=$!
    echo "$pid" >"$run_dir/$name.pid"
    if ! wait_ready "$name" "$pid" "$url"; then
      stop_all
      exit 1
    fi
    summary+=("$(printf '  %-11s %-32s log .run/%s.log' "$name" "${url%/*}" "$name")")
    echo "run: $name ready"
  done < <(instances)

  echo
  echo "oncemall is running:"
  printf '%s\n' "${summary[@]}"
  echo
  if [ "${RUN_DETACH:-0}" = 1 ]; then
    echo "run: detached; 'make stop' stops everything."
    trap - INT TERM
    exit 0
  fi
  echo "run: Ctrl-C stops everything."
  # Stay until Ctrl-C, or until one program dies on its own.
  set +e
  # Ctrl-C reaches the programs too (they share the terminal's process
  # group), so wait can return because they are already shutting down.
  wait -n
  local rc=$?
  if [ "$rc" -ne 0 ]; then
    echo "run: a program exited with status $rc; stopping the others" >&2
  fi
  stop_all
  wait
  echo "run: stopped"
  [ "$rc" -eq 0 ]
}

case "${1:-start}" in
  start) start ;;
  stop) stop_all ;;
  *) echo "usage: $0 [start|stop]" >&2; exit 2 ;;
esac
