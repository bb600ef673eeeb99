package lab

import (
	"testing"

	pkglab "github.com/oncemall/oncemall/pkg/lab"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

// labEnv returns a lab environment on the test's dependencies, its names
// unique to the test.
func labEnv(t testing.TB) pkglab.Env {
	t.Helper()
	cfg := testenv.Config(t)
	return pkglab.Env{MySQL: cfg.MySQL, NATS: cfg.NATS, Redis: cfg.Redis, Log: testenv.Logger(t), Prefix: testenv.UniqueName(t, "lab")}
}
