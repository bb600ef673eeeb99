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
# exist), then order, coupon and payment. Like docker-compose.yml, the coupon
# service reaches MySQL through the fault proxy when there is one. Logs go to
# .run/<name>.log, pids to .run/<name>.pid.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
run_dir=$root/.run
bin_dir=$root/bin
stop_timeout=${STOP_TIMEOUT:-30}
# A developer's machine: the published development secrets are allowed
# (see docs/security.md). The broken variants are not; make lab runs those.
export ONCEMALL_ENV=${ONCEMALL_ENV:-dev}

# name | main package | health URL | extra environment
programs() {
  if [ -d scripts/cmd/faultproxy ]; then
    echo "faultproxy|scripts/cmd/faultproxy|http://127.0.0.1:8091/healthz|FAULTPROXY_ADDR=:3307 FAULTPROXY_ADMIN_ADDR=:8091 FAULTPROXY_UPSTREAM=${MYSQL_ADDR:-127.0.0.1:3306}"
  fi
  if [ -d services/payment/cmd/psp-sim ]; then
    echo "psp-sim|services/payment/cmd/psp-sim|http://127.0.0.1:8090/healthz|PSP_HTTP_ADDR=:8090"
  fi
  echo "order|services/order/cmd/order|http://127.0.0.1:8081/readyz|"
  local coupon_db=""
  if [ -d scripts/cmd/faultproxy ]; then coupon_db="MYSQL_ADDR=127.0.0.1:3307"; fi
  echo "coupon|services/coupon/cmd/coupon|http://127.0.0.1:8082/readyz|HTTP_ADDR=:8082 MYSQL_DATABASE=oncemall_coupon $coupon_db"
  echo "payment|services/payment/cmd/payment|http://127.0.0.1:8083/readyz|HTTP_ADDR=:8083 MYSQL_DATABASE=oncemall_payment"
}

build() {
  mkdir -p "$bin_dir"
  local name pkg
  while IFS='|' read -r name pkg _ _; do
    echo "run: building bin/$name"
    go build -o "$bin_dir/$name" "./$pkg"
  done < <(programs)
}

# stop_all sends SIGTERM to every program with a pid file, newest first, and
# waits for each to exit (SIGKILL after STOP_TIMEOUT seconds).
stop_all() {
  local names=() pidfile name pid
  while IFS='|' read -r name _ _ _; do names=("$name" "${names[@]}"); done < <(programs)
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
    # shellcheck disable=SC2086 # extra is a list of NAME=value words.
    env $extra "$bin_dir/$name" >"$run_dir/$name.log" 2>&1 &
    pid=$!
    echo "$pid" >"$run_dir/$name.pid"
    if ! wait_ready "$name" "$pid" "$url"; then
      stop_all
      exit 1
    fi
    summary+=("$(printf '  %-11s %-32s log .run/%s.log' "$name" "${url%/*}" "$name")")
    echo "run: $name ready"
  done < <(programs)

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
