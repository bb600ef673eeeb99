package composecheck_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oncemall/oncemall/pkg/config"
	"github.com/oncemall/oncemall/pkg/testkit/composecheck"
)

const goodCompose = `
x-env: &env
  LOG_LEVEL: "info"
services:
  db:
    image: mysql:8.4
    healthcheck:
      test: ["CMD", "true"]
  svc:
    build:
      context: .
      dockerfile: deploy/app.Dockerfile
      args:
        PROGRAM: apps/svc/cmd/svc
    environment:
      <<: *env
      HTTP_ADDR: ":9001"
      SHUTDOWN_TIMEOUT: "15s"
    ports:
      - "127.0.0.1:${SVC_PORT:-9001}:9001"
    restart: unless-stopped
    stop_grace_period: 20s
    healthcheck:
      test: ["CMD", "wget", "-qO-", "http://127.0.0.1:9001/readyz"]
    depends_on:
      db:
        condition: service_healthy
`

const goodDockerfile = `FROM golang:1.26-alpine AS build
ARG PROGRAM
RUN go build -tags nomsgpack -o /out/app ./${PROGRAM}
FROM alpine:3.22
COPY --from=build /out/app /app
USER 10001:10001
`

const goodReadme = "| variable | default | meaning |\n|---|---|---|\n| `LOG_LEVEL` | `info` | level |\n| `HTTP_ADDR` | `:9001` | listen |\n| `SHUTDOWN_TIMEOUT` | `15s` | drain |\n"

var program = composecheck.Program{
	Service:  "svc",
	Dir:      "apps/svc/cmd/svc",
	Vars:     []config.Var{{Name: "LOG_LEVEL", Default: "info"}, {Name: "HTTP_ADDR", Default: ":9001"}, {Name: "SHUTDOWN_TIMEOUT", Default: "15s"}},
	AddrVars: []string{"HTTP_ADDR"},
}

func repo(t *testing.T, compose, dockerfile, readme string) string {
	t.Helper()
	root := t.TempDir()
	for path, body := range map[string]string{
		"go.work":                  "go 1.26.0\n",
		"docker-compose.yml":       compose,
		"deploy/app.Dockerfile":    dockerfile,
		"docs/configuration.md":    readme,
		"apps/svc/cmd/svc/main.go": "package main\n\nfunc main() {}\n",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, path)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, path), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestGoodRepositoryPasses(t *testing.T) {
	if errs := composecheck.Check(repo(t, goodCompose, goodDockerfile, goodReadme), program); len(errs) > 0 {
		t.Fatalf("unexpected drift: %v", errs)
	}
}

