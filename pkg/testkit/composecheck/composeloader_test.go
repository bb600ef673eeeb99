package composecheck_test

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"

	"github.com/oncemall/oncemall/pkg/testkit/composecheck"
)

// loadProject loads root/docker-compose.yml with the Compose loader itself,
// as `docker compose` does: the schema, interpolation from env (and nothing
// else: not the machine's environment, not a .env file), merge keys and
// normalisation.
func loadProject(t *testing.T, root string, env map[string]string) (*types.Project, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return loader.LoadWithContext(ctx, types.ConfigDetails{
		WorkingDir:  root,
		ConfigFiles: []types.ConfigFile{{Filename: filepath.Join(root, "docker-compose.yml")}},
		Environment: env,
	}, func(o *loader.Options) { o.SetProjectName("oncemall", true) })
}

func mustProject(t *testing.T, env map[string]string) *types.Project {
	t.Helper()
	p, err := loadProject(t, composecheck.RepoRoot(t), env)
	if err != nil {
		t.Fatalf("docker compose would refuse docker-compose.yml: %v", err)
	}
	return p
}

// mustProfile loads the repository's file as `docker compose --profile
// profile` does, with env.
func mustProfile(t *testing.T, profile string, env map[string]string) *types.Project {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	root := composecheck.RepoRoot(t)
	p, err := loader.LoadWithContext(ctx, types.ConfigDetails{
		WorkingDir:  root,
		ConfigFiles: []types.ConfigFile{{Filename: filepath.Join(root, "docker-compose.yml")}},
		Environment: env,
	}, func(o *loader.Options) { o.SetProjectName("oncemall", true) }, loader.WithProfiles([]string{profile}))
	if err != nil {
		t.Fatalf("docker compose --profile %s would refuse docker-compose.yml: %v", profile, err)
	}
	return p
}

