package config_test

import (
	"strings"
	"testing"
	"time"

	pkgconfig "github.com/oncemall/oncemall/pkg/config"
	"github.com/oncemall/oncemall/pkg/variant"
	"github.com/oncemall/oncemall/services/coupon/internal/config"
)

// load reads a Config from env over the values the service declaration
// would default (HTTP_ADDR, MYSQL_DATABASE) and the lab environment, and
// validates it.
func load(t *testing.T, env map[string]string) (config.Config, error) {
	t.Helper()
	base := map[string]string{"ONCEMALL_ENV": "lab", "HTTP_ADDR": ":8082", "MYSQL_DATABASE": "oncemall_coupon"}
	var c config.Config
	err := pkgconfig.LoadFrom(&c, func(k string) (string, bool) {
		if v, ok := env[k]; ok {
			return v, true
		}
		v, ok := base[k]
		return v, ok
	})
	if err != nil {
		return c, err
	}
	return c, c.Validate()
}

func TestDefaultsWorkLocally(t *testing.T) {
	c, err := load(t, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Modes.Deduction != variant.Fixed || c.RetrySchedule != "@every 2s" || c.ArchiveSchedule != "@every 1h" {
		t.Fatalf("defaults = %+v", c)
	}
	a := c.App()
	if a.Deduction != variant.Fixed || a.Retry.Max != 5 || a.Retry.Base != 2*time.Second || a.Retry.Cap != 5*time.Minute ||
		a.ClaimBatch != 100 || a.ClaimLease != time.Minute || a.NoticeRetention != 720*time.Hour || a.ArchiveBatch != 500 {
		t.Fatalf("App() = %+v", a)
	}
	if err := a.Validate(); err != nil {
		t.Fatalf("the defaults make an app configuration the app refuses: %v", err)
	}
}

func TestBrokenModeIsTheApps(t *testing.T) {
	c, err := load(t, map[string]string{"COUPON_DEDUCTION_MODE": "broken"})
	if err != nil || c.App().Deduction != variant.Broken {
		t.Fatalf("COUPON_DEDUCTION_MODE=broken in the lab: %v, deduction %q", err, c.App().Deduction)
	}
}

func TestBadSettingsNameTheirVariable(t *testing.T) {
	for name, value := range map[string]string{
		"COUPON_DEDUCTION_MODE":    "sometimes",
		"COUPON_RETRY_MAX":         "0",
		"COUPON_RETRY_BACKOFF":     "0s",
		"COUPON_RETRY_BACKOFF_MAX": "1ms",
		"COUPON_RETRY_SCHEDULE":    "often",
		"COUPON_RETRY_BATCH":       "0",
		"COUPON_RETRY_LEASE":       "0s",
		"COUPON_NOTICE_RETENTION":  "0s",
		"COUPON_ARCHIVE_SCHEDULE":  "every 2s",
		"COUPON_ARCHIVE_BATCH":     "-1",
		"INBOX_WORKERS":            "0",
		"OUTBOX_MAX_RETRIES":       "0",
	} {
		_, err := load(t, map[string]string{name: value})
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=%q: err = %v, want one naming the variable", name, value, err)
		}
	}
}
