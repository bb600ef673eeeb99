package config_test

import (
	"testing"

	pkgconfig "github.com/oncemall/oncemall/pkg/config"
	"github.com/oncemall/oncemall/pkg/testkit/composecheck"
	"github.com/oncemall/oncemall/pkg/testkit/configtest"
	"github.com/oncemall/oncemall/services/payment/internal/config"
)

func TestLoadDefaults(t *testing.T) {
	c, err := config.Load()
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTPAddr != ":8083" || c.DBName != "oncemall_payment" {
		t.Fatalf("defaults: HTTP_ADDR=%q MYSQL_DATABASE=%q", c.HTTPAddr, c.DBName)
	}
}

func TestLoadNamesTheBadVariable(t *testing.T) {
	configtest.BadValuesNamed(t, func() error { _, err := config.Load(); return err }, configtest.With(map[string]string{
		"PAYMENT_CALLBACK_MODE":   "lenient",
		"PAYMENT_CALLBACK_WINDOW": "-1s",
		"PSP_TIMEOUT":             "0s",
		"PAYMENT_STREAM":          "PAY.MENT",
		"EVENT_SUBJECT_PREFIX":    "nodot",
	}))
}

// TestComposeDockerfileAndREADMEMatch is the drift test: see pkg/testkit/composecheck
// for the rules.
func TestComposeDockerfileAndREADMEMatch(t *testing.T) {
	composecheck.Run(t, composecheck.Program{
		Service:  "payment",
		Dir:      "services/payment/cmd/payment",
		Vars:     pkgconfig.Vars(&config.Config{}),
		AddrVars: []string{"HTTP_ADDR"},
	})
}

func TestDefaultsSelectTheFixedHandlerAndLocalPeers(t *testing.T) {
	c, err := config.Load()
	if err != nil {
		t.Fatal(err)
	}
	if c.CallbackMode != "fixed" || c.PSPURL != "http://127.0.0.1:8090" || c.OrderURL != "http://127.0.0.1:8081" || c.CallbackLock {
		t.Fatalf("defaults: mode %s psp %s order %s lock %v", c.CallbackMode, c.PSPURL, c.OrderURL, c.CallbackLock)
	}
}

func TestEveryVariableIsDocumented(t *testing.T) {
	for _, v := range pkgconfig.Vars(&config.Config{}) {
		if v.Usage == "" {
			t.Errorf("%s has no usage text", v.Name)
		}
	}
}
