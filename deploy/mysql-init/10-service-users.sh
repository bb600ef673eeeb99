# shellcheck shell=sh
# One MySQL user per service, with every right on its own database and none
# on any other: oncemall_order may use the database oncemall_order only, and
# so on for each service in ONCEMALL_DB_SERVICES. The password of service S
# is MYSQL_<S>_PASSWORD, required. Without ONCEMALL_DB_SERVICES the services
# are those variables: MYSQL_ORDER_PASSWORD in the environment (compose's
# mysql service lists one per service) means a service order.
#
# Two callers, one text of SQL:
#   - the database image of docker-compose.yml (MariaDB or MySQL) sources
#     this file from /docker-entrypoint-initdb.d when it initialises an empty
#     data directory, and its docker_process_sql runs the SQL as root. The
#     file must stay non-executable: the entrypoint runs an executable script
#     instead of sourcing it, and docker_process_sql is not defined there;
#   - anywhere else it prints the SQL, for a client run as an administrator:
#     scripts/run.sh does `sh deploy/mysql-init/10-service-users.sh | mariadb
#     -uroot` before `make run`.
#
# Running it again changes nothing but the passwords, which it sets to the
# current values: the statements work on MariaDB 10.11 and MySQL 8.4 alike
# (no IF EXISTS forms either lacks, no plugin names).

# oncemall_sql_string prints $1 as a single-quoted SQL string literal.
oncemall_sql_string() {
  printf "'%s'" "$(printf '%s' "$1" | sed -e 's/\\/\\\\/g' -e "s/'/''/g")"
}

# oncemall_db_services prints ONCEMALL_DB_SERVICES, or the services named
# by the MYSQL_<S>_PASSWORD variables (MYSQL_ROOT_PASSWORD is root's).
oncemall_db_services() {
  if [ -n "${ONCEMALL_DB_SERVICES:-}" ]; then
    echo "$ONCEMALL_DB_SERVICES"
    return
  fi
  env | sed -n 's/^MYSQL_\([A-Z0-9_]*\)_PASSWORD=.*/\1/p' | grep -v '^ROOT$' | tr '[:upper:]' '[:lower:]' | sort
}

oncemall_service_users_sql() {
  services=$(oncemall_db_services)
  if [ -z "$services" ]; then
    echo "mysql-init: no service: set MYSQL_<SERVICE>_PASSWORD for each (or ONCEMALL_DB_SERVICES)" >&2
    return 1
  fi
  for svc in $services; do
    case $svc in
      *[!a-z0-9_]*)
        echo "mysql-init: service name '$svc' must be lower-case letters, digits and underscores" >&2
        return 1 ;;
    esac
    var=MYSQL_$(printf '%s' "$svc" | tr '[:lower:]' '[:upper:]')_PASSWORD
    eval "pw=\${$var:-}"
    if [ -z "$pw" ]; then
      echo "mysql-init: $var is empty; every service's database user needs a password" >&2
      return 1
    fi
    db=oncemall_$svc
    user="'$db'@'%'"
    # In GRANT, _ in a database name is a wildcard for any character:
    # escaped, the grant names this database and no look-alike.
    grant_db=$(printf '%s' "$db" | sed 's/_/\\_/g')
    cat <<SQL
CREATE DATABASE IF NOT EXISTS \`$db\` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci;
CREATE USER IF NOT EXISTS $user IDENTIFIED BY $(oncemall_sql_string "$pw");
ALTER USER $user IDENTIFIED BY $(oncemall_sql_string "$pw");
GRANT ALL PRIVILEGES ON \`$grant_db\`.* TO $user;
SQL
  done
}

if command -v docker_process_sql >/dev/null 2>&1; then
  oncemall_service_users_sql | docker_process_sql
else
  oncemall_service_users_sql
fi
