// Package faultproxy is a MySQL-protocol-aware TCP proxy that reproduces the
// lost COMMIT acknowledgement of incident 1 on a real network path.
//
// It forwards every byte both ways unchanged. On the client-to-server side it
// follows the packet framing (3-byte length, 1-byte sequence id, payloads of
// 0xFFFFFF bytes continued by the next packet, packets split across TCP reads
// or several in one read) far enough to recognise a COM_QUERY whose statement
// is COMMIT (any case, leading whitespace and comments skipped, "COMMIT",
// "COMMIT WORK", "COMMIT AND NO CHAIN"...). go-sql-driver/mysql's Tx.Commit,
// and so gorm's, sends exactly such a COM_QUERY "COMMIT".
//
// When armed (Arm(n), or POST /arm {"drop_commit_acks": n} on the admin API),
// each of the next n COMMITs, across all connections, is forwarded to the
// server; the proxy then waits for the server's reply, discards it and closes
// both the client and the upstream connection. The server has committed; the
// client's driver sees the connection end while waiting for the reply and
// reports an error (go-sql-driver: "invalid connection"). That is the
// "committed, but the caller thinks it failed" state the incident is about.
//
// Arming with a match (ArmMatching, or "match" in the /arm body) restricts
// the drops to COMMITs of transactions that sent a statement containing that
// text, a table name for instance, so background commits of the same service
// (relay, cron jobs) neither take the drop nor lose their acknowledgement.
//
// Cut makes the database unreachable for every client of the proxy until
// Heal (POST /cut {"mode": "refuse"|"blackhole"}, POST /heal): the open
// sessions are closed both ways, and new connections are closed at once
// (Refuse: a server that is down) or accepted and never answered
// (Blackhole: a lost route). It is the outage of docs/benchmarks/e2e.md,
// in front of every service's database, never the shared server itself.
//
// Limits, by design:
//   - TLS and protocol compression are not supported. A connection that asks
//     for either in its handshake is forwarded untouched, its COMMITs unseen
//     (counted in Stats.OpaqueConnections). go-sql-driver uses neither unless
//     the DSN says tls=... or compress=true; the project's DSNs do not.
//   - Only COMMIT statements are recognised: not a COMMIT inside a
//     multi-statement string after another statement, not a prepared COMMIT,
//     not autocommit statements, not XA COMMIT.
//   - The decision to drop is taken when the COMMIT is seen, so an armed
//     COMMIT that the server refuses still uses up one drop
//     (Stats.ErrorRepliesDropped).
//   - Clients are assumed not to pipeline commands, which MySQL clients do
//     not do.
//
// # Use
//
// The program is scripts/tools/faultproxy (listens on :3307, forwards to
// 127.0.0.1:3306, admin API on :8091). Under `make run` (scripts/run.sh),
// and in docker compose with `--profile lab` and
// COUPON_MYSQL_ADDR=faultproxy:3307, the coupon service's MYSQL_ADDR points
// at it.
// Nothing arms that proxy on its own: it passes everything through until
// someone arms it through the admin API, to lose the acknowledgement of a
// COMMIT of the running stack by hand:
//
//	curl -X POST -H "Authorization: Bearer $ADMIN_TOKEN" \
//	     -d '{"drop_commit_acks": 1, "match": "coupon_deduction"}' http://localhost:8091/arm
//	curl -H "Authorization: Bearer $ADMIN_TOKEN" http://localhost:8091/stats
//
// The lab (`make lab`, services/coupon/lab) and the tests do not use that
// proxy: each scenario starts its own in process, on a free port, in front of
// its throwaway database, and arms it with Arm:
//
//	cfg := faultproxy.DefaultConfig()
//	cfg.Addr, cfg.Upstream = "127.0.0.1:0", mysqlAddr
//	p, err := faultproxy.New(cfg, log, prometheus.NewRegistry())
//	addr, err := p.Listen()
//	defer p.Close()
//	// point database.Config.Addr at addr.String(), then:
//	p.Arm(1)
//
// For a fault inside one process without a network hop, pkg/lab/fault wraps the
// database/sql driver instead.
package faultproxy