func TestDriftIsReported(t *testing.T) {
	for _, tc := range []struct {
		name                        string
		compose, dockerfile, readme string
		program                     func(composecheck.Program) composecheck.Program
		want                        string
	}{
		{name: "variable missing from compose", compose: strings.Replace(goodCompose, "      <<: *env\n", "", 1), want: "lacks LOG_LEVEL"},
		{name: "typo in compose", compose: strings.Replace(goodCompose, `HTTP_ADDR: ":9001"`, "HTTP_ADDR: \":9001\"\n      HTTP_ADRR: \":1\"", 1), want: "HTTP_ADRR"},
		{name: "pending variable now read", program: func(p composecheck.Program) composecheck.Program {
			p.Pending = map[string]string{"LOG_LEVEL": "later"}
			return p
		}, want: "remove it from Program.Pending"},
		{name: "port not published", compose: strings.Replace(goodCompose, `${SVC_PORT:-9001}:9001`, `${SVC_PORT:-9002}:9001`, 1), want: "not published"},
		{name: "port published on every interface", compose: strings.Replace(goodCompose, `"127.0.0.1:${SVC_PORT:-9001}:9001"`, `"${SVC_PORT:-9001}:9001"`, 1), want: "every interface"},
		{name: "port published on 0.0.0.0", compose: strings.Replace(goodCompose, `127.0.0.1:${SVC_PORT`, `0.0.0.0:${SVC_PORT`, 1), want: "every interface"},
		{name: "port of an unknown shape", compose: strings.Replace(goodCompose, `${SVC_PORT:-9001}`, `${SVC_PORT}`, 1), want: "want HOST_IP:HOST_PORT"},
		{name: "healthcheck on /healthz", compose: strings.Replace(goodCompose, `9001/readyz`, `9001/healthz`, 1), want: "healthcheck must call /readyz"},
		{name: "no restart policy", compose: strings.Replace(goodCompose, "    restart: unless-stopped\n", "", 1), want: "no restart policy"},
		{name: "restart no", compose: strings.Replace(goodCompose, "restart: unless-stopped", `restart: "no"`, 1), want: "no restart policy"},
		{name: "compose's default stop grace", compose: strings.Replace(goodCompose, "    stop_grace_period: 20s\n", "", 1), want: "not longer than SHUTDOWN_TIMEOUT"},
		{name: "stop grace equal to the shutdown timeout", compose: strings.Replace(goodCompose, "stop_grace_period: 20s", "stop_grace_period: 15s", 1), want: "not longer than SHUTDOWN_TIMEOUT"},
		{name: "shutdown timeout raised past the grace", compose: strings.Replace(goodCompose, `SHUTDOWN_TIMEOUT: "15s"`, `SHUTDOWN_TIMEOUT: "30s"`, 1), want: "not longer than SHUTDOWN_TIMEOUT"},
		{name: "built without nomsgpack", dockerfile: strings.Replace(goodDockerfile, "-tags nomsgpack ", "", 1), want: "-tags nomsgpack"},
		{name: "compose listens elsewhere", compose: strings.Replace(goodCompose, `HTTP_ADDR: ":9001"`, `HTTP_ADDR: ":9009"`, 1), want: "not on the default port"},
		{name: "no healthcheck", compose: strings.Replace(goodCompose, `      test: ["CMD", "wget", "-qO-", "http://127.0.0.1:9001/readyz"]`, `      test: ["CMD", "true"]`, 1), want: "healthcheck must call"},
		{name: "depends_on without health", compose: strings.Replace(goodCompose, "condition: service_healthy", "condition: service_started", 1), want: "service_started"},
		{name: "builds another program", compose: strings.Replace(goodCompose, "PROGRAM: apps/svc/cmd/svc", "PROGRAM: apps/other/cmd/other", 1), want: "build arg PROGRAM"},
		{name: "context not the root", compose: strings.Replace(goodCompose, "context: .", "context: apps/svc", 1), want: "build context"},
		{name: "Dockerfile ignores PROGRAM", dockerfile: strings.Replace(goodDockerfile, "./${PROGRAM}", "./apps/svc/cmd/svc", 1), want: "go build"},
		{name: "runs as root", dockerfile: strings.Replace(goodDockerfile, "USER 10001:10001", "USER root", 1), want: "non-root"},
		{name: "single stage", dockerfile: strings.Replace(goodDockerfile, "FROM alpine:3.22\nCOPY --from=build /out/app /app\n", "", 1), want: "multi-stage"},
		{name: "the configuration page lacks a variable", readme: strings.Replace(goodReadme, "| `LOG_LEVEL` | `info` | level |\n", "", 1), want: "no row for LOG_LEVEL"},
		{name: "the configuration page shows a wrong default", readme: strings.Replace(goodReadme, "`info`", "`debug`", 1), want: "does not show its default"},
		{name: "unknown service", program: func(p composecheck.Program) composecheck.Program { p.Service = "nope"; return p }, want: `no service "nope"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			compose, dockerfile, readme, p := goodCompose, goodDockerfile, goodReadme, program
			if tc.compose != "" {
				compose = tc.compose
			}
			if tc.dockerfile != "" {
				dockerfile = tc.dockerfile
			}
			if tc.readme != "" {
				readme = tc.readme
			}
			if tc.program != nil {
				p = tc.program(p)
			}
			errs := composecheck.Check(repo(t, compose, dockerfile, readme), p)
			for _, err := range errs {
				if strings.Contains(err.Error(), tc.want) {
					return
				}
			}
			t.Fatalf("want an error containing %q, got %v", tc.want, errs)
		})
	}
}

// TestRepositoryComposeParses keeps the real compose file loadable, its
// infrastructure services healthy-checked and restarted, and every port of
// every service on 127.0.0.1; the programs are checked from their own
// modules.
func TestRepositoryComposeParses(t *testing.T) {
	f := composecheck.RepoCompose(t)
	for _, name := range []string{"mysql", "redis", "nats", "order", "coupon", "payment", "psp-sim", "faultproxy"} {
		svc, ok := f.Services[name]
		if !ok {
			t.Errorf("compose has no %s service", name)
			continue
		}
		// The official nats image is scratch, with no program to probe
		// with: the services wait for it themselves.
		if name != "nats" && (svc.Healthcheck == nil || len(svc.Healthcheck.Test) == 0) {
			t.Errorf("compose service %s has no healthcheck", name)
		}
		if svc.Restart != "unless-stopped" {
			t.Errorf("compose service %s has restart %q, want unless-stopped", name, svc.Restart)
		}
	}
	for name, svc := range f.Services {
		for _, err := range composecheck.CheckPublished(name, svc) {
			t.Error(err)
		}
	}
}
