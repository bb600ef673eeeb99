// Package composecheck keeps docker-compose.yml, the Dockerfiles and the
// configuration page (docs/configuration.md) in step with the code. No Docker engine runs
// on the machines this project is built on, so nothing would notice a renamed
// variable or a moved cmd/ directory until a user ran `docker compose up`;
// each program's module runs Check in a test instead.
//
// The rules, for every program (a compose service built from this repo):
//
//   - every environment variable the program reads is set in its compose
//     environment, under the same name. Listing all of them, defaults
//     included, makes the compose file the complete record of how the
//     container is configured; a variable may be left out only when the
//     program's test names it in Program.Unset with the reason;
//   - every variable in its compose environment is read by the program,
//     so a typo cannot hide (Program.Pending lists variables compose sets
//     before the code reads them, each with the reason);
//   - each listen-address variable's default port is published on
//     127.0.0.1 only, as the same container port and by default the same
//     host port, which a variable may move ("127.0.0.1:${ORDER_PORT:-8081}:8081");
//     and the compose value listens on that port;
//   - it has a healthcheck that calls the health path (/readyz unless
//     Program.HealthPath says otherwise) on that port;
//   - it has a restart policy, and a stop_grace_period longer than its
//     SHUTDOWN_TIMEOUT when it reads one (compose's default grace, 10s,
//     would SIGKILL a drain that the program is allowed 15s for);
//   - every depends_on waits for condition service_healthy (or
//     service_started, on a dependency that has no healthcheck);
//   - it is built with the repo root as context and a Dockerfile that
//     builds exactly Program.Dir (a main package) with -tags nomsgpack and
//     runs as a non-root user;
//   - the README's configuration table has a row for every variable, whose
//     default column shows the default.
//
// CheckPublished holds every service of the file, infrastructure included,
// to the 127.0.0.1 rule. The package's own tests load the repository's file
// with the Compose loader itself (github.com/compose-spec/compose-go), for
// interpolation and the schema.
package composecheck

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/oncemall/oncemall/pkg/config"
)

// Program describes one program that compose runs.
type Program struct {
	// Service is the compose service name, e.g. "order".
	Service string
	// Dir is the main package's directory relative to the repo root, e.g.
	// "services/order/cmd/order".
	Dir string
	// Vars are the variables the program reads: config.Vars(&cfg).
	Vars []config.Var
	// AddrVars name the variables that hold listen addresses ("HTTP_ADDR").
	// The first one serves the health path.
	AddrVars []string
	// HealthPath is what the healthcheck calls; "/readyz" when empty, the
	// path that answers 200 only once the program's dependencies answer.
	HealthPath string
	// Unset lists variables that compose may leave at their default, with
	// the reason. Keep it empty unless there is a reason.
	Unset map[string]string
	// Pending lists variables compose sets that the program does not read
	// yet, with the reason. Remove an entry once the code reads it.
	Pending map[string]string
}

// File is the part of a compose file the checks read.
type File struct {
	Services map[string]Service `yaml:"services"`
}

// Service is one compose service.
type Service struct {
	Image           string               `yaml:"image"`
	Profiles        []string             `yaml:"profiles"`
	Build           *Build               `yaml:"build"`
	Command         []string             `yaml:"command"`
	Environment     map[string]string    `yaml:"environment"`
	Ports           []string             `yaml:"ports"`
	Volumes         []string             `yaml:"volumes"`
	Restart         string               `yaml:"restart"`
	StopGracePeriod string               `yaml:"stop_grace_period"`
	Healthcheck     *Healthcheck         `yaml:"healthcheck"`
	DependsOn       map[string]DependsOn `yaml:"depends_on"`
}

// Build is a service's build section (the long form is required).
type Build struct {
	Context    string            `yaml:"context"`
	Dockerfile string            `yaml:"dockerfile"`
	Args       map[string]string `yaml:"args"`
}

// Healthcheck is a service's healthcheck.
type Healthcheck struct {
	Test []string `yaml:"test"`
}

// DependsOn is one long-form depends_on entry.
type DependsOn struct {
	Condition string `yaml:"condition"`
}

// Root returns the repository root: the nearest directory above the working
// directory that holds go.work.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("composecheck: no go.work above the working directory")
		}
		dir = parent
	}
}

