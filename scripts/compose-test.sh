#!/usr/bin/env bash
# compose-test.sh runs `docker compose up --build` for real, on the
# unmodified docker-compose.yml, and checks what a user would see
# (make compose-test; docs/compose.md).
#
#   scripts/compose-test.sh tools   the engine, Compose and the stand-in images only
#   scripts/compose-test.sh images  the engine and the stand-in images only
#   scripts/compose-test.sh         tools, then the test
#
# Tools, each pinned and made once per machine (TOOLS_CACHE, as make tools
# does for Jaeger):
#   - the engine: Debian's podman with runc, serving the Docker API on
#     PODMAN_SOCK (started here when it does not answer);
#   - Docker Compose $COMPOSE_VERSION, built from the Go module proxy, and a
#     `docker` shim on PATH (`docker compose` is Compose, the rest podman);
#   - a stand-in for every third-party image the compose file names, tagged
#     with the official name so that `up --build` pulls nothing (no registry
#     is reachable here): debian:bookworm-slim (debootstrap minbase),
#     golang:1.26-bookworm (it plus this machine's Go), mariadb:10.11 and
#     redis:7.0-bookworm (Debian's packages, scripts/standins), nats:2.15.2
#     (nats-server built from the module proxy). An image of that name that
#     is not a stand-in (a real one, pulled) is left alone.
#
# The test, each step named when it fails, with every container's last log
# lines: up --build -d --wait; the purchase of docs/purchase-flow.md
# against the containers (PAID, USED); make infra + make lab on the
# containers; loadgen's purchases with the order container killed and
# restarted in the middle, then loadgen's invariants; ONCEMALL_ENV=production
# makes every service refuse the development secrets by name; down -v
# leaves nothing behind.
#
# Every host port is moved off the defaults (COMPOSE_TEST_PORT_BASE), so
# the run never touches the machine's own MariaDB, Redis and NATS.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

TOOLS_CACHE=${TOOLS_CACHE:-$HOME/.cache/oncemall/tools}
COMPOSE_VERSION=v2.40.3
NATS_VERSION=$(awk '$1 == "github.com/nats-io/nats-server/v2" { print $2 }' scripts/go.mod)
PODMAN_SOCK=${PODMAN_SOCK:-/run/podman/podman.sock}
GO=${GO:-go}
# Measured here (2 cores shared with other work, load 20 to 37): cold 78
# min (Compose 36, debootstrap 6, stand-ins 6, the test 30 of which the
# first build 27); warm 4.
BUDGET_COLD_MIN=80
BUDGET_WARM_MIN=10

COMPOSE_DIR=$TOOLS_CACHE/compose-$COMPOSE_VERSION
ROOTFS_TAR=$TOOLS_CACHE/debian-bookworm-minbase.tar
NATS_BIN=$TOOLS_CACHE/nats-server-$NATS_VERSION/nats-server

export DOCKER_HOST=unix://$PODMAN_SOCK
# The engine's classic builder: BuildKit would pull moby/buildkit.
export DOCKER_BUILDKIT=0 COMPOSE_BAKE=false
export PATH=$COMPOSE_DIR/bin:$PATH

step=setup
start=$SECONDS
say() { echo "compose-test [$(( SECONDS - start ))s] $*"; }
fail() { echo "compose-test: FAILED at step '$step': $*" >&2; exit 1; }

# --- tools ------------------------------------------------------------------

