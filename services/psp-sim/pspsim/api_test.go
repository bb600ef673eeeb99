package pspsim_test

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"testing"

	"github.com/oncemall/oncemall/pkg/psp"
	"github.com/oncemall/oncemall/pkg/testkit/apitest"
	"github.com/oncemall/oncemall/services/psp-sim/pspsim"
)

// spec is the simulator's contract, docs/api/psp-sim.yaml: startSim's
// server checks every request the tests and the merchants' clients send,
// and every answer, against it.
var spec = apitest.MustLoad("psp-sim.yaml")

// TestMain fails the package when an operation of psp-sim.yaml is never
// exercised here.
func TestMain(m *testing.M) { apitest.Main(m, spec, nil) }

// TestTheLabReadsChargesAndRefundsOverHTTP: GET /charges/{serial} and GET
// /refunds/{refund_no} answer what Get and GetRefund return in process,
// attempts included, and 404 for what the simulator never made; GET
// /healthz answers while it runs.
func TestTheLabReadsChargesAndRefundsOverHTTP(t *testing.T) {
	m := newMerchant(t, func(int, received) int { return http.StatusOK })
	rm := newRefundMerchant(t, func(int) int { return http.StatusOK })
	sim, c := startSim(t, config())
	ch := charge(t, sim, c, m, nil)
	if _, err := c.Refund(context.Background(), psp.RefundRequest{RefundNo: "R1", OutTradeNo: "P1", Amount: 4200, NotifyURL: rm.srv.URL}); err != nil {
		t.Fatal(err)
	}
	wait(t, sim)

	var gotCharge pspsim.Charge
	if status := getJSON(t, c.url+"/charges/"+ch.Notification.PlatformSerial, &gotCharge); status != http.StatusOK {
		t.Fatalf("GET /charges/{serial}: %d", status)
	}
	want, _ := sim.Get(ch.Notification.PlatformSerial)
	if !sameJSON(t, gotCharge, want) || len(gotCharge.Attempts) != 1 || !gotCharge.Acknowledged {
		t.Fatalf("GET /charges/{serial}: %+v, want %+v", gotCharge, want)
	}
	var gotRefund pspsim.Refund
	if status := getJSON(t, c.url+"/refunds/R1", &gotRefund); status != http.StatusOK {
		t.Fatalf("GET /refunds/R1: %d", status)
	}
	wantRefund, _ := sim.GetRefund("R1")
	if !sameJSON(t, gotRefund, wantRefund) || gotRefund.Requests != 1 || !gotRefund.Done {
		t.Fatalf("GET /refunds/R1: %+v, want %+v", gotRefund, wantRefund)
	}
	for _, path := range []string{"/charges/T-none", "/refunds/R-none"} {
		if status := getJSON(t, c.url+path, &map[string]string{}); status != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", path, status)
		}
	}
	var health map[string]string
	if status := getJSON(t, c.url+"/healthz", &health); status != http.StatusOK || health["status"] != "ok" {
		t.Fatalf("GET /healthz: %d %v", status, health)
	}
}

// getJSON decodes the answer to GET url into v and returns its status.
func getJSON(t *testing.T, url string, v any) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode
}

// sameJSON reports whether a and b read the same on the wire: the
// simulator's types keep unexported bookkeeping that JSON leaves out.
func sameJSON(t *testing.T, a, b any) bool {
	t.Helper()
	ja, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	jb, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	var va, vb any
	_ = json.Unmarshal(ja, &va)
	_ = json.Unmarshal(jb, &vb)
	return reflect.DeepEqual(va, vb)
}
