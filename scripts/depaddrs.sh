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
# The connection is bash's /dev/tcp, in a background subshell that is
# killed at the bound: GNU timeout is not on macOS, and a connect to a
# host that drops packets would otherwise hang for a minute or more. Bash
# 3.2 (macOS's) runs it.
answers() {
  local host=${1%:*} port=${1##*:} pid i
  host=${host#[} host=${host%]}
  (exec 3<>"/dev/tcp/${host:-127.0.0.1}/$port") 2>/dev/null &
  pid=$!
  for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
    if ! kill -0 "$pid" 2>/dev/null; then
      wait "$pid"
      return
    fi
    sleep 0.1
  done
  kill "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  return 1
}