engine() {
  step=engine
  command -v podman >/dev/null && command -v runc >/dev/null ||
    fail "podman and runc are needed: apt-get install -y podman runc debootstrap (docs/compose.md)"
  local conf=/etc/containers/containers.conf
  if ! grep -qs '^runtime *= *"runc"' "$conf" || ! grep -qs '^cgroup_manager *= *"cgroupfs"' "$conf" || ! grep -qs '^default_ulimits *= *\[\]' "$conf"; then
    fail "$conf must set runtime = \"runc\" and cgroup_manager = \"cgroupfs\" under [engine], default_ulimits = [] under [containers] (docs/compose.md)"
  fi
  if ! curl -fsS --unix-socket "$PODMAN_SOCK" http://d/_ping >/dev/null 2>&1; then
    say "starting the podman API service on $PODMAN_SOCK (log: $TOOLS_CACHE/podman-service.log)"
    mkdir -p "$(dirname "$PODMAN_SOCK")" "$TOOLS_CACHE"
    setsid nohup podman system service --time=0 "unix://$PODMAN_SOCK" >>"$TOOLS_CACHE/podman-service.log" 2>&1 </dev/null &
    for _ in $(seq 50); do
      curl -fsS --unix-socket "$PODMAN_SOCK" http://d/_ping >/dev/null 2>&1 && break
      sleep 0.2
    done
    curl -fsS --unix-socket "$PODMAN_SOCK" http://d/_ping >/dev/null 2>&1 || fail "the podman API service did not answer on $PODMAN_SOCK"
  fi
}