// RepoRoot is Root for a test: it fails t when there is no repository
// around the working directory.
func RepoRoot(t testing.TB) string {
	t.Helper()
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// RepoCompose parses the repository's docker-compose.yml for a test,
// failing t when it cannot.
func RepoCompose(t testing.TB) *File {
	t.Helper()
	f, err := Load(RepoRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// Load parses root/docker-compose.yml.
func Load(root string) (*File, error) {
	b, err := os.ReadFile(filepath.Join(root, "docker-compose.yml"))
	if err != nil {
		return nil, err
	}
	var f File
	if err := yaml.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("docker-compose.yml: %w", err)
	}
	return &f, nil
}

// Run checks p against the repository containing the working directory and
// reports each drift as a test error.
func Run(t testing.TB, p Program) {
	t.Helper()
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range Check(root, p) {
		t.Error(err)
	}
}

// Check returns every way p has drifted from the compose file, its
// Dockerfile and the README.
func Check(root string, p Program) []error {
	var errs []error
	fail := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{p.Service}, args...)...))
	}
	f, err := Load(root)
	if err != nil {
		return []error{err}
	}
	svc, ok := f.Services[p.Service]
	if !ok {
		return []error{fmt.Errorf("docker-compose.yml has no service %q", p.Service)}
	}
	if len(p.Vars) == 0 {
		fail("the program reads no variables: pass config.Vars(&cfg)")
	}
	defaults := map[string]string{}
	for _, v := range p.Vars {
		defaults[v.Name] = v.Default
	}

	// Environment, both ways.
	for _, v := range p.Vars {
		if _, ok := svc.Environment[v.Name]; !ok {
			if _, allowed := p.Unset[v.Name]; !allowed {
				fail("compose environment lacks %s, which the program reads (default %q)", v.Name, v.Default)
			}
		}
	}
	for name := range svc.Environment {
		if _, ok := defaults[name]; ok {
			if _, pending := p.Pending[name]; pending {
				fail("%s is read now: remove it from Program.Pending", name)
			}
			continue
		}
		if _, pending := p.Pending[name]; !pending {
			fail("compose sets %s, which the program does not read (a typo, or a removed setting?)", name)
		}
	}

	// Ports and healthcheck.
	errs = append(errs, CheckPublished(p.Service, svc)...)
	published := map[string]bool{} // container port → published as the same host port by default
	for _, spec := range svc.Ports {
		if pp, err := ParsePort(spec); err == nil && pp.HostDefault == pp.Container {
			published[pp.Container] = true
		}
	}
	health := p.HealthPath
	if health == "" {
		health = "/readyz"
	}
	for i, name := range p.AddrVars {
		def, ok := defaults[name]
		if !ok {
			fail("address variable %s is not read by the program", name)
			continue
		}
		port := portOf(def)
		if port == "" {
			fail("default of %s (%q) has no port", name, def)
			continue
		}
		if !published[port] {
			fail("port %s (default of %s) is not published as %q (or with ${VAR:-%s} as the host port); ports are %v", port, name, "127.0.0.1:"+port+":"+port, port, svc.Ports)
		}
		if v, ok := svc.Environment[name]; ok && portOf(v) != port {
			fail("compose sets %s=%q, not on the default port %s", name, v, port)
		}
		if i == 0 {
			want := ":" + port + health
			if svc.Healthcheck == nil || !strings.Contains(strings.Join(svc.Healthcheck.Test, " "), want) {
				fail("healthcheck must call %s on port %s; have %v", health, port, svc.Healthcheck)
			}
		}
	}
	if svc.Healthcheck == nil {
		fail("no healthcheck")
	}
	for dep, d := range svc.DependsOn {
		// service_started only for a dependency that has no healthcheck
		// (the official nats image is scratch: nothing to probe with); the
		// program waits for it itself, within STARTUP_TIMEOUT.
		if d.Condition == "service_started" && f.Services[dep].Healthcheck == nil {
			continue
		}
		if d.Condition != "service_healthy" {
			fail("depends_on %s has condition %q, want service_healthy", dep, d.Condition)
		}
	}

	// Restart and stop.
	if svc.Restart == "" || svc.Restart == "no" {
		fail("no restart policy (restart: unless-stopped): a crashed program would stay down")
	}
	if def, reads := defaults["SHUTDOWN_TIMEOUT"]; reads {
		value := def
		if v, ok := svc.Environment["SHUTDOWN_TIMEOUT"]; ok {
			value = v
		}
		shutdown, err := time.ParseDuration(value)
		grace := 10 * time.Second // compose's default
		if svc.StopGracePeriod != "" {
			if grace, err = time.ParseDuration(svc.StopGracePeriod); err != nil {
				fail("stop_grace_period %q: %v", svc.StopGracePeriod, err)
			}
		}
		if err == nil && grace <= shutdown {
			fail("stop_grace_period is %s, not longer than SHUTDOWN_TIMEOUT (%s): compose would SIGKILL the program mid-drain", grace, shutdown)
		}
	}

	// Build.
	errs = append(errs, checkBuild(root, p, svc)...)

	// README.
	rows, err := ReadmeRows(filepath.Join(root, "docs", "configuration.md"))
	if err != nil {
		errs = append(errs, err)
		return errs
	}
	for _, v := range p.Vars {
		row, ok := rows[v.Name]
		switch {
		case !ok:
			fail("docs/configuration.md has no row for %s", v.Name)
		case v.Default != "" && !strings.Contains(row, "`"+v.Default+"`") && !placeholder.MatchString(row):
			fail("docs/configuration.md row for %s does not show its default `%s`: %s", v.Name, v.Default, row)
		}
	}
	return errs
}

