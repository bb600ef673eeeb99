package main

import (
	"bytes"
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"

	pkgconfig "github.com/oncemall/oncemall/pkg/config"
	"github.com/oncemall/oncemall/pkg/testkit/composecheck"
	"github.com/oncemall/oncemall/services/web/internal/config"
)

// TestComposeDockerfileAndDocsMatch is the drift test: see
// pkg/testkit/composecheck for the rules.
func TestComposeDockerfileAndDocsMatch(t *testing.T) {
	composecheck.Run(t, composecheck.Program{
		Service:  "web",
		Dir:      "services/web/cmd/web",
		Vars:     pkgconfig.Vars(&config.Config{}),
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
	for _, want := range []string{"healthcheck URL", "ORDER_URL", "WEB_COOKIE_KEY", "AUTH_ISSUER"} {
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