compose_tool() {
  step=compose
  if [ ! -x "$COMPOSE_DIR/docker-compose" ]; then
    say "building Docker Compose $COMPOSE_VERSION into $COMPOSE_DIR (minutes, once per machine)"
    mkdir -p "$COMPOSE_DIR"
    local dir
    # Built inside its own module: go install refuses a go.mod with
    # exclude directives.
    dir=$(cd /tmp && GOWORK=off GOFLAGS=-mod=mod $GO mod download -json "github.com/docker/compose/v2@$COMPOSE_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
    [ -n "$dir" ] || fail "go mod download github.com/docker/compose/v2@$COMPOSE_VERSION"
    (cd "$dir" && GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=0 $GO build -trimpath -o "$COMPOSE_DIR/docker-compose.tmp" ./cmd) || fail "building Compose"
    mv "$COMPOSE_DIR/docker-compose.tmp" "$COMPOSE_DIR/docker-compose"
  fi
  mkdir -p "$COMPOSE_DIR/bin"
  cat >"$COMPOSE_DIR/bin/docker" <<EOF
#!/bin/sh
# docker compose is Compose $COMPOSE_VERSION; any other docker command is podman's.
if [ "\$1" = compose ]; then shift; exec "$COMPOSE_DIR/docker-compose" "\$@"; fi
exec podman "\$@"
EOF
  chmod +x "$COMPOSE_DIR/bin/docker"
  docker compose version >/dev/null || fail "docker compose version"
}

# standin_hash is what a stand-in is made from: its recipe files, the
# versions and STANDIN_REV (raise it when a recipe in this file changes);
# an image with another hash is rebuilt.
STANDIN_REV=1
standin_hash() { { cat "$@"; echo "$STANDIN_REV $NATS_VERSION $($GO env GOVERSION)"; } | sha256sum | cut -c1-16; }

# needs_image NAME HASH: true when NAME is missing or a stand-in of another
# hash; false when it is this stand-in, or an image that is no stand-in.
needs_image() {
  podman image exists "$1" || return 0
  local have
  have=$(podman image inspect -f '{{index .Labels "oncemall.standin"}}' "$1" 2>/dev/null || true)
  [ -n "$have" ] && [ "$have" != "<no value>" ] && [ "$have" != "$2" ]
}

standins() {
  step=images
  local h
  h=$(standin_hash /dev/null)
  if needs_image docker.io/library/debian:bookworm-slim "$h"; then
    if [ ! -s "$ROOTFS_TAR" ]; then
      command -v debootstrap >/dev/null || fail "debootstrap is needed: apt-get install -y debootstrap"
      local mirror rootfs
      mirror=$(sed -n 's/^URIs: *\(http[^ ]*debian\)$/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1)
      mirror=${mirror:-http://deb.debian.org/debian}
      rootfs=$(mktemp -d)
      say "debootstrap minbase bookworm from $mirror (about 4 minutes, once per machine)"
      debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >"$TOOLS_CACHE/debootstrap.log" 2>&1 || fail "debootstrap (log: $TOOLS_CACHE/debootstrap.log)"
      rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
      tar -C "$rootfs" -cf "$ROOTFS_TAR.tmp" . && mv "$ROOTFS_TAR.tmp" "$ROOTFS_TAR"
      rm -rf "$rootfs"
    fi
    say "image debian:bookworm-slim (stand-in)"
    podman import -q --change 'CMD ["bash"]' --change "LABEL oncemall.standin=$h" "$ROOTFS_TAR" docker.io/library/debian:bookworm-slim >/dev/null
  fi

  h=$(standin_hash /dev/null)
  if needs_image docker.io/library/golang:1.26-bookworm "$h"; then
    local goroot gover c
    goroot=$($GO env GOROOT)
    gover=$($GO env GOVERSION)
    case $gover in go1.26*) ;; *) fail "the golang:1.26-bookworm stand-in needs Go 1.26 on this machine; $GO is $gover" ;; esac
    say "image golang:1.26-bookworm (stand-in: debian:bookworm-slim + $gover + the CA bundle)"
    local extra
    extra=$(mktemp -d)
    mkdir -p "$extra/ssl/certs" "$extra/go/bin" "$extra/go/src"
    cp /etc/ssl/certs/ca-certificates.crt "$extra/ssl/certs/"
    c=$(podman create docker.io/library/debian:bookworm-slim)
    podman cp "$goroot" "$c:/usr/local/go" &&
      podman cp "$extra/ssl" "$c:/etc/" && podman cp "$extra/go" "$c:/" &&
      podman commit -q \
        --change "ENV GOLANG_VERSION=${gover#go}" --change 'ENV GOPATH=/go' --change 'ENV GOTOOLCHAIN=local' \
        --change 'ENV PATH=/go/bin:/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'WORKDIR /go' --change "LABEL oncemall.standin=$h" \
        "$c" docker.io/library/golang:1.26-bookworm >/dev/null || { podman rm -f "$c" >/dev/null; fail "golang stand-in"; }
    podman rm -f "$c" >/dev/null
    rm -rf "$extra"
  fi

  local name tag
  for name in mariadb redis; do
    tag=$([ $name = mariadb ] && echo mariadb:10.11 || echo redis:7.0-bookworm)
    h=$(standin_hash scripts/standins/$name/*)
    if needs_image docker.io/library/$tag "$h"; then
      say "image $tag (stand-in: Debian's package, scripts/standins/$name)"
      podman build -q --label "oncemall.standin=$h" -t docker.io/library/$tag scripts/standins/$name >/dev/null || fail "building the $tag stand-in"
    fi
  done

  h=$(standin_hash /dev/null)
  if needs_image "docker.io/library/nats:${NATS_VERSION#v}" "$h"; then
    if [ ! -x "$NATS_BIN" ]; then
      say "building nats-server $NATS_VERSION into $NATS_BIN"
      local dir
      dir=$(cd /tmp && GOWORK=off GOFLAGS=-mod=mod $GO mod download -json "github.com/nats-io/nats-server/v2@$NATS_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
      mkdir -p "$(dirname "$NATS_BIN")"
      (cd "$dir" && GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=0 $GO build -trimpath -ldflags=-s -o "$NATS_BIN.tmp" .) || fail "building nats-server"
      mv "$NATS_BIN.tmp" "$NATS_BIN"
    fi
    say "image nats:${NATS_VERSION#v} (stand-in: scratch + nats-server $NATS_VERSION)"
    local d
    d=$(mktemp -d)
    cp "$NATS_BIN" "$d/nats-server"
    # The official image's default configuration: client, cluster and
    # monitoring ports, JetStream off until a configuration turns it on.
    printf 'port: 4222\nhttp_port: 8222\ncluster {\n  port: 6222\n}\n' >"$d/nats-server.conf"
    mkdir -p "$d/tmp" && chmod 1777 "$d/tmp"
    tar -C "$d" -cf "$d.tar" . &&
      podman import -q --change 'ENTRYPOINT ["/nats-server"]' --change 'CMD ["--config", "nats-server.conf"]' \
        --change 'EXPOSE 4222' --change 'EXPOSE 6222' --change 'EXPOSE 8222' --change "LABEL oncemall.standin=$h" \
        "$d.tar" docker.io/library/nats:${NATS_VERSION#v} >/dev/null || fail "nats stand-in"
    rm -rf "$d" "$d.tar"
  fi
}

tools() {
  mkdir -p "$TOOLS_CACHE"
  engine
  compose_tool
  standins
  say "tools ready: Docker Compose $COMPOSE_VERSION, podman $(podman version -f '{{.Client.Version}}')"
}

case "${1:-}" in
  tools) tools; exit 0 ;;
  images) mkdir -p "$TOOLS_CACHE"; engine; standins; exit 0 ;;
  "") ;;
  *) echo "usage: $0 [tools|images]" >&2; exit 2 ;;
esac

# --- the test ---------------------------------------------------------------

base=${COMPOSE_TEST_PORT_BASE:-20000}
export MYSQL_PORT=$((base + 3306)) REDIS_PORT=$((base + 6379)) NATS_PORT=$((base + 4222))
export ORDER_PORT=$((base + 8081)) COUPON_PORT=$((base + 8082)) PAYMENT_PORT=$((base + 8083))
export PSP_SIM_PORT=$((base + 8090)) FAULTPROXY_PORT=$((base + 3307)) FAULTPROXY_ADMIN_PORT=$((base + 8091))
# Nothing of the developer's environment changes what compose runs, but
# for the ports above.
unset ONCEMALL_ENV COUPON_DEDUCTION_MODE TRACING_EXPORTER
PROJECT=oncemall
COMPOSE_FILE=$ROOT/docker-compose.yml
export COMPOSE_FILE

# Podman 4.3 runs healthchecks from systemd timers, and there is no
# systemd here: without this ticker every healthcheck stays "starting" and
# `up --wait` never returns. It runs each project container's healthcheck
# every 2 s, as the timers would (interval 5s in the file; the first check
# comes sooner, as with Docker's start interval).
ticker_pid=""
start_ticker() {
  [ -d /run/systemd/system ] && return 0
  (
    while :; do
      for c in $(podman ps --filter "label=com.docker.compose.project=$PROJECT" --format '{{.Names}}' 2>/dev/null); do
        podman healthcheck run "$c" >/dev/null 2>&1 || true
      done
      sleep 2
    done
  ) &
  ticker_pid=$!
}

infra_mk_saved=""
cleanup() {
  local rc=$?
  trap - EXIT
  [ -n "$ticker_pid" ] && kill "$ticker_pid" 2>/dev/null
  if [ $rc -ne 0 ]; then
    echo "compose-test: FAILED at step '$step' (exit $rc); the last log lines of each container:" >&2
    for c in $(podman ps -a --filter "label=com.docker.compose.project=$PROJECT" --format '{{.Names}}' 2>/dev/null); do
      echo "----- $c ($(podman inspect -f '{{.State.Status}} exit={{.State.ExitCode}}' "$c" 2>/dev/null))" >&2
      podman logs --tail 25 "$c" 2>&1 | sed 's/^/  /' >&2
    done
  fi
  [ -n "$infra_mk_saved" ] && mv "$infra_mk_saved" .infra.mk || rm -f .infra.mk
  if [ "$step" != done ]; then
    docker compose --profile lab down -v --remove-orphans >/dev/null 2>&1 || true
  fi
  exit $rc
}

# wait_for STEP-TEXT CMD...: CMD until it succeeds, for 60 s.
wait_for() {
  local what=$1; shift
  for _ in $(seq 120); do "$@" >/dev/null 2>&1 && return 0; sleep 0.5; done
  fail "$what"
}

# leftovers lists what the project left in the engine.
leftovers() {
  podman ps -a --filter "label=com.docker.compose.project=$PROJECT" --format 'container {{.Names}}'
  podman volume ls --filter "label=com.docker.compose.project=$PROJECT" --format 'volume {{.Name}}'
  podman network ls --format '{{.Name}}' | grep "^${PROJECT}_" | sed 's/^/network /' || true
}

# purchase runs the shell blocks of docs/purchase-flow.md's "Buy something"
# on the containers' ports, then waits for the order PAID and the coupon
# USED, as the page says.
purchase() {
  step=purchase
  local blocks f out
  blocks=$(awk '/^## Buy something$/ {on=1; next} on && /^## / {exit} on && /^```sh$/ {sh=1; next} sh && /^```$/ {sh=0; next} sh' docs/purchase-flow.md |
    sed -e "s/localhost:8081/localhost:$ORDER_PORT/g" -e "s/localhost:8082/localhost:$COUPON_PORT/g" \
      -e "s/localhost:8083/localhost:$PAYMENT_PORT/g" -e "s/localhost:8090/localhost:$PSP_SIM_PORT/g")
  [ "$(printf '%s\n' "$blocks" | wc -l)" -gt 3 ] || fail "docs/purchase-flow.md has no sh blocks under '## Buy something'"
  # Steps 1 and 2 once; the three commands of step 3 until the order is
  # PAID and the coupon USED ("if the order still says WAIT_PAY, run them
  # again").
  f=$(mktemp)
  {
    echo 'set -euo pipefail'
    printf '%s\n' "$blocks" | head -n -3
    echo 'for i in $(seq 60); do'
    echo '  r=$('
    printf '%s\n' "$blocks" | tail -n 3
    echo '  )'
    cat <<'SH'
  case $r in *'"status":"PAID"'*'"status":"USED"'*) printf '%s\n' "$r"; exit 0 ;; esac
  sleep 0.5
done
printf '%s\n' "$r"
exit 1
SH
  } >"$f"
  out=$(bash "$f" 2>&1) || { rm -f "$f"; fail "the purchase did not end PAID and USED:"$'\n'"$out"; }
  rm -f "$f"
  printf '%s\n' "$out" | tail -n 3 | sed 's/^/  /'
  printf '%s\n' "$out" | tail -n 1 | grep -q '"available":8' || fail "8 kettles should be left after 2 of 10 were bought"
  # The storefront's catalog (brand demo) shows what the operator stocked.
  curl -sf http://127.0.0.1:${WEB_PORT:-8085}/ | grep -q Kettle || fail "the storefront's catalog at :${WEB_PORT:-8085} does not show the Kettle"
}

main() {
  say "budget: ${BUDGET_COLD_MIN} min cold (tools, stand-in images, first build), ${BUDGET_WARM_MIN} min warm"
  tools
  trap cleanup EXIT
  start_ticker

  step=config
  docker compose config -q
  docker compose --profile observability config -q
  docker compose --profile lab config -q
  step=clean
  docker compose --profile lab down -v --remove-orphans >/dev/null 2>&1 || true
  [ -z "$(leftovers)" ] || fail "the engine holds a previous run's $(leftovers | tr '\n' ' ')"

  # Anonymous volumes (an image's VOLUME) carry no project label: every
  # volume the run adds must be gone after down -v.
  local volumes_before
  volumes_before=$(podman volume ls -q | sort)

  step=up
  local t=$SECONDS
  say "docker compose up --build -d --wait"
  docker compose up --build -d --wait
  say "up: every service healthy in $((SECONDS - t)) s"

  purchase
  say "purchase: PAID and USED, 8 left, and on the storefront"

  step=lab
  [ -f .infra.mk ] && { infra_mk_saved=$(mktemp); cp .infra.mk "$infra_mk_saved"; }
  make --no-print-directory infra
  make --no-print-directory lab
  say "make infra + make lab: every verdict ok"

  step=kill-restart
  # loadgen's purchases on the containers; the order container is killed
  # mid-run and restarted, then loadgen's invariants are judged.
  local lg=$TOOLS_CACHE/compose-test-loadgen.log pid
  $GO build -o "$TOOLS_CACHE/loadgen" ./scripts/loadgen
  "$TOOLS_CACHE/loadgen" --rate 10 --duration 30s --settle 90s --idle 0 --quiet \
    --order-url http://127.0.0.1:$ORDER_PORT --coupon-url http://127.0.0.1:$COUPON_PORT \
    --payment-url http://127.0.0.1:$PAYMENT_PORT --psp-url http://127.0.0.1:$PSP_SIM_PORT \
    --mysql "root:dev-mysql-root-password@tcp(127.0.0.1:$MYSQL_PORT)/" \
    --redis 127.0.0.1:$REDIS_PORT --nats "nats://admin:dev-nats-admin-password@127.0.0.1:$NATS_PORT" \
    >"$lg" 2>&1 &
  pid=$!
  sleep 10
  say "docker compose kill order (mid-purchase)"
  docker compose kill order
  sleep 5
  say "docker compose restart order"
  docker compose restart order
  wait_for "the order service did not come back healthy" sh -c "podman inspect -f '{{.State.Health.Status}}' ${PROJECT}-order-1 | grep -qx healthy"
  if ! wait "$pid"; then
    cat "$lg" >&2
    fail "loadgen's invariants do not hold after the order service was killed and restarted"
  fi
  grep -iE 'invariant|holds|violated' "$lg" | sed 's/^/  /' | tail -20
  say "kill and restart: every invariant holds"

  step=production
  # The same file with ONCEMALL_ENV=production: every service refuses the
  # published development secrets, naming each, and never gets healthy.
  say "ONCEMALL_ENV=production docker compose up -d order coupon payment"
  ONCEMALL_ENV=production docker compose up -d --no-deps --force-recreate order coupon payment
  local svc logs want
  for svc in order coupon payment; do
    want="ADMIN_TOKEN INTERNAL_TOKEN"
    [ $svc = payment ] && want="$want PSP_SECRET"
    for _ in $(seq 60); do
      logs=$(docker compose logs --no-log-prefix $svc 2>&1)
      case $logs in *INTERNAL_TOKEN*) break ;; esac
      sleep 0.5
    done
    for name in $want; do
      case $logs in *"$name"*) ;; *) fail "$svc with ONCEMALL_ENV=production did not refuse $name:"$'\n'"$logs" ;; esac
    done
    case $(podman inspect -f '{{.State.Health.Status}}' "$PROJECT-$svc-1") in
      healthy) fail "$svc became healthy with ONCEMALL_ENV=production and the development secrets" ;;
    esac
    say "production: $svc refuses $want"
  done

  step=down
  rm -f .infra.mk
  [ -n "$infra_mk_saved" ] && { mv "$infra_mk_saved" .infra.mk; infra_mk_saved=""; }
  docker compose --profile lab down -v --remove-orphans
  [ -z "$(leftovers)" ] || fail "down -v left $(leftovers | tr '\n' ' ')"
  local added
  added=$(comm -13 <(printf '%s\n' "$volumes_before") <(podman volume ls -q | sort) | tr '\n' ' ')
  [ -z "${added// /}" ] || fail "down -v left the volumes $added"
  step=done
  say "PASS in $((SECONDS - start)) s (budget ${BUDGET_COLD_MIN} min cold, ${BUDGET_WARM_MIN} min warm)"
}

main
