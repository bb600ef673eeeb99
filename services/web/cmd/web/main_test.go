package main

import (
	"bytes"
	"context"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/oncemall/oncemall/pkg/testkit/composecheck"
)

// TestComposeDockerfileAndDocsMatch is the drift test: see
// pkg/testkit/composecheck for the rules.
func TestComposeDockerfileAndDocsMatch(t *testing.T) {
	composecheck.Run(t, composecheck.Program{
		Service:  "web",
		Dir:      "services/web/cmd/web",
		Vars:     vars(),
		AddrVars: []string{"HTTP_ADDR"},
	})
}

// TestHelpListsEveryVariableAndThePort: --help names the commands and
// every variable, and HTTP_ADDR's default is the declared port.
func TestHelpListsEveryVariableAndThePort(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"--help"}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"healthcheck URL", "ORDER_URL", "WEB_COOKIE_KEY", "AUTH_ISSUER",
		"FAULTPROXY_ADMIN_URL", "FAULTPROXY_ADMIN_TOKEN", "PSP_ADMIN_TOKEN", "WEB_TRACES_URL"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("--help lacks %q:\n%s", want, out.String())
		}
	}
	if !regexp.MustCompile(`HTTP_ADDR +:` + strconv.Itoa(program.Port) + ` `).MatchString(out.String()) {
		t.Errorf("HTTP_ADDR's default is not :%d:\n%s", program.Port, out.String())
	}
}

// TestProductionRefusesTheDevelopmentCookieKey: without ONCEMALL_ENV=dev or
// lab the published WEB_COOKIE_KEY is refused at start-up.
func TestProductionRefusesTheDevelopmentCookieKey(t *testing.T) {
	t.Setenv("ONCEMALL_ENV", "production")
	err := run(context.Background(), nil, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "WEB_COOKIE_KEY") {
		t.Fatalf("start in production with the development key: %v, want WEB_COOKIE_KEY refused", err)
	}
}

func TestUnknownCommand(t *testing.T) {
	if err := run(context.Background(), []string{"migrate"}, &bytes.Buffer{}); err == nil {
		t.Fatal("web migrate: no error; the storefront has no database")
	}
}

// TestComposeLabWiring: in compose, the console's switches reach the lab
// profile's fault proxy on the port it listens on, with the token it
// checks, and the simulator with its own; and web takes ONCEMALL_ENV from
// the same variable as the services, so ONCEMALL_ENV=lab puts the console
// and the services it switches in lab mode together.
func TestComposeLabWiring(t *testing.T) {
	f := composecheck.RepoCompose(t)
	web, proxy, psp, order := f.Services["web"], f.Services["faultproxy"], f.Services["psp-sim"], f.Services["order"]
	if !slices.Contains(proxy.Profiles, "lab") {
		t.Errorf("faultproxy is not in the lab profile: %v", proxy.Profiles)
	}
	u, err := url.Parse(web.Environment["FAULTPROXY_ADMIN_URL"])
	_, port, _ := net.SplitHostPort(proxy.Environment["FAULTPROXY_ADMIN_ADDR"])
	if err != nil || u.Hostname() != "faultproxy" || u.Port() != port || port == "" {
		t.Errorf("web: FAULTPROXY_ADMIN_URL=%q, the fault proxy's admin API listens on faultproxy:%s", web.Environment["FAULTPROXY_ADMIN_URL"], port)
	}
	for _, pair := range [][3]string{
		{"FAULTPROXY_ADMIN_TOKEN", "ADMIN_TOKEN", "faultproxy"},
		{"PSP_ADMIN_TOKEN", "PSP_ADMIN_TOKEN", "psp-sim"},
	} {
		other := proxy
		if pair[2] == "psp-sim" {
			other = psp
		}
		if got, want := web.Environment[pair[0]], other.Environment[pair[1]]; got == "" || got != want {
			t.Errorf("web: %s=%q, %s checks its %s=%q", pair[0], got, pair[2], pair[1], want)
		}
	}
	if got, want := web.Environment["ONCEMALL_ENV"], order.Environment["ONCEMALL_ENV"]; got == "" || got != want {
		t.Errorf("web: ONCEMALL_ENV=%q, the services' is %q: ONCEMALL_ENV=lab would not switch both", got, want)
	}
	if d, ok := web.DependsOn["faultproxy"]; !ok || d.Condition != "service_healthy" {
		t.Errorf("web does not wait for the lab profile's fault proxy: %+v", web.DependsOn)
	}
}
