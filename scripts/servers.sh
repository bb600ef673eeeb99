# servers.sh is sourced by .ci/run, preflight.sh and run.sh: how each server
# is started on a machine without Docker, in one place, so that the command
# preflight prints is the one .ci/run runs, and make run starts its own
# servers the way .ci/run starts the shared ones.
#
# The shared servers (MariaDB on 3306, Redis on 6379, NATS on 4222) are the
# ones the tests use: no password, and JetStream open to anyone. make run
# starts two more of its own, so that the services log in as they do in
# compose, without touching the shared ones:
#   - NATS from deploy/nats.conf on 127.0.0.1:4223 (RUN_NATS_ADDR), the
#     nats-server version compose runs, built from scripts/go.mod;
#   - Redis with a password on 127.0.0.1:6380 (RUN_REDIS_ADDR): the shared
#     Redis has none, and giving it one would lock out every test.
# make infra (scripts/infra.sh) sets RUN_INFRA=docker, and then every
# address points at the containers and nothing here is started.

# The commands, as words a shell can run, for Debian's packages (this
# project's machines and CI) and for Homebrew (macOS).
start_mariadb_cmd="start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd"
start_redis_cmd='redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no'
start_nats_cmd="start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server -- -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server"
brew_mariadb_cmd="brew install mariadb@10.11 && brew services start mariadb@10.11"
brew_redis_cmd="brew install redis && brew services start redis"
brew_nats_cmd='brew install nats-server && (nats-server -a 127.0.0.1 -p 4222 -js -sd "$HOME/.nats" >/dev/null 2>&1 &)'

# start_mariadb, start_redis and start_nats start the shared servers as CI
# does (Debian).
start_mariadb() {
  # /run is a tmpfs: the socket directory is gone after a reboot.
  mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld 2>/dev/null || true
  start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd
}
start_redis() {
  mkdir -p /var/lib/redis /var/log/redis
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log
}
start_nats() {
  mkdir -p /var/lib/nats-server
  start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server -- -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log
}

# start_daemon PROGRAM ARGS... runs PROGRAM in the background, detached
# from the terminal, as start-stop-daemon does where there is one (Debian)
# and with nohup elsewhere (macOS).
start_daemon() {
  if command -v start-stop-daemon >/dev/null 2>&1; then
    start-stop-daemon --start --oknodo --background --exec "$1" -- "${@:2}"
  else
    nohup "$@" >/dev/null 2>&1 &
  fi
}

# start_run_nats DIR HOST:PORT starts make run's NATS: deploy/nats.conf on
# HOST:PORT, its JetStream store and log under DIR, with the passwords of
# the environment (the development ones by default, as compose has). The
# binary is built into bin/ from the version scripts/go.mod pins.
start_run_nats() {
  local dir=$1 host=${2%:*} port=${2##*:}
  mkdir -p "$dir/nats" bin
  go build -o bin/nats-server github.com/nats-io/nats-server/v2
  export NATS_ADMIN_PASSWORD=${NATS_ADMIN_PASSWORD:-dev-nats-admin-password}
  local svc upper var
  for svc in $(run_services); do
    upper=$(printf '%s' "$svc" | tr '[:lower:]' '[:upper:]')
    var=NATS_${upper}_PASSWORD
    export "$var=${!var:-dev-nats-$svc-password}"
  done
  start_daemon "$PWD/bin/nats-server" -c "$PWD/deploy/nats.conf" -a "$host" -p "$port" -sd "$dir/nats" -l "$dir/nats-server.log"
}

# start_run_redis DIR HOST:PORT starts make run's Redis on HOST:PORT with
# the password REDIS_PASSWORD (the development one by default, as compose
# has), keeping nothing on disk.
start_run_redis() {
  local dir=$1 host=${2%:*} port=${2##*:}
  mkdir -p "$dir"
  redis-server --daemonize yes --bind "$host" --port "$port" --requirepass "${REDIS_PASSWORD:-dev-redis-password}" \
    --save "" --appendonly no --dir "$dir" --logfile "$dir/redis-server.log"
}

# run_services prints the services whose users deploy/nats.conf and
# deploy/mysql-init know: the directories services/*/cmd/<name> whose main
# runs a platform service (not the simulator, psp-sim).
run_services() {
  local d
  for d in services/*/cmd/*/; do
    d=${d%/}
    grep -q 'platform.Main(' "$d/main.go" || continue
    if [ "${d#services/}" = "${d##*/}/cmd/${d##*/}" ]; then echo "${d##*/}"; fi
  done
}
