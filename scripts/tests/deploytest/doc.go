// Package deploytest proves the files in deploy/ against the real servers,
// since no Docker engine runs where the tests do: deploy/nats.conf is
// loaded by the nats-server version docker-compose.yml pins (in process,
// on a free port with a store of its own), deploy/mysql-init by the local
// MariaDB under throwaway names, and the Redis password by a redis-server
// the test starts; and the scripts that choose the servers (make infra's
// scripts/infra.sh, make run's scripts/run.sh, preflight) against
// docker-compose.yml, read by the Compose loader. docs/security.md says
// which test proves which promise.
package deploytest
