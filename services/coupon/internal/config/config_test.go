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
	if c.Modes.Deduction != variant.Fixed || c.RetrySchedule != "@every 2s" {
		t.Fatalf("defaults = %+v", c)
	}
	a := c.App()
	if a.Deducer != nil || a.Retry.Max != 5 || a.Retry.Base != 2*time.Second || a.Retry.Cap != 5*time.Minute ||
		a.ClaimBatch != 100 || a.ClaimLease != time.Minute ||
		a.LockTTL != 45*time.Minute || a.LockHoldLease != time.Minute || a.SweepBatch != 100 || a.LockOverdueAfter != 30*time.Minute {
		t.Fatalf("App() = %+v", a)
	}
	if c.PayTimeout != 15*time.Minute || c.LockMargin != 10*time.Minute || c.SweepSchedule != "@every 1m" ||
		c.ReconcileSchedule != "@every 1m" || c.OrderURL != "http://127.0.0.1:8081" || c.OrderTimeout != 3*time.Second {
		t.Fatalf("lock, sweep and order settings = %+v", c)
	}
	if err := a.Validate(); err != nil {
		t.Fatalf("the defaults make an app configuration the app refuses: %v", err)
	}
}

// TestBrokenModeIsReadInTheLab: the mode lab.Plug turns into the broken
// deducer is read, and the app's own configuration names no deducer (the
// fixed one) whatever the mode says.
func TestBrokenModeIsReadInTheLab(t *testing.T) {
	c, err := load(t, map[string]string{"COUPON_DEDUCTION_MODE": "broken"})
	if err != nil || c.Modes.Deduction != variant.Broken || c.App().Deducer != nil {
		t.Fatalf("COUPON_DEDUCTION_MODE=broken in the lab: %v, mode %q, app deducer %v", err, c.Modes.Deduction, c.App().Deducer)
	}
}

func TestBadSettingsNameTheirVariable(t *testing.T) {
	for name, value := range map[string]string{
		"COUPON_DEDUCTION_MODE":     "sometimes",
		"COUPON_RETRY_MAX":          "0",
		"COUPON_RETRY_BACKOFF":      "0s",
		"COUPON_RETRY_BACKOFF_MAX":  "1ms",
		"COUPON_RETRY_SCHEDULE":     "often",
		"COUPON_RETRY_BATCH":        "0",
		"COUPON_RETRY_LEASE":        "0s",
		"ORDER_PAY_TIMEOUT":         "0s",
		"COUPON_LOCK_MARGIN":        "0s",
		"COUPON_LOCK_TTL":           "20m",
		"COUPON_LOCK_HOLD_LEASE":    "0s",
		"COUPON_LOCK_OVERDUE_AFTER": "0s",
		"COUPON_SWEEP_SCHEDULE":     "now and then",
		"COUPON_SWEEP_BATCH":        "0",
		"ORDER_URL":                 "",
		"ORDER_TIMEOUT":             "0s",
		"COUPON_RECONCILE_SCHEDULE": "hourly-ish",
		"INBOX_WORKERS":             "0",
		"OUTBOX_MAX_RETRIES":        "0",
	} {
		_, err := load(t, map[string]string{name: value})
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=%q: err = %v, want one naming the variable", name, value, err)
		}
	}
}

// TestLockMustOutlastThePayTimeoutAndMargin: COUPON_LOCK_TTL is checked
// against ORDER_PAY_TIMEOUT + COUPON_LOCK_MARGIN, whichever of the three is
// changed, and exactly their sum is the shortest lock accepted.
func TestLockMustOutlastThePayTimeoutAndMargin(t *testing.T) {
	for _, tt := range []struct {
		env map[string]string
		ok  bool
	}{
		{map[string]string{"COUPON_LOCK_TTL": "25m"}, true},
		{map[string]string{"COUPON_LOCK_TTL": "24m59s"}, false},
		{map[string]string{"ORDER_PAY_TIMEOUT": "40m"}, false},
		{map[string]string{"ORDER_PAY_TIMEOUT": "35m"}, true},
		{map[string]string{"COUPON_LOCK_MARGIN": "31m"}, false},
		{map[string]string{"ORDER_PAY_TIMEOUT": "2s", "COUPON_LOCK_MARGIN": "1s", "COUPON_LOCK_TTL": "3s"}, true},
	} {
		_, err := load(t, tt.env)
		switch {
		case tt.ok && err != nil:
			t.Errorf("%v: %v, want accepted", tt.env, err)
		case !tt.ok && (err == nil || !strings.Contains(err.Error(), "COUPON_LOCK_TTL") ||
			!strings.Contains(err.Error(), "ORDER_PAY_TIMEOUT")):
			t.Errorf("%v: %v, want a refusal naming COUPON_LOCK_TTL and ORDER_PAY_TIMEOUT", tt.env, err)
		}
	}
}
