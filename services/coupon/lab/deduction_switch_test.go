package lab_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/oncemall/oncemall/pkg/variant"
	"github.com/oncemall/oncemall/services/coupon/internal/assembly"
	"github.com/oncemall/oncemall/services/coupon/internal/coupontest"
	couponlab "github.com/oncemall/oncemall/services/coupon/lab"
)

// TestDeductionSwitch: the lab service's deduction starts fixed, the
// operator's PUT /admin/lab/deduction turns it broken and takes the
// ledger's per-order unique key away (the incident's schema), then fixed
// again (the schema stays); a customer's token and a mode that is neither
// are refused and change nothing.
func TestDeductionSwitch(t *testing.T) {
	cfg := coupontest.Config(t, nil)
	var o assembly.Options
	couponlab.Plug(&o, cfg)
	svc := coupontest.StartWith(t, cfg, o)
	operator, customer := svc.Issuer.Token(t, 1, "operator"), svc.Issuer.Token(t, 42)
	send := func(method, token, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, svc.URL+"/admin/lab/deduction", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct {
			Mode string `json:"mode"`
		}
		b, _ := io.ReadAll(resp.Body)
		_ = json.Unmarshal(b, &out)
		return resp.StatusCode, out.Mode
	}
	uniqueKey := func() int {
		return svc.Count(t, "information_schema.statistics",
			"table_schema = DATABASE() AND table_name = 'coupon_deduction' AND index_name = 'uk_coupon_deduction_order'")
	}
	if st, mode := send(http.MethodGet, operator, ""); st != http.StatusOK || mode != "fixed" || uniqueKey() == 0 {
		t.Fatalf("at start: %d %q, unique key %d; want fixed on the service's schema", st, mode, uniqueKey())
	}
	for _, c := range []struct{ token, body string }{{customer, `{"mode":"broken"}`}, {operator, `{"mode":"sloppy"}`}} {
		if st, _ := send(http.MethodPut, c.token, c.body); st/100 != 4 {
			t.Errorf("PUT %s: %d, want refused", c.body, st)
		}
	}
	if o.Deducer.Mode() != variant.Fixed || uniqueKey() == 0 {
		t.Fatalf("refused switches changed the deduction: %s, unique key %d", o.Deducer.Mode(), uniqueKey())
	}
	if st, mode := send(http.MethodPut, operator, `{"mode":"broken"}`); st != http.StatusOK || mode != "broken" || o.Deducer.Mode() != variant.Broken || uniqueKey() != 0 {
		t.Fatalf("switched to broken: %d %q, deducer %s, unique key %d", st, mode, o.Deducer.Mode(), uniqueKey())
	}
	if st, mode := send(http.MethodPut, operator, `{"mode":"fixed"}`); st != http.StatusOK || mode != "fixed" || o.Deducer.Mode() != variant.Fixed {
		t.Fatalf("switched back: %d %q, deducer %s", st, mode, o.Deducer.Mode())
	}
	if st, mode := send(http.MethodGet, operator, ""); st != http.StatusOK || mode != "fixed" {
		t.Fatalf("after switching back: %d %q", st, mode)
	}
}