func service(t *testing.T, p *types.Project, name string) types.ServiceConfig {
	t.Helper()
	s, err := p.GetService(name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func env(s types.ServiceConfig, name string) string {
	if v := s.Environment[name]; v != nil {
		return *v
	}
	return ""
}

// TestComposeLoaderAcceptsTheRepositoryFile: the file passes Compose's own
// schema and interpolation, with nothing set and with every knob the
// README names turned; each port is on 127.0.0.1 and moves with its
// variable; the default database server is the MariaDB the tests run.
func TestComposeLoaderAcceptsTheRepositoryFile(t *testing.T) {
	p := mustProject(t, nil)
	for _, s := range p.Services {
		for _, port := range s.Ports {
			if port.HostIP != "127.0.0.1" {
				t.Errorf("%s publishes %s on %q, want 127.0.0.1", s.Name, port.Published, port.HostIP)
			}
		}
		if s.Restart != "unless-stopped" {
			t.Errorf("%s: restart %q", s.Name, s.Restart)
		}
		if timeout := env(s, "SHUTDOWN_TIMEOUT"); timeout != "" {
			d, err := time.ParseDuration(timeout)
			if err != nil || s.StopGracePeriod == nil || time.Duration(*s.StopGracePeriod) <= d {
				t.Errorf("%s: stop_grace_period %v is not longer than SHUTDOWN_TIMEOUT %s", s.Name, s.StopGracePeriod, timeout)
			}
		}
	}
	if img := service(t, p, "mysql").Image; img != "mariadb:10.11" {
		t.Errorf("the default database image is %q, want mariadb:10.11, the server the tests run", img)
	}

	moved := mustProject(t, map[string]string{"DB_IMAGE": "mysql:8.4", "MYSQL_PORT": "3316", "ORDER_PORT": "18081", "NATS_PORT": "14222"})
	if img := service(t, moved, "mysql").Image; img != "mysql:8.4" {
		t.Errorf("DB_IMAGE=mysql:8.4 gives the image %q", img)
	}
	for name, want := range map[string]string{"mysql": "3316", "order": "18081", "nats": "14222", "redis": "6379"} {
		s := service(t, moved, name)
		if len(s.Ports) == 0 || s.Ports[0].Published != want || s.Ports[0].HostIP != "127.0.0.1" {
			t.Errorf("%s is published as %+v, want 127.0.0.1:%s", name, s.Ports, want)
		}
	}
}

// TestComposeCredentialsMatchOnBothSides: each service logs in to MySQL as
// its own user with the password the database's init is given, to NATS as
// its own user with the password the NATS server is given, and to Redis
// with the password Redis requires; with the defaults and with every
// password changed through its variable, as a deployment does.
func TestComposeCredentialsMatchOnBothSides(t *testing.T) {
	changed := map[string]string{"REDIS_PASSWORD": "r-changed"}
	for _, svc := range []string{"ORDER", "COUPON", "PAYMENT"} {
		changed["MYSQL_"+svc+"_PASSWORD"] = "m-changed-" + svc
		changed["NATS_"+svc+"_PASSWORD"] = "n-changed-" + svc
	}
	for name, vars := range map[string]map[string]string{"defaults": nil, "changed": changed} {
		t.Run(name, func(t *testing.T) {
			p := mustProject(t, vars)
			mysql, nats, redis := service(t, p, "mysql"), service(t, p, "nats"), service(t, p, "redis")
			requirepass := ""
			if i := slices.Index(redis.Command, "--requirepass"); i >= 0 && i+1 < len(redis.Command) {
				requirepass = redis.Command[i+1]
			}
			if requirepass == "" || env(redis, "REDISCLI_AUTH") != requirepass {
				t.Errorf("redis: --requirepass %q, healthcheck password %q", requirepass, env(redis, "REDISCLI_AUTH"))
			}
			for _, svc := range []string{"order", "coupon", "payment"} {
				s := service(t, p, svc)
				upper := strings.ToUpper(svc)
				if got := env(s, "MYSQL_USER"); got != "oncemall_"+svc {
					t.Errorf("%s: MYSQL_USER=%q, want oncemall_%s (deploy/mysql-init)", svc, got, svc)
				}
				if got, want := env(s, "MYSQL_PASSWORD"), env(mysql, "MYSQL_"+upper+"_PASSWORD"); got == "" || got != want {
					t.Errorf("%s: MYSQL_PASSWORD=%q, the database creates its user with %q", svc, got, want)
				}
				u, err := url.Parse(env(s, "NATS_URL"))
				if err != nil {
					t.Fatalf("%s: NATS_URL: %v", svc, err)
				}
				pw, _ := u.User.Password()
				if u.User.Username() != svc || pw == "" || pw != env(nats, "NATS_"+upper+"_PASSWORD") {
					t.Errorf("%s: NATS user %q password %q, the server has %q for user %s", svc, u.User.Username(), pw, env(nats, "NATS_"+upper+"_PASSWORD"), svc)
				}
				if got := env(s, "REDIS_PASSWORD"); got != requirepass {
					t.Errorf("%s: REDIS_PASSWORD=%q, Redis requires %q", svc, got, requirepass)
				}
				if vars != nil && !strings.Contains(env(s, "MYSQL_PASSWORD"), "changed") {
					t.Errorf("%s: MYSQL_%s_PASSWORD does not reach the service", svc, upper)
				}
			}
		})
	}
}

// TestComposeLoaderRefusesWhatComposeWould shows the loader is the real
// judge: a misspelt key fails the schema and a broken ${…} fails
// interpolation, though both are valid YAML that the checks of this package
// would read without complaint.
func TestComposeLoaderRefusesWhatComposeWould(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(composecheck.RepoRoot(t), "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for name, edit := range map[string][2]string{
		"a misspelt key":        {"    restart: unless-stopped\n", "    restrat: unless-stopped\n"},
		"a broken ${…}":         {"${MYSQL_PORT:-3306}", "${MYSQL_PORT:-3306"},
		"a duration that isn't": {"stop_grace_period: 20s", "stop_grace_period: twenty"},
	} {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			text := strings.Replace(string(src), edit[0], edit[1], 1)
			if text == string(src) {
				t.Fatalf("docker-compose.yml has no %q to change", edit[0])
			}
			if err := os.WriteFile(filepath.Join(root, "docker-compose.yml"), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := loadProject(t, root, nil); err == nil {
				t.Fatalf("the loader accepted a file with %s", name)
			}
		})
	}
}

// TestObservabilityProfile: Jaeger, Prometheus and Grafana start only with
// `--profile observability`, nothing outside the profile depends on them,
// their ports are on 127.0.0.1, and the services' (and the simulator's)
// spans go to the profile's Jaeger once TRACING_EXPORTER=otlp is exported:
// the endpoint names the jaeger service on the port its receiver listens
// on, and without the variable tracing stays off, so the same file works
// with and without the profile.
func TestObservabilityProfile(t *testing.T) {
	observability := []string{"jaeger", "prometheus", "grafana"}
	traced := []string{"order", "coupon", "payment", "psp-sim"}

	plain := mustProject(t, nil)
	for _, name := range observability {
		if _, ok := plain.Services[name]; ok {
			t.Errorf("%s starts without the observability profile", name)
		}
		if _, ok := plain.DisabledServices[name]; !ok {
			t.Errorf("compose has no %s service in the observability profile", name)
		}
	}
	for _, s := range plain.Services {
		for dep := range s.DependsOn {
			if slices.Contains(observability, dep) {
				t.Errorf("%s depends on %s, which only the observability profile starts", s.Name, dep)
			}
		}
	}
	for _, name := range traced {
		if got := env(service(t, plain, name), "TRACING_EXPORTER"); got != "none" {
			t.Errorf("%s: TRACING_EXPORTER=%q without the variable exported, want none", name, got)
		}
	}

	p := mustProfile(t, "observability", map[string]string{"TRACING_EXPORTER": "otlp"})
	for _, name := range observability {
		s := service(t, p, name)
		if s.HealthCheck == nil || len(s.HealthCheck.Test) == 0 || s.Restart != "unless-stopped" {
			t.Errorf("%s has no healthcheck or is not restarted", name)
		}
	}
	jaeger := service(t, p, "jaeger")
	receiver := ""
	for _, port := range jaeger.Ports {
		if port.Target == 4318 {
			receiver = port.Published
		}
	}
	if receiver == "" {
		t.Errorf("jaeger publishes no OTLP/HTTP receiver (4318) for make run's processes: %+v", jaeger.Ports)
	}
	for _, name := range traced {
		s := service(t, p, name)
		u, err := url.Parse(env(s, "TRACING_OTLP_ENDPOINT"))
		if env(s, "TRACING_EXPORTER") != "otlp" || err != nil || u.Host != "jaeger:4318" {
			t.Errorf("%s exports to %q (exporter %q), want otlp to http://jaeger:4318", name, env(s, "TRACING_OTLP_ENDPOINT"), env(s, "TRACING_EXPORTER"))
		}
	}
}

// TestLabProfile: `ONCEMALL_ENV=lab COUPON_MYSQL_ADDR=faultproxy:3307
// docker compose --profile lab up` puts the services and the storefront
// in lab mode together, the coupon service's database path through the
// fault proxy, and the console's switches on the proxy's admin port; the
// same file without the profile starts no proxy and still loads.
func TestLabProfile(t *testing.T) {
	plain := mustProject(t, nil)
	if _, ok := plain.DisabledServices["faultproxy"]; !ok {
		t.Error("faultproxy starts without the lab profile")
	}
	p := mustProfile(t, "lab", map[string]string{"ONCEMALL_ENV": "lab", "COUPON_MYSQL_ADDR": "faultproxy:3307"})
	for _, name := range []string{"identity", "order", "coupon", "payment", "web"} {
		if got := env(service(t, p, name), "ONCEMALL_ENV"); got != "lab" {
			t.Errorf("%s: ONCEMALL_ENV=%q with ONCEMALL_ENV=lab exported", name, got)
		}
	}
	proxy, web := service(t, p, "faultproxy"), service(t, p, "web")
	if got := env(service(t, p, "coupon"), "MYSQL_ADDR"); got != "faultproxy"+env(proxy, "FAULTPROXY_ADDR") {
		t.Errorf("coupon: MYSQL_ADDR=%q, the proxy listens on %q", got, env(proxy, "FAULTPROXY_ADDR"))
	}
	if got, want := env(web, "FAULTPROXY_ADMIN_URL"), "http://faultproxy"+env(proxy, "FAULTPROXY_ADMIN_ADDR"); got != want {
		t.Errorf("web: FAULTPROXY_ADMIN_URL=%q, want %q", got, want)
	}
	if got := env(web, "FAULTPROXY_ADMIN_TOKEN"); got == "" || got != env(proxy, "ADMIN_TOKEN") {
		t.Errorf("web: FAULTPROXY_ADMIN_TOKEN=%q, the proxy checks %q", got, env(proxy, "ADMIN_TOKEN"))
	}
	if got := env(web, "PSP_ADMIN_TOKEN"); got == "" || got != env(service(t, p, "psp-sim"), "PSP_ADMIN_TOKEN") {
		t.Errorf("web: PSP_ADMIN_TOKEN=%q, the simulator checks another", got)
	}
}
