#!/bin/bash
# The entrypoint of the mariadb:10.11 stand-in (scripts/standins/mariadb):
# the part of the official image's contract that docker-compose.yml uses.
#   - MARIADB_ROOT_PASSWORD or MYSQL_ROOT_PASSWORD is root's password, for
#     root@localhost and root@'%' (MARIADB_ALLOW_EMPTY_ROOT_PASSWORD=1 or
#     MYSQL_ALLOW_EMPTY_PASSWORD=1 allows none); one of them is required.
#   - On an empty data directory only: the system tables are created, the
#     server is started with networking off, and /docker-entrypoint-initdb.d
#     is run in name order: *.sh executable is run, *.sh otherwise sourced
#     (with docker_process_sql defined, which runs SQL as root), *.sql and
#     *.sql.gz are fed to the client. Then the server stops and starts for
#     real, so a TCP client reaches it only once every script has run.
#   - Started as root, it drops to the mysql user; arguments starting with
#     - are options of mariadbd.
set -eo pipefail
shopt -s nullglob

log() { printf '%s [Entrypoint]: %s\n' "$(date -u +%FT%TZ)" "$*"; }
die() { log "ERROR: $*" >&2; exit 1; }

if [ "${1:0:1}" = '-' ]; then
  set -- mariadbd "$@"
fi
if [ "$1" != mariadbd ] && [ "$1" != mysqld ]; then
  exec "$@"
fi
if [ "$(id -u)" = 0 ]; then
  mkdir -p /var/lib/mysql /run/mysqld
  chown -R mysql:mysql /var/lib/mysql /run/mysqld
  exec setpriv --reuid=mysql --regid=mysql --init-groups "${BASH_SOURCE[0]}" "$@"
fi

DATADIR=/var/lib/mysql
SOCKET=/run/mysqld/mysqld.sock
ROOT_PASSWORD=${MARIADB_ROOT_PASSWORD:-${MYSQL_ROOT_PASSWORD:-}}

# sql_string prints $1 as a single-quoted SQL string literal.
sql_string() { printf "'%s'" "$(printf '%s' "$1" | sed -e 's/\\/\\\\/g' -e "s/'/''/g")"; }

# docker_process_sql runs SQL from stdin (or its arguments' -e) as root over
# the socket: the name and the use the official image gives it.
docker_process_sql() {
  mariadb --defaults-extra-file=<(printf '[client]\npassword="%s"\n' "$(printf '%s' "$ROOT_PASSWORD" | sed -e 's/\\/\\\\/g' -e 's/"/\\"/g')") \
    --protocol=socket --socket="$SOCKET" -uroot --batch --skip-column-names "$@"
}

if [ ! -d "$DATADIR/mysql" ]; then
  if [ -z "$ROOT_PASSWORD" ] && [ -z "${MARIADB_ALLOW_EMPTY_ROOT_PASSWORD:-${MYSQL_ALLOW_EMPTY_PASSWORD:-}}" ]; then
    die "the database is uninitialized and no root password is given: set MARIADB_ROOT_PASSWORD (or MYSQL_ROOT_PASSWORD), or MARIADB_ALLOW_EMPTY_ROOT_PASSWORD=1"
  fi
  log "initializing $DATADIR"
  mariadb-install-db --datadir="$DATADIR" --skip-test-db --auth-root-authentication-method=normal \
    --skip-name-resolve --default-time-zone=SYSTEM >/dev/null
  log "starting a temporary server with networking off"
  "$@" --skip-networking --socket="$SOCKET" &
  pid=$!
  for i in $(seq 60); do
    mariadb-admin --protocol=socket --socket="$SOCKET" -uroot ping --silent >/dev/null 2>&1 && break
    kill -0 "$pid" 2>/dev/null || die "the temporary server exited"
    [ "$i" = 60 ] && die "the temporary server did not answer in 30 s"
    sleep 0.5
  done
  pw=$(sql_string "$ROOT_PASSWORD")
  # The fresh system tables: root@localhost with no password, which gets
  # it now; root@'%' as the official image makes it; no other root (the
  # 127.0.0.1, ::1 and host-name ones have no password) and no anonymous
  # user.
  mariadb --protocol=socket --socket="$SOCKET" -uroot <<SQL
DROP USER IF EXISTS ''@'localhost', ''@'$(hostname)', 'root'@'$(hostname)', 'root'@'127.0.0.1', 'root'@'::1';
ALTER USER 'root'@'localhost' IDENTIFIED BY $pw;
CREATE USER 'root'@'%' IDENTIFIED BY $pw;
GRANT ALL PRIVILEGES ON *.* TO 'root'@'%' WITH GRANT OPTION;
GRANT PROXY ON ''@'%' TO 'root'@'%' WITH GRANT OPTION;
FLUSH PRIVILEGES;
SQL
  for f in /docker-entrypoint-initdb.d/*; do
    case "$f" in
      *.sh)
        if [ -x "$f" ]; then log "running $f"; "$f"
        else log "sourcing $f"; . "$f"; fi ;;
      *.sql) log "running $f"; docker_process_sql <"$f" ;;
      *.sql.gz) log "running $f"; gunzip -c "$f" | docker_process_sql ;;
      *) log "ignoring $f" ;;
    esac
  done
  log "stopping the temporary server"
  kill -TERM "$pid"
  wait "$pid" || die "the temporary server did not stop cleanly"
  log "initialization done"
fi
exec "$@"
