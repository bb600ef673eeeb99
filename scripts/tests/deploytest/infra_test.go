package deploytest

import (
	"context"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"

	"github.com/oncemall/oncemall/pkg/testkit/composecheck"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

// project loads docker-compose.yml as `docker compose` would with env as
// the whole environment.
func project(t *testing.T, env map[string]string) *types.Project {
	t.Helper()
	root := composecheck.RepoRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := loader.LoadWithContext(ctx, types.ConfigDetails{
		WorkingDir:  root,
		ConfigFiles: []types.ConfigFile{{Filename: filepath.Join(root, "docker-compose.yml")}},
		Environment: env,
	}, func(o *loader.Options) { o.SetProjectName("oncemall", true) })
	testenv.Must(t, err)
	return p
}

func composeEnv(t *testing.T, p *types.Project, service, name string) string {
	t.Helper()
	s, err := p.GetService(service)
	testenv.Must(t, err)
	if v := s.Environment[name]; v != nil {
		return *v
	}
	return ""
}

func published(t *testing.T, p *types.Project, service string) string {
	t.Helper()
	s, err := p.GetService(service)
	testenv.Must(t, err)
	return s.Ports[0].HostIP + ":" + s.Ports[0].Published
}

// script runs a repository script with bash and only the environment env
// (and PATH), returning its output.
func script(t *testing.T, env map[string]string, args ...string) string {
	t.Helper()
	cmd := exec.Command("bash", args...)
	cmd.Dir = composecheck.RepoRoot(t)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("bash %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

var mkAssignment = regexp.MustCompile(`(?m)^([A-Z][A-Z0-9_]*) \?= (.*)$`)

// TestInfraSelectsWhatComposeStarts: what make infra writes for make test,
// lab, run and bench names the addresses compose publishes and the
// passwords compose gives its servers, with the defaults and with the ports
// and passwords moved the way the README says.
func TestInfraSelectsWhatComposeStarts(t *testing.T) {
	for name, env := range map[string]map[string]string{
		"defaults": {},
		"moved": {
			"MYSQL_PORT": "3316", "REDIS_PORT": "6390", "NATS_PORT": "4232",
			"MYSQL_ROOT_PASSWORD": "root-pw", "REDIS_PASSWORD": "redis-pw", "NATS_ADMIN_PASSWORD": "admin-pw",
			"MYSQL_ORDER_PASSWORD": "order-pw", "NATS_PAYMENT_PASSWORD": "payment-pw",
		},
	} {
		t.Run(name, func(t *testing.T) {
			p := project(t, env)
			got := map[string]string{}
			for _, m := range mkAssignment.FindAllStringSubmatch(script(t, env, "scripts/infra.sh", "env"), -1) {
				got[m[1]] = m[2]
			}
			nats, err := url.Parse(got["NATS_URL"])
			testenv.Must(t, err)
			pw, _ := nats.User.Password()
			for _, c := range []struct{ what, got, want string }{
				{"MYSQL_ADDR", got["MYSQL_ADDR"], published(t, p, "mysql")},
				{"MYSQL_PASSWORD", got["MYSQL_PASSWORD"], composeEnv(t, p, "mysql", "MYSQL_ROOT_PASSWORD")},
				{"REDIS_ADDR", got["REDIS_ADDR"], published(t, p, "redis")},
				{"REDIS_PASSWORD", got["REDIS_PASSWORD"], composeEnv(t, p, "redis", "REDISCLI_AUTH")},
				{"NATS_URL's server", nats.Host, published(t, p, "nats")},
				{"NATS_URL's user", nats.User.Username() + ":" + pw, "admin:" + composeEnv(t, p, "nats", "NATS_ADMIN_PASSWORD")},
				{"RUN_NATS_ADDR", got["RUN_NATS_ADDR"], published(t, p, "nats")},
				{"RUN_REDIS_ADDR", got["RUN_REDIS_ADDR"], published(t, p, "redis")},
				{"RUN_INFRA", got["RUN_INFRA"], "docker"},
			} {
				if c.got != c.want {
					t.Errorf("%s: make infra selects %q, compose has %q", c.what, c.got, c.want)
				}
			}
			for _, v := range []string{"MYSQL_ORDER_PASSWORD", "NATS_PAYMENT_PASSWORD"} {
				if env[v] != "" && got[v] != env[v] {
					t.Errorf("%s=%s given to make infra is not kept for make run: %q", v, env[v], got[v])
				}
			}
		})
	}
}

// TestMakeUsesTheInfraSelection: with the file make infra writes, every
// recipe of the Makefile sees its variables; a variable of the
// environment still wins; without the file nothing is set, and the tools
// use the local servers' defaults.
func TestMakeUsesTheInfraSelection(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatal("make is not installed")
	}
	root := composecheck.RepoRoot(t)
	dir := t.TempDir()
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	testenv.Must(t, err)
	testenv.Must(t, os.WriteFile(filepath.Join(dir, "Makefile"), makefile, 0o644))
	// A target of the test's that prints what a recipe sees.
	probe := "show:\n\t@echo \"$$MYSQL_ADDR|$$MYSQL_PASSWORD|$$NATS_URL|$$RUN_INFRA\"\n"
	testenv.Must(t, os.WriteFile(filepath.Join(dir, "probe.mk"), []byte(probe), 0o644))
	show := func(env ...string) string {
		t.Helper()
		cmd := exec.Command("make", "-s", "-f", "Makefile", "-f", "probe.mk", "show")
		cmd.Dir = dir
		cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("make show: %v\n%s", err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if got := show(); got != "|||" {
		t.Fatalf("without make infra, recipes see %q; want nothing set", got)
	}
	testenv.Must(t, os.WriteFile(filepath.Join(dir, ".infra.mk"), []byte(script(t, map[string]string{"MYSQL_ROOT_PASSWORD": "a$b#c"}, "scripts/infra.sh", "env")), 0o644))
	if got, want := show(), "127.0.0.1:3306|a$b#c|nats://admin:dev-nats-admin-password@127.0.0.1:4222|docker"; got != want {
		t.Fatalf("after make infra, recipes see %q; want %q", got, want)
	}
	if got := show("MYSQL_ADDR=127.0.0.1:3999"); !strings.HasPrefix(got, "127.0.0.1:3999|") {
		t.Fatalf("MYSQL_ADDR of the environment lost to .infra.mk: %q", got)
	}
}

// TestRunScriptLogsInAsCompose: make run gives each service the
// credentials compose gives it (its own MySQL and NATS users, the Redis
// password), with the same development defaults, on make run's own NATS
// and Redis unless make infra selected the containers.
func TestRunScriptLogsInAsCompose(t *testing.T) {
	root := composecheck.RepoRoot(t)
	src, err := os.ReadFile(filepath.Join(root, "scripts", "run.sh"))
	testenv.Must(t, err)
	body := string(src)
	// The script up to main's case statement defines functions and
	// variables only.
	end := strings.Index(body, "\ncase \"${1:-start}\" in")
	if end < 0 {
		t.Fatal("scripts/run.sh has no case \"${1:-start}\" in")
	}
	p := project(t, nil)
	for _, infra := range []string{"local", "docker"} {
		env := map[string]string{}
		if infra == "docker" {
			env = map[string]string{"RUN_INFRA": "docker", "RUN_NATS_ADDR": "127.0.0.1:4222", "RUN_REDIS_ADDR": "127.0.0.1:6379"}
		}
		for _, svc := range []string{"order", "coupon", "payment"} {
			out := script(t, env, "-c", body[:end]+"\nservice_env "+svc+"\n", "scripts/run.sh")
			got := map[string]string{}
			for _, w := range strings.Fields(out) {
				k, v, _ := strings.Cut(w, "=")
				got[k] = v
			}
			natsAddr := map[string]string{"local": "127.0.0.1:4223", "docker": "127.0.0.1:4222"}[infra]
			redisAddr := map[string]string{"local": "127.0.0.1:6380", "docker": "127.0.0.1:6379"}[infra]
			u, err := url.Parse(got["NATS_URL"])
			testenv.Must(t, err)
			pw, _ := u.User.Password()
			want := map[string]string{
				"MYSQL_USER":     composeEnv(t, p, svc, "MYSQL_USER"),
				"MYSQL_PASSWORD": composeEnv(t, p, svc, "MYSQL_PASSWORD"),
				"REDIS_PASSWORD": composeEnv(t, p, svc, "REDIS_PASSWORD"),
				"REDIS_ADDR":     redisAddr,
			}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s, %s: %s=%q, want %q (compose's)", infra, svc, k, got[k], v)
				}
			}
			cu, err := url.Parse(composeEnv(t, p, svc, "NATS_URL"))
			testenv.Must(t, err)
			cpw, _ := cu.User.Password()
			if u.User.Username() != cu.User.Username() || pw != cpw || u.Host != natsAddr {
				t.Errorf("%s, %s: NATS_URL %s, want the user and password of compose's %s at %s", infra, svc, got["NATS_URL"], cu.Redacted(), natsAddr)
			}
		}
	}
}

// TestAnswersNeedsNoGNUTimeout: the probe preflight, .ci/run and make run
// use works where there is no timeout command (macOS): with a PATH
// holding nothing but sleep, it finds a listening port and a closed one.
func TestAnswersNeedsNoGNUTimeout(t *testing.T) {
	bash, err := exec.LookPath("bash")
	testenv.Must(t, err)
	sleep, err := exec.LookPath("sleep")
	testenv.Must(t, err)
	bin := t.TempDir()
	testenv.Must(t, os.Symlink(sleep, filepath.Join(bin, "sleep")))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	testenv.Must(t, err)
	defer ln.Close()
	closed := testenv.FreeAddr(t)
	depaddrs := filepath.Join(composecheck.RepoRoot(t), "scripts", "depaddrs.sh")
	for addr, want := range map[string]bool{ln.Addr().String(): true, closed: false} {
		cmd := exec.Command(bash, "-c", `source "$1" && answers "$2"`, "bash", depaddrs, addr)
		cmd.Env = []string{"PATH=" + bin}
		began := time.Now()
		err := cmd.Run()
		if got := err == nil; got != want {
			t.Errorf("answers %s = %v (%v), want %v", addr, got, err, want)
		}
		if d := time.Since(began); d > 3*time.Second {
			t.Errorf("answers %s took %s, beyond its 2s bound", addr, d)
		}
	}
}

// TestPreflightNamesDockerAndLocalCommands: a server that does not answer
// is named with the Docker command and the Debian and macOS ones; after
// make infra, with the command that brings the containers back.
func TestPreflightNamesDockerAndLocalCommands(t *testing.T) {
	closed := testenv.FreeAddr(t)
	run := func(env ...string) string {
		cmd := exec.Command("bash", filepath.Join(composecheck.RepoRoot(t), "scripts", "preflight.sh"))
		cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "MYSQL_ADDR=" + closed}, env...)
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Fatalf("preflight passed with nothing at %s", closed)
		}
		return string(out)
	}
	out := run()
	for _, want := range []string{"MariaDB/MySQL is not reachable at " + closed, "make infra", "start-stop-daemon", "brew services start mariadb"} {
		if !strings.Contains(out, want) {
			t.Errorf("preflight's hint lacks %q:\n%s", want, out)
		}
	}
	if out := run("RUN_INFRA=docker"); !strings.Contains(out, "start them again with 'make infra'") || strings.Contains(out, "brew") {
		t.Errorf("after make infra, preflight's hint is:\n%s", out)
	}
	if slices.Contains(strings.Fields(out), "timeout") {
		t.Errorf("preflight mentions timeout:\n%s", out)
	}
}
