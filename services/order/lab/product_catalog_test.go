package lab

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/inbox"
	"github.com/oncemall/oncemall/pkg/variant"
	"github.com/oncemall/oncemall/services/order/internal/config"
	"github.com/oncemall/oncemall/services/order/internal/product"
)

// TestProductCRUD checks the catalog's endpoints in every mode: bad input is
// refused with 400 and writes nothing, reads skip deleted products, and a
// sequential duplicate is refused with 409 naming the existing product.
func TestProductCRUD(t *testing.T) {
	for _, mode := range []variant.Mode{variant.Fixed, config.Orderly, variant.Broken} {
		t.Run(string(mode), func(t *testing.T) {
			rig := startRig(t, mode, 4, 100)
			for _, body := range []string{
				`{"brand":"b","model":"m","price":1}`,                       // no name
				`{"brand":"b","name":"n","model":"m","price":-1}`,           // negative price
				`{"brand":"b","name":"n","model":"m"}`,                      // no price
				`{"brand":"b","name":"n","model":"m","price":1,"colour":1}`, // unknown field
				`{"brand":"b","name":"n","model":"m","price":1}{}`,          // trailing data
				`{"brand":"b","name":"` + strings.Repeat("x", 131) + `","model":"m","price":1}`,
				`not json`,
				``,
			} {
				if status, doc := call(t, http.MethodPost, rig.URL+"/admin/products", body); status != http.StatusBadRequest {
					t.Errorf("POST /products %s: %d %v, want 400", body, status, doc)
				}
			}
			if n := count(t, rig, "SELECT COUNT(*) FROM products"); n != 0 {
				t.Fatalf("bad input wrote %d products", n)
			}

			status, p := call(t, http.MethodPost, rig.URL+"/admin/products", `{"brand":"acme","name":" Phone ","model":"X1","price":1999}`)
			if status != http.StatusCreated || p["name"] != "Phone" {
				t.Fatalf("create: %d %v", status, p)
			}
			id := num(p["id"])
			if status, got := call(t, http.MethodGet, fmt.Sprintf("%s/products/%d", rig.URL, id), ""); status != http.StatusOK || num(got["id"]) != id || num(got["price"]) != 1999 {
				t.Fatalf("get: %d %v", status, got)
			}
			status, dup := call(t, http.MethodPost, rig.URL+"/admin/products", `{"brand":"other","name":"Phone","model":"X1","price":5}`)
			if status != http.StatusConflict || num(dup["existing_id"]) != id {
				t.Fatalf("duplicate create: %d %v, want 409 naming %d", status, dup, id)
			}
			if status, _ := call(t, http.MethodPost, rig.URL+"/admin/products", `{"brand":"acme","name":"Phone","model":"X2","price":1}`); status != http.StatusCreated {
				t.Fatalf("another model: %d", status)
			}
			if _, list := call(t, http.MethodGet, rig.URL+"/products?brand=acme", ""); len(list["products"].([]any)) != 2 {
				t.Fatalf("list before delete: %v", list)
			}

			if status, _ := call(t, http.MethodDelete, fmt.Sprintf("%s/admin/products/%d", rig.URL, id), ""); status != http.StatusNoContent {
				t.Fatalf("delete: %d", status)
			}
			for _, path := range []string{fmt.Sprintf("/products/%d", id), "/products/999999", "/products/abc", "/admin/products/batch-copy/nope"} {
				if status, _ := call(t, http.MethodGet, rig.URL+path, ""); status != http.StatusNotFound {
					t.Errorf("GET %s: %d, want 404", path, status)
				}
			}
			if status, _ := call(t, http.MethodDelete, fmt.Sprintf("%s/admin/products/%d", rig.URL, id), ""); status != http.StatusNotFound {
				t.Errorf("second delete: %d, want 404", status)
			}
			if _, list := call(t, http.MethodGet, rig.URL+"/products?brand=acme", ""); len(list["products"].([]any)) != 1 {
				t.Fatalf("list after delete still shows the deleted product: %v", list)
			}
			if status, _ := call(t, http.MethodGet, rig.URL+"/products", ""); status != http.StatusBadRequest {
				t.Errorf("list without brand: %d, want 400", status)
			}
			if n := count(t, rig, "SELECT COUNT(*) FROM products WHERE id = ? AND deleted = 1 AND deleted_at IS NOT NULL", id); n != 1 {
				t.Fatalf("deletion is not logical: %d rows kept", n)
			}
		})
	}
}

