package config_test

import (
	"strings"
	"testing"

	pkgconfig "github.com/oncemall/oncemall/pkg/config"
	"github.com/oncemall/oncemall/pkg/variant"
	"github.com/oncemall/oncemall/services/payment/internal/app"
	"github.com/oncemall/oncemall/services/payment/internal/config"
)

func TestEveryVariableIsDocumented(t *testing.T) {
	for _, v := range pkgconfig.Vars(&config.Config{}) {
		if v.Usage == "" {
			t.Errorf("%s has no usage text", v.Name)
		}
	}
}

// TestModesAreTheLabVariants: the callback mode is a variant.Mode (so the
// platform refuses broken outside the lab), fixed by default, and an
// unknown one is refused naming its variable.
func TestModesAreTheLabVariants(t *testing.T) {
	var m config.Modes
	if err := pkgconfig.LoadFrom(&m, func(string) (string, bool) { return "", false }); err != nil {
		t.Fatal(err)
	}
	if m.Callback != variant.Fixed {
		t.Fatalf("default PAYMENT_CALLBACK_MODE = %q, want fixed", m.Callback)
	}
	for _, ok := range []variant.Mode{variant.Fixed, variant.Broken} {
		if err := (config.Modes{Callback: ok}).Validate(); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	if err := (config.Modes{Callback: "lenient"}).Validate(); err == nil || !strings.Contains(err.Error(), "PAYMENT_CALLBACK_MODE") {
		t.Fatalf("lenient: %v, want an error naming PAYMENT_CALLBACK_MODE", err)
	}
}

// TestAppCarriesTheChoices: the use cases get the lock and the
// reconciliation horizon from the one configuration.
func TestAppCarriesTheChoices(t *testing.T) {
	c := config.Config{Modes: config.Modes{Callback: variant.Broken}, CallbackLock: true, CallbackLockTTL: 7, ReconcileLookback: 9,
		PSPNotifyURL: "http://n", PSPRefundNotifyURL: "http://r", QueryAfter: 1, QueryHorizon: 2, QueryBatch: 3,
		RefundBatch: 4, RefundLease: 5, RefundBackoff: 6, RefundBackoffMax: 8, RefundAlertAfter: 10}
	a := c.App()
	want := app.Config{NotifyURL: "http://n", RefundNotifyURL: "http://r", CallbackLock: true, CallbackLockTTL: 7,
		QueryAfter: 1, QueryHorizon: 2, QueryBatch: 3, RefundBatch: 4, RefundLease: 5, RefundBackoff: 6, RefundBackoffMax: 8,
		RefundAlertAfter: 10, ReconcileLookback: 9}
	if a != want {
		t.Fatalf("App() = %+v from %+v, want %+v", a, c, want)
	}
}
