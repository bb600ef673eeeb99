package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/variant"
	paymentlab "github.com/oncemall/oncemall/services/payment/lab"
	"github.com/oncemall/oncemall/services/payment/pspsim"
)

type reconcileJSON struct {
	Empty  bool `json:"empty"`
	Report struct {
		MultipleRecords []struct {
			OutTradeNo string `json:"out_trade_no"`
			Records    int    `json:"records"`
		} `json:"multiple_records"`
		MissingEvents    []string `json:"missing_events"`
		AmountMismatches []struct {
			OutTradeNo string `json:"out_trade_no"`
			Expected   int64  `json:"expected"`
			Recorded   int64  `json:"recorded"`
		} `json:"amount_mismatches"`
	} `json:"report"`
}

func (f *fixture) reconcile() reconcileJSON {
	f.t.Helper()
	status, body := f.get("/admin/reconcile", http.Header{"Authorization": {"Bearer " + paymentlab.AdminToken}})
	if status != http.StatusOK {
		f.t.Fatalf("reconcile: %d %s", status, body)
	}
	var r reconcileJSON
	if err := json.Unmarshal(body, &r); err != nil {
		f.t.Fatal(err)
	}
	return r
}

// TestReconcileFindsWhatTheBrokenHandlerLeaves: after a storm and a wrong
// amount on the broken handler, and a paid payment without its event, the
// report lists each; after the same on the fixed handler it is empty.
func TestReconcileFindsWhatTheBrokenHandlerLeaves(t *testing.T) {
	t.Run("broken", func(t *testing.T) {
		f := newFixture(t, variant.Broken)
		if status, _ := f.get("/admin/reconcile", nil); status != http.StatusUnauthorized {
			t.Fatalf("without the admin token: %d, want 401", status)
		}
		// Storms until one payment is recorded twice (usually the first).
		var stormed string
		for i := 0; i < 5 && stormed == ""; i++ {
			no := f.payment()
			f.charge(no, 4200, &pspsim.Plan{Mode: pspsim.ModeStorm, Copies: 50})
			if e := f.effects(no); e.Records > 1 {
				stormed = no
			}
		}
		if stormed == "" {
			t.Fatal("five storms never raced on the broken handler")
		}
		mismatched, silent := f.payment(), f.payment()
		f.charge(mismatched, 4200, &pspsim.Plan{Mode: pspsim.ModeWrongAmount})
		// A payment set PAID behind the handler's back: no event exists.
		if err := f.rig.DB.Exec("UPDATE payments SET status = 'PAID', paid_at = ? WHERE out_trade_no = ?", time.Now().UTC(), silent).Error; err != nil {
			t.Fatal(err)
		}
		r := f.reconcile()
		if r.Empty || len(r.Report.MultipleRecords) != 1 || r.Report.MultipleRecords[0].OutTradeNo != stormed || r.Report.MultipleRecords[0].Records < 2 {
			t.Fatalf("multiple records: %+v", r.Report.MultipleRecords)
		}
		if len(r.Report.AmountMismatches) != 1 || r.Report.AmountMismatches[0].OutTradeNo != mismatched || r.Report.AmountMismatches[0].Recorded != 4201 {
			t.Fatalf("amount mismatches: %+v", r.Report.AmountMismatches)
		}
		if len(r.Report.MissingEvents) != 1 || r.Report.MissingEvents[0] != silent {
			t.Fatalf("missing events: %+v", r.Report.MissingEvents)
		}
	})
	t.Run("fixed", func(t *testing.T) {
		f := newFixture(t, variant.Fixed)
		stormed, mismatched := f.payment(), f.payment()
		f.charge(stormed, 4200, &pspsim.Plan{Mode: pspsim.ModeStorm, Copies: 30, Replays: 5})
		f.charge(mismatched, 4200, &pspsim.Plan{Mode: pspsim.ModeWrongAmount})
		if r := f.reconcile(); !r.Empty {
			t.Fatalf("fixed handler leaves findings: %+v", r.Report)
		}
		if e, _ := f.rig.Effects(context.Background(), stormed); e.Status != "PAID" {
			t.Fatalf("stormed payment not paid: %+v", e)
		}
	})
}
