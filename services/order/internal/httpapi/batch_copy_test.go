package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/services/order/internal/httpapi"
)

// TestBatchCopyIsStartedOnceAndReportsItsProgress walks the operator's
// batch copy over HTTP: templates are stored (201 with their ids), a copy
// of them is accepted (202, Location naming its progress), the same
// request_id again answers the same job (existed), and the progress route
// shows the job queued (no worker runs here) and 404 for an unknown one.
func TestBatchCopyIsStartedOnceAndReportsItsProgress(t *testing.T) {
	s := newServer(t)
	rec := s.admin(http.MethodPost, "/admin/products/templates",
		`{"templates":[{"brand":"tpl","name":"Kettle","model":"K1","price":1500},{"brand":"tpl","name":"Lamp","model":"L1","price":99}]}`)
	if rec.Code != http.StatusCreated {
		t.Fatalf("templates: %d %s", rec.Code, rec.Body)
	}
	var tpl struct {
		TemplateIDs []uint64 `json:"template_ids"`
	}
	testenv.Must(t, json.Unmarshal(rec.Body.Bytes(), &tpl))
	if len(tpl.TemplateIDs) != 2 {
		t.Fatalf("template ids %v, want two", tpl.TemplateIDs)
	}

	body := fmt.Sprintf(`{"request_id":"copy-1","template_ids":[%d,%d],"target_brand":"acme"}`, tpl.TemplateIDs[0], tpl.TemplateIDs[1])
	type started struct {
		JobID     string `json:"job_id"`
		Total     int    `json:"total"`
		Existed   bool   `json:"existed"`
		StatusURL string `json:"status_url"`
	}
	var jobs []started
	for range 2 {
		rec := s.admin(http.MethodPost, "/admin/products/batch-copy", body)
		if rec.Code != http.StatusAccepted {
			t.Fatalf("batch copy: %d %s", rec.Code, rec.Body)
		}
		var j started
		testenv.Must(t, json.Unmarshal(rec.Body.Bytes(), &j))
		if loc := rec.Header().Get("Location"); loc != j.StatusURL || j.Total != 2 {
			t.Fatalf("batch copy: Location %q, answer %+v", loc, j)
		}
		jobs = append(jobs, j)
	}
	if jobs[0].Existed || !jobs[1].Existed || jobs[1].JobID != jobs[0].JobID {
		t.Fatalf("the same request_id twice: %+v, want one job, the second answer existed", jobs)
	}

	rec = s.admin(http.MethodGet, jobs[0].StatusURL, "")
	var p httpapi.CopyProgressJSON
	testenv.Must(t, json.Unmarshal(rec.Body.Bytes(), &p))
	// The copy may already be done: its two items are one small chunk.
	if rec.Code != http.StatusOK || p.JobID != jobs[0].JobID || p.RequestID != "copy-1" || p.TargetBrand != "acme" || p.Total != 2 ||
		p.Done != (p.ChunksDone == p.Chunks) || p.Done && p.Created+p.Skipped != 2 {
		t.Fatalf("progress: %d %s", rec.Code, rec.Body)
	}
	if rec := s.admin(http.MethodGet, "/admin/products/batch-copy/no-such-job", ""); rec.Code != http.StatusNotFound {
		t.Fatalf("progress of an unknown job: %d %s, want 404", rec.Code, rec.Body)
	}
}
