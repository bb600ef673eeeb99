package smoke_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/scripts/tests/proctest"
)

var services = []string{"order", "coupon", "payment"}

func TestMain(m *testing.M) { proctest.Main(m) }

// binary builds cmd/<svc> once per test run and returns its path.
func binary(t *testing.T, svc string) string {
	return proctest.Build(t, "services/"+svc+"/cmd/"+svc)
}

type process struct{ *proctest.Process }

// start runs svc with its own throwaway database, a free port and env
// applied on top of the test's environment.
func start(t *testing.T, svc string, env ...string) process {
	t.Helper()
	_, db := testenv.NewDatabase(t)
	addr := testenv.FreeAddr(t)
	return process{proctest.Start(t, svc, binary(t, svc), addr,
		append([]string{"HTTP_ADDR=" + addr, "MYSQL_DATABASE=" + db, "STARTUP_TIMEOUT=30s", "SHUTDOWN_TIMEOUT=10s"}, env...)...)}
}

// waitStatus polls path until it answers want, the process exits, or 60s pass.
func (p process) waitStatus(t *testing.T, path string, want int) string {
	t.Helper()
	return p.WaitStatus(t, path, want, 60*time.Second)
}

// stop sends SIGTERM and asserts a clean exit with the shutdown logged.
func (p process) stop(t *testing.T) {
	t.Helper()
	p.Stop(t, 30*time.Second)
	if !strings.Contains(p.Stdout(), `"msg":"shutdown complete"`) {
		t.Fatal(`no "shutdown complete" log line`)
	}
}

func TestServicesStartReadyAndStopCleanly(t *testing.T) {
	for _, svc := range services {
		t.Run(svc, func(t *testing.T) {
			t.Parallel()
			p := start(t, svc)
			p.waitStatus(t, "/readyz", http.StatusOK)
			p.waitStatus(t, "/healthz", http.StatusOK)
			p.stop(t)
		})
	}
}

// TestBadConfigExitsNamingTheVariable also bounds how long the exit takes: a
// bad value must not be retried as an unreachable dependency until
// STARTUP_TIMEOUT (60s by default) before it is reported.
func TestBadConfigExitsNamingTheVariable(t *testing.T) {
	for _, env := range []string{
		"HTTP_ADDR=:abc", "MYSQL_MAX_OPEN_CONNS=x", "SHUTDOWN_TIMEOUT=soon",
		"NATS_URL=not a url", "MYSQL_DATABASE=bad`name",
	} {
		name, _, _ := strings.Cut(env, "=")
		t.Run(name, func(t *testing.T) {
			if stderr := failFast(t, env); !strings.Contains(stderr, name) {
				t.Fatalf("%s: stderr does not name %s:\n%s", env, name, stderr)
			}
		})
	}
}

// TestRefusedCredentialsExitAtOnce: MySQL refusing the user does not heal,
// so the service exits with the server's answer instead of retrying until
// STARTUP_TIMEOUT as it does while MySQL is unreachable.
func TestRefusedCredentialsExitAtOnce(t *testing.T) {
	stderr := failFast(t, "HTTP_ADDR="+testenv.FreeAddr(t), "MYSQL_USER=t_no_such_user", "STARTUP_TIMEOUT=60s")
	if !strings.Contains(stderr, "Access denied") {
		t.Fatalf("stderr does not give the server's answer:\n%s", stderr)
	}
}

// failFast runs the order binary with env added, requires it to exit
// non-zero within 10 s (not after STARTUP_TIMEOUT of retries) and returns
// its stderr.
func failFast(t *testing.T, env ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary(t, "order"))
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	began := time.Now()
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Fatalf("%v: exit %v, want a non-zero status", env, err)
	}
	if took := time.Since(began); took > 10*time.Second {
		t.Fatalf("%v: exit after %s, want it at once", env, took)
	}
	return stderr.String()
}

func TestDeadRedisMakesReadyzNameRedis(t *testing.T) {
	p := start(t, "coupon", "REDIS_ADDR="+testenv.FreeAddr(t))
	body := p.waitStatus(t, "/readyz", http.StatusServiceUnavailable)
	if !strings.Contains(body, "redis") || strings.Contains(body, `"mysql"`) || strings.Contains(body, `"nats"`) {
		t.Fatalf("/readyz body %s, want redis (only) named", body)
	}
	p.waitStatus(t, "/healthz", http.StatusOK)
	p.stop(t)
}

// TestRedisStoppedWhileRunningFlipsReadyz: Redis going away under a running
// service turns /readyz 503 naming Redis (and only Redis), and its return
// turns it 200 again without a restart. The forwarder stands in for
// Redis, so the shared server keeps running.
func TestRedisStoppedWhileRunningFlipsReadyz(t *testing.T) {
	redis := testenv.NewForwarder(t, testenv.Config(t).Redis.Addr)
	p := start(t, "coupon", "REDIS_ADDR="+redis.Addr())
	p.waitStatus(t, "/readyz", http.StatusOK)

	redis.Close()
	body := p.waitStatus(t, "/readyz", http.StatusServiceUnavailable)
	if !strings.Contains(body, "redis") || strings.Contains(body, `"mysql"`) || strings.Contains(body, `"nats"`) {
		t.Fatalf("/readyz body %s, want redis (only) named", body)
	}
	p.waitStatus(t, "/healthz", http.StatusOK)

	redis.Reopen()
	p.waitStatus(t, "/readyz", http.StatusOK)
	p.stop(t)
}

func TestUnknownCommandFails(t *testing.T) {
	out, err := exec.Command(binary(t, "payment"), "frobnicate").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "frobnicate") {
		t.Fatalf("unknown command: %v %s", err, out)
	}
}

func TestMigrateCommand(t *testing.T) {
	_, db := testenv.NewDatabase(t)
	cmd := exec.Command(binary(t, "payment"), "migrate")
	cmd.Env = append(os.Environ(), "MYSQL_DATABASE="+db)
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "migrations applied") {
		t.Fatalf("payment migrate: %v\n%s", err, out)
	}
}
