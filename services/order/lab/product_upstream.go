package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// CopyRecord is one row of the upstream system's request-record table: a
// batch copy it wants the catalog to run.
type CopyRecord struct {
	RecordID    string   `json:"request_id"`
	SourceBrand string   `json:"source_brand,omitempty"`
	TemplateIDs []uint64 `json:"template_ids,omitempty"`
	TargetBrand string   `json:"target_brand"`
	OnDuplicate string   `json:"on_duplicate,omitempty"`
}

// DuplicateRecords reproduces the upstream bug of incident 3: every record
// was written twice into its request-record table. The copy has its own
// record id (it is another row) and identical parameters, and it sits right
// behind the original, so the job sends both within milliseconds.
func DuplicateRecords(records []CopyRecord) []CopyRecord {
	out := make([]CopyRecord, 0, 2*len(records))
	for _, r := range records {
		dup := r
		dup.RecordID = r.RecordID + "-dup"
		out = append(out, r, dup)
	}
	return out
}

// Upstream simulates the e-commerce platform's background job that calls the
// catalog's batch-copy API, and its users creating products by hand: both
// operator routes, called with the admin token.
type Upstream struct {
	BaseURL string
	// AdminToken is sent as the bearer token (the rig's is AdminToken).
	AdminToken string
	Client     *http.Client
}

// CopyAccepted is the 202 answer to a batch-copy request.
type CopyAccepted struct {
	JobID   string `json:"job_id"`
	Total   int    `json:"total"`
	Existed bool   `json:"existed"`
}

// RunJob sends every record's batch-copy request in a tight loop, as the
// upstream job does, and returns the accepted jobs' ids in order.
func (u Upstream) RunJob(ctx context.Context, records []CopyRecord) ([]string, error) {
	ids := make([]string, 0, len(records))
	for _, rec := range records {
		var acc CopyAccepted
		status, body, err := u.do(ctx, http.MethodPost, "/admin/products/batch-copy", rec, &acc)
		if err != nil {
			return ids, err
		}
		if status != http.StatusAccepted {
			return ids, fmt.Errorf("batch copy %s: %d %s", rec.RecordID, status, body)
		}
		ids = append(ids, acc.JobID)
	}
	return ids, nil
}

// SendTwice sends the same batch request twice within milliseconds (the
// record and its duplicate) and returns both job ids.
func (u Upstream) SendTwice(ctx context.Context, rec CopyRecord) ([]string, error) {
	return u.RunJob(ctx, DuplicateRecords([]CopyRecord{rec}))
}

// NewProduct is the body of POST /admin/products.
type NewProduct struct {
	Brand string `json:"brand"`
	Name  string `json:"name"`
	Model string `json:"model"`
	Price int64  `json:"price"`
}

// CreateResult is the answer to one POST /products.
type CreateResult struct {
	Status     int
	ID         uint64 // the created product (201)
	ExistingID uint64 // the product that already had the key (409)
}

// CreateProduct sends one POST /admin/products.
func (u Upstream) CreateProduct(ctx context.Context, p NewProduct) (CreateResult, error) {
	var out struct {
		ID         uint64 `json:"id"`
		ExistingID uint64 `json:"existing_id"`
	}
	status, body, err := u.do(ctx, http.MethodPost, "/admin/products", p, &out)
	if err != nil {
		return CreateResult{}, err
	}
	if status != http.StatusCreated && status != http.StatusConflict {
		return CreateResult{}, fmt.Errorf("create product %s/%s: %d %s", p.Name, p.Model, status, body)
	}
	return CreateResult{Status: status, ID: out.ID, ExistingID: out.ExistingID}, nil
}

// CreateWhileCopying starts the batch copy of rec and, delay later, creates
// products by hand through POST /admin/products: the second entry point racing
// the first while its workers run. It returns the copy's job id and every
// create's answer.
func (u Upstream) CreateWhileCopying(ctx context.Context, rec CopyRecord, products []NewProduct, delay time.Duration) (string, []CreateResult, error) {
	var (
		wg      sync.WaitGroup
		jobIDs  []string
		copyErr error
		results = make([]CreateResult, len(products))
		errs    = make([]error, len(products))
		start   = make(chan struct{})
	)
	wg.Go(func() {
		<-start
		jobIDs, copyErr = u.RunJob(ctx, []CopyRecord{rec})
	})
	for i, p := range products {
		wg.Go(func() {
			<-start
			time.Sleep(delay)
			results[i], errs[i] = u.CreateProduct(ctx, p)
		})
	}
	close(start)
	wg.Wait()
	if copyErr != nil {
		return "", nil, copyErr
	}
	for _, err := range errs {
		if err != nil {
			return "", nil, err
		}
	}
	return jobIDs[0], results, nil
}

// DeleteProduct sends DELETE /admin/products/:id and returns the status.
func (u Upstream) DeleteProduct(ctx context.Context, id uint64) (int, error) {
	status, _, err := u.do(ctx, http.MethodDelete, fmt.Sprintf("/admin/products/%d", id), nil, nil)
	return status, err
}

// do sends a JSON request and decodes a JSON answer into out when given.
func (u Upstream) do(ctx context.Context, method, path string, in, out any) (int, []byte, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, nil, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.BaseURL+path, body)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if u.AdminToken != "" {
		req.Header.Set("Authorization", "Bearer "+u.AdminToken)
	}
	client := u.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: read answer: %w", method, path, err)
	}
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, b, fmt.Errorf("%s %s: decode answer %q: %w", method, path, b, err)
		}
	}
	return resp.StatusCode, b, nil
}
