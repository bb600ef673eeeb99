package config_test

import (
	"strings"
	"testing"

	pkgconfig "github.com/oncemall/oncemall/pkg/config"
	"github.com/oncemall/oncemall/services/payment/internal/config"
)

func load(t *testing.T, env map[string]string) (config.Config, error) {
	t.Helper()
	var c config.Config
	if err := pkgconfig.LoadFrom(&c, func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		return c, err
	}
	return c, c.Validate()
}

func TestDefaultsAreValidAndFixed(t *testing.T) {
	c, err := load(t, nil)
	if err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	if c.CallbackMode != "fixed" || c.PSPURL != "http://127.0.0.1:8090" || c.OrderURL != "http://127.0.0.1:8081" || c.HTTPAddr != ":8083" {
		t.Fatalf("unexpected defaults: mode %s psp %s order %s addr %s", c.CallbackMode, c.PSPURL, c.OrderURL, c.HTTPAddr)
	}
}

func TestInvalidSettingsNameTheirVariable(t *testing.T) {
	_, err := load(t, map[string]string{"PAYMENT_CALLBACK_MODE": "lenient", "PAYMENT_CALLBACK_WINDOW": "-1s"})
	if err == nil || !strings.Contains(err.Error(), "PAYMENT_CALLBACK_MODE") || !strings.Contains(err.Error(), "PAYMENT_CALLBACK_WINDOW") {
		t.Fatalf("Validate = %v, want errors naming both variables", err)
	}
}

func TestEveryVariableIsDocumented(t *testing.T) {
	for _, v := range pkgconfig.Vars(&config.Config{}) {
		if v.Name != "-" && v.Usage == "" {
			t.Errorf("%s has no usage text", v.Name)
		}
	}
}
