package config_test

import (
	"strings"
	"testing"

	"github.com/oncemall/oncemall/pkg/composecheck"
	pkgconfig "github.com/oncemall/oncemall/pkg/config"
	"github.com/oncemall/oncemall/pkg/config/configtest"
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

// TestComposeDockerfileAndREADMEMatch is the drift test: see pkg/composecheck
// for the rules.
func TestComposeDockerfileAndREADMEMatch(t *testing.T) {
	composecheck.Run(t, composecheck.Program{
		Service:  "coupon",
		Dir:      "services/coupon/cmd/coupon",
		Vars:     pkgconfig.Vars(&config.Config{}),
		AddrVars: []string{"HTTP_ADDR"},
	})
}
