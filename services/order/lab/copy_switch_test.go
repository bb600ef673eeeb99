package lab

import (
	"net/http"
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/variant"
)

// TestCopySwitch drives the console's switch for incident 3 on the service
// as cmd/order runs it in the lab (fixed mode, 16 copy workers): each run
// sends its batch copy twice through the service's own batch-copy path and
// the consumer pool. Broken with several workers writes duplicates, broken
// with one worker does not (the orderly fix), fixed absorbs every copy's
// products whatever the workers; and the rest of the catalog stays on the
// fix (a POST /admin/products of a taken key is 409).
func TestCopySwitch(t *testing.T) {
	rig := startRig(t, variant.Fixed, 16, 10)
	base := rig.Service.URL + "/admin/lab/product-copy"
	const products = 30
	run := func(t *testing.T, v variant.Mode, workers int) map[string]any {
		t.Helper()
		status, acc := call(t, http.MethodPost, base, jsonBody(t, map[string]any{"variant": v, "workers": workers, "copies": 2, "products": products}))
		if status != http.StatusAccepted {
			t.Fatalf("start a run: %d %v", status, acc)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			status, got := call(t, http.MethodGet, base+"/"+acc["run"].(string), "")
			if status != http.StatusOK {
				t.Fatalf("read the run: %d %v", status, got)
			}
			if num(got["chunks"]) == 6 && num(got["chunks_done"]) == 6 {
				if num(got["created"])+num(got["skipped"]) != 2*products || num(got["live"]) != num(got["created"]) {
					t.Fatalf("the jobs' counts disagree with the catalog: %v", got)
				}
				return got
			}
			if time.Now().After(deadline) {
				t.Fatalf("run not done after 30 s: %v", got)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if got := run(t, variant.Broken, 4); num(got["duplicates"]) == 0 {
		t.Errorf("broken, 4 workers: no duplicates: %v", got)
	}
	if got := run(t, variant.Broken, 1); num(got["duplicates"]) != 0 || num(got["skipped"]) != products {
		t.Errorf("broken, 1 worker: %v, want no duplicates and every copy's product skipped", got)
	}
	if got := run(t, variant.Fixed, 8); num(got["duplicates"]) != 0 || num(got["created"]) != products || num(got["skipped"]) != products {
		t.Errorf("fixed, 8 workers: %v, want %d created, %d absorbed, no duplicates", got, products, products)
	}
	for _, body := range []string{`{"variant":"sloppy","workers":2,"copies":2,"products":5}`, `{"variant":"fixed","workers":17,"copies":2,"products":5}`} {
		if status, _ := call(t, http.MethodPost, base, body); status != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", body, status)
		}
	}
	if status, _ := call(t, http.MethodGet, base+"/nosuchrun", ""); status != http.StatusNotFound {
		t.Errorf("an unknown run: %d, want 404", status)
	}
	p := jsonBody(t, map[string]any{"brand": "plain", "name": "kettle", "model": "K1", "price": 100})
	if status, _ := call(t, http.MethodPost, rig.Service.URL+"/admin/products", p); status != http.StatusCreated {
		t.Fatalf("create a product: %d", status)
	}
	if status, _ := call(t, http.MethodPost, rig.Service.URL+"/admin/products", p); status != http.StatusConflict {
		t.Errorf("the same product again: %d, want 409 (the fix, outside any run)", status)
	}
}
