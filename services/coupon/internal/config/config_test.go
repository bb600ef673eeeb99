package config_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	pkgconfig "github.com/oncemall/oncemall/pkg/config"
	"github.com/oncemall/oncemall/pkg/testkit/composecheck"
	"github.com/oncemall/oncemall/pkg/testkit/configtest"
	"github.com/oncemall/oncemall/services/coupon/internal/config"
)

func load(t *testing.T, env map[string]string) (config.Config, error) {
	t.Helper()
	var c config.Config
	if err := pkgconfig.LoadFrom(&c, func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		return c, err
	}
	return c, c.Validate()
}

func TestDefaultsWorkLocally(t *testing.T) {
	c, err := load(t, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.DeductionMode != "fixed" || c.HTTPAddr != ":8082" || c.OrderStream != "ORDER" || c.OrderStreamSubj+".paid" != "order.paid" {
		t.Fatalf("defaults = %+v", c)
	}
}

func TestBadSettingsNameTheirVariable(t *testing.T) {
	for name, value := range map[string]string{
		"COUPON_DEDUCTION_MODE":    "sometimes",
		"COUPON_RETRY_MAX":         "0",
		"COUPON_RETRY_BACKOFF_MAX": "1ms",
		"COUPON_RETRY_SCHEDULE":    "often",
		"COUPON_CONSUMER_WORKERS":  "0",
		"OUTBOX_MAX_RETRIES":       "0",
	} {
		_, err := load(t, map[string]string{name: value})
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=%q: err = %v, want one naming the variable", name, value, err)
		}
	}
}
func TestLoadDefaults(t *testing.T) {
	c, err := config.Load()
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTPAddr != ":8082" || c.DBName != "oncemall_coupon" {
		t.Fatalf("defaults: HTTP_ADDR=%q MYSQL_DATABASE=%q", c.HTTPAddr, c.DBName)
	}
}

func TestLoadNamesTheBadVariable(t *testing.T) {
	configtest.BadValuesNamed(t, func() error { _, err := config.Load(); return err }, configtest.PlatformBadValues)
}

// TestComposeDockerfileAndREADMEMatch is the drift test: see pkg/testkit/composecheck
// for the rules.
func TestComposeDockerfileAndREADMEMatch(t *testing.T) {
	composecheck.Run(t, composecheck.Program{
		Service:  "coupon",
		Dir:      "services/coupon/cmd/coupon",
		Vars:     pkgconfig.Vars(&config.Config{}),
		AddrVars: []string{"HTTP_ADDR"},
	})

	// Beyond the generic rules: the coupon service reaches MySQL through
	// the fault proxy, so that an operator can lose a COMMIT reply of the
	// running stack through the proxy's admin API (incident 1).
	f := composecheck.RepoCompose(t)
	if got := f.Services["coupon"].Environment["MYSQL_ADDR"]; got != "faultproxy:3307" {
		t.Errorf("coupon: MYSQL_ADDR = %q, want %q (through the fault proxy)", got, "faultproxy:3307")
	}
	if got := f.Services["faultproxy"].Environment["FAULTPROXY_ADDR"]; got != ":3307" {
		t.Errorf("faultproxy: FAULTPROXY_ADDR = %q, want %q, where the coupon service connects", got, ":3307")
	}
}

// TestRunScriptRoutesCouponThroughTheFaultProxy is the same check for
// scripts/run.sh (`make run`, no Docker): it runs the script's programs
// function and reads the environment it gives the coupon service and the
// proxy.
func TestRunScriptRoutesCouponThroughTheFaultProxy(t *testing.T) {
	root := composecheck.RepoRoot(t)
	script, err := os.ReadFile(filepath.Join(root, "scripts", "run.sh"))
	if err != nil {
		t.Fatal(err)
	}
	// programs() runs to the first line that is a lone "}"; the rest of
	// the script would start the programs.
	body := string(script)
	start := strings.Index(body, "\nprograms() {\n")
	end := strings.Index(body[max(start, 0):], "\n}\n")
	if start < 0 || end < 0 {
		t.Fatal("scripts/run.sh has no programs() function")
	}
	cmd := exec.Command("bash", "-c", body[start:start+end+3]+"programs\n")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("run.sh programs: %v", err)
	}
	env := map[string][]string{} // program name → its extra environment
	for line := range strings.Lines(string(out)) {
		fields := strings.Split(strings.TrimSpace(line), "|")
		if len(fields) == 4 {
			env[fields[0]] = strings.Fields(fields[3])
		}
	}
	if !slices.Contains(env["coupon"], "MYSQL_ADDR=127.0.0.1:3307") {
		t.Errorf("run.sh starts coupon with %q, want MYSQL_ADDR=127.0.0.1:3307 (through the fault proxy)", env["coupon"])
	}
	if !slices.Contains(env["faultproxy"], "FAULTPROXY_ADDR=:3307") {
		t.Errorf("run.sh starts the fault proxy with %q, want FAULTPROXY_ADDR=:3307", env["faultproxy"])
	}
}