func checkBuild(root string, p Program, svc Service) []error {
	var errs []error
	fail := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{p.Service}, args...)...))
	}
	b := svc.Build
	if b == nil {
		fail("not built from this repository (no build section)")
		return errs
	}
	if filepath.Clean(b.Context) != "." {
		fail("build context is %q, want the repo root \".\" so go.work and pkg/ are included", b.Context)
	}
	if b.Args["PROGRAM"] != p.Dir {
		fail("build arg PROGRAM=%q, want %q", b.Args["PROGRAM"], p.Dir)
	}
	main, err := os.ReadFile(filepath.Join(root, p.Dir, "main.go"))
	if err != nil || !regexp.MustCompile(`(?m)^package main$`).Match(main) {
		fail("%s/main.go is missing or not package main", p.Dir)
	}
	df, err := os.ReadFile(filepath.Join(root, b.Dockerfile))
	if err != nil {
		fail("Dockerfile: %v", err)
		return errs
	}
	text := string(df)
	if !regexp.MustCompile(`(?m)^ARG PROGRAM\b`).MatchString(text) {
		fail("%s does not declare ARG PROGRAM", b.Dockerfile)
	}
	build := regexp.MustCompile(`go build[^\n]*\./\$\{?PROGRAM\}?`).FindString(text)
	if build == "" {
		fail("%s does not `go build ./${PROGRAM}`", b.Dockerfile)
	} else if !regexp.MustCompile(`-tags[ =]"?[a-z0-9,]*\bnomsgpack\b`).MatchString(build) {
		// gin's MessagePack codec is a sixth of each binary and nothing
		// here speaks MessagePack.
		fail("%s does not build with -tags nomsgpack", b.Dockerfile)
	}
	froms := regexp.MustCompile(`(?m)^FROM `).FindAllStringIndex(text, -1)
	if len(froms) < 2 {
		fail("%s is not a multi-stage build", b.Dockerfile)
	} else {
		final := text[froms[len(froms)-1][0]:]
		m := regexp.MustCompile(`(?m)^USER\s+(\S+)`).FindStringSubmatch(final)
		if m == nil || m[1] == "root" || strings.HasPrefix(m[1], "0") {
			fail("%s: the final stage must run as a non-root USER", b.Dockerfile)
		}
	}
	return errs
}

// Port is one published port in the short syntax compose takes:
// "127.0.0.1:${ORDER_PORT:-8081}:8081".
type Port struct {
	HostIP      string // "127.0.0.1"; empty when the spec names none (every interface)
	HostVar     string // "ORDER_PORT", when a variable may move the host port
	HostDefault string // "8081": the host port when the variable is unset
	Container   string // "8081"
}

var portSpec = regexp.MustCompile(`^(?:([0-9.]+|\[[0-9a-fA-F:]+\]):)?(?:\$\{([A-Z][A-Z0-9_]*):-([0-9]+)\}|([0-9]+)):([0-9]+)(?:/tcp)?$`)

// ParsePort parses a short-syntax port of this repository's compose file: an
// optional host address, the host port (a number, or ${VAR:-number}) and
// the container port.
func ParsePort(spec string) (Port, error) {
	m := portSpec.FindStringSubmatch(spec)
	if m == nil {
		return Port{}, fmt.Errorf("port %q: want HOST_IP:HOST_PORT:CONTAINER_PORT, with HOST_PORT a number or ${VAR:-number}", spec)
	}
	p := Port{HostIP: m[1], HostVar: m[2], HostDefault: m[3] + m[4], Container: m[5]}
	for _, n := range []string{p.HostDefault, p.Container} {
		if v, err := strconv.Atoi(n); err != nil || v < 1 || v > 65535 {
			return Port{}, fmt.Errorf("port %q: %s is not a port number", spec, n)
		}
	}
	return p, nil
}

// CheckPublished reports each port of svc (named name) that is published
// beyond 127.0.0.1: compose's default is every interface, which puts the
// databases and the admin APIs of a developer's laptop on the café's
// network.
func CheckPublished(name string, svc Service) []error {
	var errs []error
	for _, spec := range svc.Ports {
		p, err := ParsePort(spec)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		case p.HostIP != "127.0.0.1":
			errs = append(errs, fmt.Errorf("%s: port %q is published on every interface; publish it on 127.0.0.1 only (\"127.0.0.1:%s:%s\")", name, spec, p.HostDefault, p.Container))
		}
	}
	return errs
}

// placeholder matches a default documented as a pattern of the service
// ("`:<port>` of the service", "`oncemall_<service>`"): the platform derives
// those defaults from each service's declaration.
var placeholder = regexp.MustCompile("`[^`]*<(port|service)>[^`]*`")

// ReadmeRows returns the rows of the README's configuration tables, keyed by
// the variable in their first cell (| `NAME` | ...).
func ReadmeRows(path string) (map[string]string, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	rows := map[string]string{}
	re := regexp.MustCompile("^\\|\\s*`([A-Z][A-Z0-9_]*)`\\s*\\|")
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			rows[m[1]] = sc.Text()
		}
	}
	return rows, sc.Err()
}

func portOf(addr string) string {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	return port
}
