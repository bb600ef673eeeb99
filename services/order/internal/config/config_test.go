package config_test

import (
	"testing"

	pkgconfig "github.com/oncemall/oncemall/pkg/config"
	"github.com/oncemall/oncemall/pkg/testkit/composecheck"
	"github.com/oncemall/oncemall/pkg/testkit/configtest"
	"github.com/oncemall/oncemall/services/order/internal/config"
)

func TestLoadDefaults(t *testing.T) {
	c, err := config.Load()
	if err != nil {
		t.Fatal(err)
	}
	if c.Events.OrderStream != "ORDER" || c.Events.PaymentStream != "PAYMENT" || c.Events.SubjectPrefix != "" {
		t.Fatalf("event defaults: %+v", c.Events)
	}
	if c.HTTPAddr != ":8081" || c.DBName != "oncemall_order" {
		t.Fatalf("defaults: HTTP_ADDR=%q MYSQL_DATABASE=%q", c.HTTPAddr, c.DBName)
	}
}

func TestLoadNamesTheBadVariable(t *testing.T) {
	configtest.BadValuesNamed(t, func() error { _, err := config.Load(); return err }, configtest.With(map[string]string{
		"ORDER_STREAM":         "OR*DER",
		"PAYMENT_STREAM":       "PAY MENT",
		"EVENT_SUBJECT_PREFIX": ".e2e.",
	}))
}

// TestComposeDockerfileAndREADMEMatch is the drift test: see pkg/testkit/composecheck
// for the rules.
func TestComposeDockerfileAndREADMEMatch(t *testing.T) {
	composecheck.Run(t, composecheck.Program{
		Service:  "order",
		Dir:      "services/order/cmd/order",
		Vars:     pkgconfig.Vars(&config.Config{}),
		AddrVars: []string{"HTTP_ADDR"},
	})
}