// TestCreateDeleteCycle creates, deletes, creates, deletes and creates the
// same (name, model), each create raced by 20 concurrent requests: exactly
// one wins every time, and there is never more than one live product.
func TestCreateDeleteCycle(t *testing.T) {
	rig := startRig(t, variant.Fixed, 4, 100)
	up := rig.Upstream()
	ctx := context.Background()
	p := NewProduct{Brand: "acme", Name: "Kettle", Model: "K-7", Price: 2500}
	for round := range 3 {
		results := make([]CreateResult, 20)
		var wg sync.WaitGroup
		for i := range results {
			wg.Go(func() {
				var err error
				if results[i], err = up.CreateProduct(ctx, p); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		var winner uint64
		for _, r := range results {
			if r.Status == http.StatusCreated {
				if winner != 0 {
					t.Fatalf("round %d: two creates won (%d and %d)", round, winner, r.ID)
				}
				winner = r.ID
			}
		}
		if winner == 0 {
			t.Fatalf("round %d: no create won: %+v", round, results)
		}
		for _, r := range results {
			if r.Status == http.StatusConflict && r.ExistingID != winner {
				t.Fatalf("round %d: 409 names %d, want the winner %d", round, r.ExistingID, winner)
			}
		}
		if n, _ := rig.LiveProducts(ctx, p.Name, p.Model); n != 1 {
			t.Fatalf("round %d: %d live products after create, want 1", round, n)
		}
		if round == 2 {
			break
		}
		if status, err := up.DeleteProduct(ctx, winner); err != nil || status != http.StatusNoContent {
			t.Fatalf("round %d: delete %d: %d %v", round, winner, status, err)
		}
		if n, _ := rig.LiveProducts(ctx, p.Name, p.Model); n != 0 {
			t.Fatalf("round %d: %d live products after delete, want 0", round, n)
		}
	}
	if n := count(t, rig, "SELECT COUNT(*) FROM products WHERE name = ? AND model = ?", p.Name, p.Model); n != 3 {
		t.Fatalf("%d product rows in all, want 3 (two deleted, one live)", n)
	}
}

// TestCreateRacingBatchCopy races, 50 times at once, a batch copy of one
// template against a POST /products of the same name and model: each pair
// ends with exactly one live product, and every answer names it.
func TestCreateRacingBatchCopy(t *testing.T) {
	const races = 50
	rig := startRig(t, variant.Fixed, 16, 100)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ids, err := rig.SeedTemplates(ctx, "default", "race", races)
	if err != nil {
		t.Fatal(err)
	}
	up := rig.Upstream()
	// A copy reaches the database some milliseconds after its 202 (outbox,
	// relay, stream, worker), later when fifty run at once. Measure how long
	// fifty concurrent copies take, then spread the creates' start over that
	// span, so the two entry points meet at the database instead of the
	// create always arriving first.
	calib, err := rig.SeedTemplates(ctx, "calibration", "calib", races)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	calibJobs := make([]string, races)
	var cwg sync.WaitGroup
	for i := range races {
		cwg.Go(func() {
			ids, err := up.RunJob(ctx, []CopyRecord{{RecordID: fmt.Sprintf("calib-%d", i), TemplateIDs: calib[i : i+1], TargetBrand: "shop"}})
			if err != nil {
				t.Error(err)
				return
			}
			calibJobs[i] = ids[0]
		})
	}
	cwg.Wait()
	if _, err := rig.WaitJobs(ctx, 30*time.Second, calibJobs...); err != nil {
		t.Fatal(err)
	}
	latency := time.Since(start)

	jobs := make([]string, races)
	creates := make([]CreateResult, races)
	var wg sync.WaitGroup
	for i := range races {
		wg.Go(func() {
			rec := CopyRecord{RecordID: fmt.Sprintf("race-%d", i), TemplateIDs: []uint64{ids[i]}, TargetBrand: "shop"}
			p := NewProduct{Brand: "shop", Name: fmt.Sprintf("race-%05d", i), Model: fmt.Sprintf("M-race-%05d", i), Price: 1}
			delay := latency * time.Duration(i) / races
			job, res, err := up.CreateWhileCopying(ctx, rec, []NewProduct{p}, delay)
			if err != nil {
				t.Error(err)
				return
			}
			jobs[i], creates[i] = job, res[0]
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	progress, err := rig.WaitJobs(ctx, 45*time.Second, jobs...)
	if err != nil {
		t.Fatal(err)
	}
	copyWon := 0
	for i := range races {
		name, model := fmt.Sprintf("race-%05d", i), fmt.Sprintf("M-race-%05d", i)
		var live []uint64
		if err := rig.DB.Raw("SELECT id FROM products WHERE deleted = 0 AND name = ? AND model = ?", name, model).Scan(&live).Error; err != nil {
			t.Fatal(err)
		}
		if len(live) != 1 {
			t.Fatalf("race %d: %d live products, want 1", i, len(live))
		}
		pr, c := progress[i], creates[i]
		switch {
		case c.Status == http.StatusCreated && c.ID == live[0] && pr.Skipped == 1 && pr.Duplicates[0].ExistingID == live[0]:
		case c.Status == http.StatusConflict && c.ExistingID == live[0] && pr.Created == 1:
			copyWon++
		default:
			t.Fatalf("race %d: live product %d, create answered %+v, copy created %d skipped %d %+v", i, live[0], c, pr.Created, pr.Skipped, pr.Duplicates)
		}
	}
	t.Logf("copy latency %s; the batch copy won %d of %d races, POST /products the others", latency, copyWon, races)
}

// TestAllOrNothingAndSkipDuplicates copies ten templates, one of which
// already exists as a product: all-or-nothing creates none and names the
// duplicate; skip-duplicates creates the nine others and returns the
// existing product's id.
func TestAllOrNothingAndSkipDuplicates(t *testing.T) {
	rig := startRig(t, variant.Fixed, 4, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ids, err := rig.SeedTemplates(ctx, "default", "aon", 10)
	if err != nil {
		t.Fatal(err)
	}
	status, existing := call(t, http.MethodPost, rig.URL+"/admin/products", `{"brand":"elsewhere","name":"aon-00004","model":"M-aon-00004","price":1}`)
	if status != http.StatusCreated {
		t.Fatalf("create the existing product: %d %v", status, existing)
	}
	existingID := num(existing["id"])

	status, acc := call(t, http.MethodPost, rig.URL+"/admin/products/batch-copy", jsonBody(t, CopyRecord{RecordID: "aon-1", SourceBrand: "default", TargetBrand: "shop", OnDuplicate: "fail"}))
	if status != http.StatusAccepted || num(acc["chunks"]) != 1 {
		t.Fatalf("all-or-nothing copy: %d %v, want 202 with one chunk", status, acc)
	}
	if _, err := rig.WaitJobs(ctx, 30*time.Second, acc["job_id"].(string)); err != nil {
		t.Fatal(err)
	}
	_, job := call(t, http.MethodGet, rig.URL+"/admin/products/batch-copy/"+acc["job_id"].(string), "")
	if job["status"] != product.JobCompletedWithFailures || job["done"] != true || num(job["created"]) != 0 || num(job["failed"]) != 10 || num(job["total"]) != 10 {
		t.Fatalf("all-or-nothing job: %v", job)
	}
	errs := fmt.Sprint(job["errors"])
	if !strings.Contains(errs, "aon-00004") || !strings.Contains(errs, fmt.Sprintf("product %d", existingID)) {
		t.Fatalf("all-or-nothing error does not name the duplicate: %s", errs)
	}
	dups := job["duplicates"].([]any)
	if len(dups) != 1 || num(dups[0].(map[string]any)["existing_id"]) != existingID || num(dups[0].(map[string]any)["template_id"]) != ids[4] {
		t.Fatalf("duplicates: %v", dups)
	}
	if n := count(t, rig, "SELECT COUNT(*) FROM products WHERE brand = 'shop'"); n != 0 {
		t.Fatalf("all-or-nothing wrote %d products", n)
	}

	status, acc = call(t, http.MethodPost, rig.URL+"/admin/products/batch-copy", jsonBody(t, CopyRecord{RecordID: "aon-2", TemplateIDs: ids, TargetBrand: "shop", OnDuplicate: "skip"}))
	if status != http.StatusAccepted || num(acc["chunks"]) != 4 {
		t.Fatalf("skip copy: %d %v, want 202 with 4 chunks of 3", status, acc)
	}
	if _, err := rig.WaitJobs(ctx, 30*time.Second, acc["job_id"].(string)); err != nil {
		t.Fatal(err)
	}
	_, job = call(t, http.MethodGet, rig.URL+"/admin/products/batch-copy/"+acc["job_id"].(string), "")
	if job["status"] != product.JobCompleted || num(job["created"]) != 9 || num(job["skipped"]) != 1 || num(job["failed"]) != 0 {
		t.Fatalf("skip job: %v", job)
	}
	if dups := job["duplicates"].([]any); len(dups) != 1 || num(dups[0].(map[string]any)["existing_id"]) != existingID {
		t.Fatalf("skip job duplicates: %v", dups)
	}
	if n := count(t, rig, "SELECT COUNT(*) FROM products WHERE brand = 'shop' AND deleted = 0"); n != 9 {
		t.Fatalf("skip wrote %d products, want 9", n)
	}
	if n := count(t, rig, "SELECT COUNT(*) FROM product_dedup"); n != 10 {
		t.Fatalf("%d dedup rows, want 10 (one per live product)", n)
	}
}

// TestBatchCopyRequests checks the batch-copy API's refusals (nothing
// written) and that a resubmitted request id returns its job.
func TestBatchCopyRequests(t *testing.T) {
	rig := startRig(t, variant.Fixed, 4, 100)
	ctx := context.Background()
	ids, err := rig.SeedTemplates(ctx, "default", "req", 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{
		`{"source_brand":"default","target_brand":"shop"}`,                                     // no request id
		`{"request_id":"r","target_brand":"shop"}`,                                             // no selection
		`{"request_id":"r","source_brand":"default","template_ids":[1],"target_brand":"shop"}`, // both
		`{"request_id":"r","source_brand":"default"}`,                                          // no target
		`{"request_id":"r","source_brand":"default","target_brand":"shop","on_duplicate":"x"}`,
		`{"request_id":"r","template_ids":[1,2,424242],"target_brand":"shop"}`, // unknown template
		`{"request_id":"r","source_brand":"nobody","target_brand":"shop"}`,     // nothing to copy
	} {
		if status, doc := call(t, http.MethodPost, rig.URL+"/admin/products/batch-copy", body); status != http.StatusBadRequest {
			t.Errorf("%s: %d %v, want 400", body, status, doc)
		}
	}
	if n := count(t, rig, "SELECT (SELECT COUNT(*) FROM product_copy_jobs) + (SELECT COUNT(*) FROM local_message)"); n != 0 {
		t.Fatalf("refused requests wrote %d rows", n)
	}

	body := jsonBody(t, CopyRecord{RecordID: "same", TemplateIDs: ids, TargetBrand: "shop"})
	_, first := call(t, http.MethodPost, rig.URL+"/admin/products/batch-copy", body)
	status, second := call(t, http.MethodPost, rig.URL+"/admin/products/batch-copy", body)
	if status != http.StatusAccepted || second["job_id"] != first["job_id"] || second["existed"] != true {
		t.Fatalf("resubmitted request id: %d %v, first %v", status, second, first)
	}
	if n := count(t, rig, "SELECT COUNT(*) FROM product_copy_jobs"); n != 1 {
		t.Fatalf("%d jobs for one request id", n)
	}
}

// TestChunkRedeliveryCountsOnce processes a finished chunk again, as a
// redelivery past the inbox would: nothing is created or counted twice.
func TestChunkRedeliveryCountsOnce(t *testing.T) {
	rig := startRig(t, variant.Fixed, 4, 100)
	ctx := context.Background()
	ids, err := rig.SeedTemplates(ctx, "default", "redo", 5)
	if err != nil {
		t.Fatal(err)
	}
	job, _, err := rig.App.StartCopy(ctx, product.CopyRequest{RequestID: "redo", TemplateIDs: ids, TargetBrand: "shop"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rig.WaitJobs(ctx, 30*time.Second, job.ID); err != nil {
		t.Fatal(err)
	}
	chunk := product.SplitChunks(job, ids, 100)[0]
	var done bool
	err = rig.Store.InTx(ctx, func(tx product.Tx) error {
		var err error
		done, err = rig.App.CopyChunk(ctx, tx, chunk)
		return err
	})
	if err != nil || done {
		t.Fatalf("second processing: done=%v err=%v, want a no-op", done, err)
	}
	p, err := rig.App.CopyProgress(ctx, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if p.Created != 5 || p.Skipped != 0 || count(t, rig, "SELECT COUNT(*) FROM products") != 5 {
		t.Fatalf("after a redelivery: created %d skipped %d, %d products", p.Created, p.Skipped, count(t, rig, "SELECT COUNT(*) FROM products"))
	}
}

// TestAllOrNothingLimit copies the largest all-or-nothing batch allowed in
// its single transaction, and refuses one product more before writing
// anything.
func TestAllOrNothingLimit(t *testing.T) {
	const limit = 5000 // the rig's MaxAllOrNothing
	rig := startRig(t, variant.Fixed, 4, 100)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ids, err := rig.SeedTemplates(ctx, "big", "big", limit+1)
	if err != nil {
		t.Fatal(err)
	}
	status, doc := call(t, http.MethodPost, rig.URL+"/admin/products/batch-copy", jsonBody(t, CopyRecord{RecordID: "too-big", SourceBrand: "big", TargetBrand: "shop", OnDuplicate: "fail"}))
	if status != http.StatusBadRequest || !strings.Contains(fmt.Sprint(doc["detail"]), "at most 5000") {
		t.Fatalf("all-or-nothing over the limit: %d %v, want 400", status, doc)
	}
	if n := count(t, rig, "SELECT COUNT(*) FROM product_copy_jobs"); n != 0 {
		t.Fatalf("a refused request wrote %d jobs", n)
	}
	status, acc := call(t, http.MethodPost, rig.URL+"/admin/products/batch-copy", jsonBody(t, CopyRecord{RecordID: "at-limit", TemplateIDs: ids[:limit], TargetBrand: "shop", OnDuplicate: "fail"}))
	if status != http.StatusAccepted || num(acc["chunks"]) != 1 {
		t.Fatalf("all-or-nothing at the limit: %d %v", status, acc)
	}
	p, err := rig.WaitJobs(ctx, 45*time.Second, acc["job_id"].(string))
	if err != nil {
		t.Fatal(err)
	}
	if p[0].Created != limit || count(t, rig, "SELECT COUNT(*) FROM product_dedup") != limit {
		t.Fatalf("created %d, %d dedup rows; want %d of each", p[0].Created, count(t, rig, "SELECT COUNT(*) FROM product_dedup"), limit)
	}
}

// TestUnusableChunkMessagesAreDead hands the consumer a chunk message that
// cannot be read and one for a job that does not exist: redelivery cannot
// help either, so both are dead at once and create nothing.
func TestUnusableChunkMessagesAreDead(t *testing.T) {
	rig := startRig(t, variant.Fixed, 4, 100)
	ctx := context.Background()
	for id, body := range map[string]string{
		"garbled":     `{"job_id": 12`,
		"unknown-job": `{"job_id":"no-such-job","seq":0,"target_brand":"shop","on_duplicate":"skip","template_ids":[1]}`,
	} {
		out, err := rig.Consumer.Process(ctx, inbox.Message{ID: id, Subject: "x.product.batch_copy", Body: []byte(body)})
		if out != inbox.Dead || err == nil {
			t.Errorf("%s: outcome %s, err %v; want dead", id, out, err)
		}
	}
	if n := count(t, rig, "SELECT COUNT(*) FROM dead_message"); n != 2 {
		t.Fatalf("%d dead messages, want 2", n)
	}
	if n := count(t, rig, "SELECT COUNT(*) FROM products"); n != 0 {
		t.Fatalf("unusable messages created %d products", n)
	}
}
