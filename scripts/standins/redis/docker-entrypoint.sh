#!/bin/sh
# The entrypoint of the redis:7.0-bookworm stand-in: as the official
# image's, arguments that start with - or name a .conf file are
# redis-server's, and redis-server started as root runs as the redis user
# with /data its own.
set -e
case "$1" in
  -*|*.conf) set -- redis-server "$@" ;;
esac
if [ "$1" = redis-server ] && [ "$(id -u)" = 0 ]; then
  chown -R redis:redis /data 2>/dev/null || true
  exec setpriv --reuid=redis --regid=redis --init-groups "$0" "$@"
fi
exec "$@"
