package smoke_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/natsjs"
	"github.com/oncemall/oncemall/pkg/testkit/composecheck"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

// TestCIRunLooksWhereTheTestsWill runs .ci/run with MYSQL_ADDR, REDIS_ADDR
// and NATS_URL pointing at forwarders of the test's own, and with what it
// would run (start-stop-daemon, redis-server, make) replaced by stubs that
// record their arguments. MySQL and NATS answer there; Redis does not until
// its start command has run. .ci/run must start Redis and nothing else,
// wait for it at REDIS_ADDR, then build the tools and run make check, make
// test, make test-nats, make compose-test and make template-test. Checking the default ports
// instead, where the shared servers answer, it would start nothing.
func TestCIRunLooksWhereTheTestsWill(t *testing.T) {
	env := testenv.Config(t)
	mysql := testenv.NewForwarder(t, env.MySQL.Addr)
	natsAddr, err := natsjs.FirstServerAddr(env.NATS.URL)
	testenv.Must(t, err)
	nats := testenv.NewForwarder(t, natsAddr)
	redis := testenv.NewForwarder(t, env.Redis.Addr)
	redis.Close()

	stubs := t.TempDir()
	calls := filepath.Join(stubs, "calls")
	for _, name := range []string{"start-stop-daemon", "redis-server", "make"} {
		script := "#!/usr/bin/env bash\n{ printf '%s' \"${0##*/}\"; printf ' %q' \"$@\"; echo; } >> " + calls + "\n"
		testenv.Must(t, os.WriteFile(filepath.Join(stubs, name), []byte(script), 0o755))
	}
	cmd := exec.Command("bash", filepath.Join(composecheck.RepoRoot(t), ".ci", "run"))
	cmd.Env = append(os.Environ(),
		"PATH="+stubs+string(os.PathListSeparator)+os.Getenv("PATH"),
		"MYSQL_ADDR="+mysql.Addr(), "REDIS_ADDR="+redis.Addr(), "NATS_URL=nats://"+nats.Addr())
	// out is written by exec's copying goroutine while a failing test reads
	// it; cmd.ProcessState is written by Wait. So the test reads out through
	// a lock, and learns that .ci/run ended from done, closed after Wait has
	// returned and set runErr, never from ProcessState.
	var out testenv.SyncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	testenv.Must(t, cmd.Start())
	var runErr error
	done := make(chan struct{})
	go func() { runErr = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		select {
		case <-done:
		default:
			_ = cmd.Process.Kill()
			<-done
		}
	})

	recorded := func() []string {
		b, _ := os.ReadFile(calls)
		return strings.Split(strings.TrimSpace(string(b)), "\n")
	}
	// Redis comes up once its start command has run, as the real one would.
	exited := false
	deadline := time.After(30 * time.Second)
	for !exited && !strings.HasPrefix(recorded()[0], "redis-server ") {
		select {
		case <-done:
			exited = true
		case <-deadline:
			t.Fatalf(".ci/run neither started Redis nor ended in 30s; output:\n%s", out.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	redis.Reopen()
	if !exited {
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			t.Fatalf(".ci/run did not end 60s after Redis came up; output:\n%s", out.String())
		}
	}
	got := recorded()
	if runErr != nil || strings.Join(got[1:], "; ") != "make tools; make check; make test; make test-nats; make compose-test; make template-test" || !strings.HasPrefix(got[0], "redis-server ") {
		t.Fatalf(".ci/run: %v, ran %q; want redis-server started, then make tools (Jaeger, for scripts/tests/observe), make check, make test, make test-nats, make compose-test, then make template-test; output:\n%s", runErr, got, out.String())
	}
}
