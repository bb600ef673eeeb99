# depaddrs.sh is sourced by preflight.sh and .ci/run, so both look for the
# dependencies where the services and tests do. It sets mysql_addr,
# redis_addr and nats_addr (host:port) from MYSQL_ADDR, REDIS_ADDR and
# NATS_URL, with the same defaults, and defines answers.

mysql_addr=${MYSQL_ADDR:-127.0.0.1:3306}
redis_addr=${REDIS_ADDR:-127.0.0.1:6379}
# NATS_URL is a nats:// or tls:// URL, maybe with credentials, or a
# comma-separated list of them: the first server is the one checked.
nats_addr=${NATS_URL:-nats://127.0.0.1:4222}
nats_addr=${nats_addr%%,*}
nats_addr=${nats_addr#*://}
nats_addr=${nats_addr##*@}
nats_addr=${nats_addr%%/*}

# answers HOST:PORT succeeds when a TCP connection opens within 2 seconds.
answers() {
  local host=${1%:*} port=${1##*:}
  host=${host#[} host=${host%]}
  timeout 2 bash -c "exec 3<>/dev/tcp/${host:-127.0.0.1}/$port" 2>/dev/null
}
