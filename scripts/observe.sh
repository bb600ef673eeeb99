#!/usr/bin/env bash
# observe.sh starts what shows the programs of `make run` from the outside:
# Jaeger (the traces) and Prometheus (the metrics), as local processes.
#
#   scripts/observe.sh start   start both, wait until each answers, print
#                              where; then stay in the foreground until
#                              Ctrl-C (or return at once with OBSERVE_DETACH=1)
#   scripts/observe.sh stop    stop what a detached start left running
#
# Jaeger is the pinned build of `make tools` (.tools/bin/jaeger) with
# deploy/jaeger/local.yml: OTLP/HTTP on 127.0.0.1:4318, where the services
# send their spans when started with TRACING_EXPORTER=otlp make run, and the
# UI on http://127.0.0.1:16686. Prometheus is Debian's package, installed
# here when missing, with deploy/prometheus/local.yml (it scrapes make run's
# ports) on http://127.0.0.1:9090, its data in .run/prometheus. Logs and
# pids are in .run/observe/, apart from make run's.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
dir=$root/.run/observe
jaeger_bin=$root/.tools/bin/jaeger
prom_config=${PROMETHEUS_CONFIG:-deploy/prometheus/local.yml}
jaeger_ui=127.0.0.1:16686 jaeger_otlp=127.0.0.1:4318 prom_addr=127.0.0.1:9090

# name | health URL | command
programs() {
  echo "jaeger|http://$jaeger_ui/api/services|$jaeger_bin --config deploy/jaeger/local.yml"
  echo "prometheus|http://$prom_addr/-/ready|prometheus --config.file=$prom_config --storage.tsdb.path=.run/prometheus --web.listen-address=$prom_addr"
}

stop_all() {
  local name pid
  while IFS='|' read -r name _ _; do
    [ -f "$dir/$name.pid" ] || continue
    pid=$(cat "$dir/$name.pid")
    if kill -0 "$pid" 2>/dev/null; then
      echo "observe: stopping $name (pid $pid)"
      kill -TERM "$pid" 2>/dev/null || true
      for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$dir/$name.pid"
  done < <(programs)
}

# need checks what start needs and installs Prometheus when it is missing.
need() {
  if [ ! -x "$jaeger_bin" ]; then
    echo "observe: $jaeger_bin is missing: run 'make tools' (make observe does)" >&2
    exit 1
  fi
  if ! command -v prometheus >/dev/null 2>&1; then
    echo "observe: installing Debian's prometheus package"
    if [ "$(id -u)" = 0 ]; then
      apt-get update -qq && apt-get install -y -qq --no-install-recommends prometheus
    else
      sudo apt-get update -qq && sudo apt-get install -y -qq --no-install-recommends prometheus
    fi
  fi
  if [ ! -f "$prom_config" ]; then
    echo "observe: no Prometheus configuration at $prom_config (set PROMETHEUS_CONFIG)" >&2
    exit 1
  fi
}

start() {
  need
  mkdir -p "$dir"
  local name url cmd pid base summary=()
  trap 'echo; stop_all; exit 130' INT
  trap 'stop_all; exit 143' TERM
  while IFS='|' read -r name url cmd; do
    if [ -f "$dir/$name.pid" ] && kill -0 "$(cat "$dir/$name.pid")" 2>/dev/null; then
      echo "observe: $name is already running (pid $(cat "$dir/$name.pid")); 'make observe-stop' stops it" >&2
      exit 1
    fi
    if curl -fsS -o /dev/null --max-time 2 "$url" 2>/dev/null; then
      echo "observe: something already answers at $url; is another $name running?" >&2
      stop_all
      exit 1
    fi
    # shellcheck disable=SC2086 # cmd is a command line of words.
    $cmd >"$dir/$name.log" 2>&1 &
    pid=$!
    echo "$pid" >"$dir/$name.pid"
    for _ in $(seq 1 300); do
      curl -fsS -o /dev/null --max-time 2 "$url" 2>/dev/null && break
      if ! kill -0 "$pid" 2>/dev/null; then
        echo "observe: $name exited during start-up; the end of .run/observe/$name.log:" >&2
        tail -n 20 "$dir/$name.log" >&2
        stop_all
        exit 1
      fi
      sleep 0.2
    done
    if ! curl -fsS -o /dev/null --max-time 2 "$url" 2>/dev/null; then
      echo "observe: $name not ready at $url after 60s; see .run/observe/$name.log" >&2
      stop_all
      exit 1
    fi
    base=${url#http://}
    summary+=("$(printf '  %-11s %-24s log .run/observe/%s.log' "$name" "http://${base%%/*}" "$name")")
  done < <(programs)

  echo
  echo "observing:"
  printf '%s\n' "${summary[@]}"
  echo "  traces go to http://$jaeger_otlp: start the services with TRACING_EXPORTER=otlp make run"
  echo "  Jaeger UI and search: http://$jaeger_ui/search?service=order (README: 'Open the trace of one purchase')"
  echo
  if [ "${OBSERVE_DETACH:-0}" = 1 ]; then
    echo "observe: detached; 'make observe-stop' stops them."
    trap - INT TERM
    exit 0
  fi
  echo "observe: Ctrl-C stops them."
  set +e
  wait -n
  stop_all
  wait
}

case "${1:-start}" in
  start) start ;;
  stop) stop_all ;;
  *) echo "usage: $0 [start|stop]" >&2; exit 2 ;;
esac
