package main

import (
	"testing"

	"github.com/oncemall/oncemall/pkg/testkit/outboxtest"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

// TestOutboxOperatorPaths runs `payment outbox stats|redrive` and then the
// whole service as `payment` would (own database, stream and Redis prefix),
// checking that its engine serves the outbox redrive behind the admin token.
func TestOutboxOperatorPaths(t *testing.T) {
	mysqlCfg, dbName := testenv.NewDatabase(t)
	conn := testenv.NATS(t)
	_, redisPrefix := testenv.Redis(t)
	paymentStream := testenv.UniqueName(t, "PAYMENT")
	testenv.DeleteStreamAtCleanup(t, conn.JS, paymentStream)
	addr, token := testenv.FreeAddr(t), "admin-"+testenv.RandomSuffix(12)
	for k, v := range map[string]string{
		"MYSQL_ADDR": mysqlCfg.Addr, "MYSQL_DATABASE": dbName, "HTTP_ADDR": addr, "ADMIN_TOKEN": token,
		"PAYMENT_STREAM": paymentStream, "EVENT_SUBJECT_PREFIX": testenv.UniqueName(t, "e") + ".",
		"IDEMPOTENCY_REDIS_PREFIX": redisPrefix + "idem:",
	} {
		t.Setenv(k, v)
	}
	outboxtest.CheckOperatorPaths(t, outboxtest.Service{Run: run, Addr: addr, AdminToken: token, MySQL: mysqlCfg, DBName: dbName})
}
