package deploytest

import (
	"context"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/redisclient"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

// TestRedisOfComposeRequiresItsPassword runs redis-server with the
// arguments compose gives the redis service (read by the Compose loader),
// on a free port of the test's: a client without the password is refused,
// the services' client with their REDIS_PASSWORD works, and the
// healthcheck's command answers only with its password.
func TestRedisOfComposeRequiresItsPassword(t *testing.T) {
	server, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal("redis-server is not installed (the shared Redis is Debian's redis-server)")
	}
	p := project(t, nil)
	redis, err := p.GetService("redis")
	testenv.Must(t, err)
	if len(redis.Command) == 0 || redis.Command[0] != "redis-server" {
		t.Fatalf("compose's redis command is %q, want redis-server and its arguments", redis.Command)
	}
	host, port, err := net.SplitHostPort(testenv.FreeAddr(t))
	testenv.Must(t, err)
	args := append(redis.Command[1:], "--bind", host, "--port", port, "--dir", t.TempDir())
	cmd := exec.Command(server, args...)
	testenv.Must(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := net.JoinHostPort(host, port)
	testenv.WaitFor(t, 10*time.Second, "redis-server to answer at "+addr, func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	anonymous := redisclient.New(redisclient.Config{Addr: addr})
	defer anonymous.Close()
	if err := anonymous.Set(ctx, "deploytest", "x", time.Minute).Err(); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Fatalf("a client without the password: %v, want NOAUTH", err)
	}
	for _, svc := range []string{"order", "coupon", "payment"} {
		c := redisclient.New(redisclient.Config{Addr: addr, Password: composeEnv(t, p, svc, "REDIS_PASSWORD")})
		if err := c.Set(ctx, "deploytest:"+svc, "x", time.Minute).Err(); err != nil {
			t.Errorf("%s's REDIS_PASSWORD: %v", svc, err)
		}
		c.Close()
	}

	// The healthcheck, as the container runs it (redis-cli reads its
	// password from REDISCLI_AUTH).
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Fatal("redis-cli is not installed")
	}
	test := redis.HealthCheck.Test
	if len(test) != 2 || test[0] != "CMD-SHELL" {
		t.Fatalf("compose's redis healthcheck is %q, want CMD-SHELL and a command", test)
	}
	probe := strings.Replace(test[1], "redis-cli ", "redis-cli -h "+host+" -p "+port+" ", 1)
	for auth, want := range map[string]bool{composeEnv(t, p, "redis", "REDISCLI_AUTH"): true, "": false} {
		sh := exec.Command("sh", "-c", probe)
		sh.Env = append(os.Environ(), "REDISCLI_AUTH="+auth)
		if got := sh.Run() == nil; got != want {
			t.Errorf("the healthcheck with REDISCLI_AUTH=%q passes: %v, want %v", auth, got, want)
		}
	}
}
