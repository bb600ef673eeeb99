// Package idempotencytest drives an http.Handler protected by the
// Idempotency-Key middleware and checks the answers. It is written for any
// endpoint: the package's own tests use it on a test handler, and a service
// runs the same checks on its real route (POST /orders, POST /payments).
package idempotencytest

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	"github.com/oncemall/oncemall/pkg/idempotency"
	"github.com/oncemall/oncemall/pkg/problem"
)

// Request describes one call.
type Request struct {
	Method string // default POST
	Path   string
	Key    string // the Idempotency-Key; empty sends none
	// Token is the caller's bearer access token (authtest's), sent as
	// Authorization; empty sends none.
	Token  string
	Body   []byte
	Header http.Header // any other headers
}

// Response is what came back.
type Response struct {
	Status   int
	Header   http.Header
	Body     []byte
	Replayed bool
}

// Do sends r to h in process.
func Do(h http.Handler, r Request) Response {
	method := r.Method
	if method == "" {
		method = http.MethodPost
	}
	req := httptest.NewRequest(method, r.Path, bytes.NewReader(r.Body))
	req.Header.Set("Content-Type", "application/json")
	for k, vs := range r.Header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	if r.Key != "" {
		req.Header.Set(idempotency.HeaderKey, r.Key)
	}
	if r.Token != "" {
		req.Header.Set("Authorization", "Bearer "+r.Token)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return Response{
		Status:   rec.Code,
		Header:   rec.Header(),
		Body:     rec.Body.Bytes(),
		Replayed: rec.Header().Get(idempotency.HeaderReplayed) == "true",
	}
}

// Race sends r n times from n goroutines released together, and returns the
// responses in no particular order.
func Race(h http.Handler, n int, r Request) []Response {
	out := make([]Response, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			out[i] = Do(h, r)
		}()
	}
	close(start)
	wg.Wait()
	return out
}

// Sequential sends r n times, one after the other.
func Sequential(h http.Handler, n int, r Request) []Response {
	out := make([]Response, n)
	for i := range out {
		out[i] = Do(h, r)
	}
	return out
}

// CheckOneEffect asserts the answers to many sends of one request: every
// response is either wantStatus with one identical body (all but the one
// that did the work marked replayed), or a 409 problem with Retry-After while
// the first was in progress. At least one must be wantStatus. It returns the
// body of the successful responses.
func CheckOneEffect(t testing.TB, rs []Response, wantStatus int) []byte {
	t.Helper()
	var body []byte
	var ok, conflicts, fresh int
	for _, r := range rs {
		switch r.Status {
		case wantStatus:
			ok++
			if !r.Replayed {
				fresh++
			}
			if body == nil {
				body = r.Body
			} else if !bytes.Equal(body, r.Body) {
				t.Errorf("responses differ:\n%s\n%s", body, r.Body)
			}
		case http.StatusConflict:
			conflicts++
			CheckProblem(t, r, http.StatusConflict)
			if s, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || s < 1 {
				t.Errorf("409 without a valid Retry-After: %q", r.Header.Get("Retry-After"))
			}
		default:
			t.Errorf("unexpected status %d: %s", r.Status, r.Body)
		}
	}
	if ok == 0 {
		t.Errorf("no %d among %d responses (%d conflicts)", wantStatus, len(rs), conflicts)
	}
	if fresh > 1 {
		t.Errorf("%d responses were produced by the handler, want 1 (the others replayed)", fresh)
	}
	return body
}

// CheckProblem asserts r is an application/problem+json answer with status.
func CheckProblem(t testing.TB, r Response, status int) {
	t.Helper()
	if r.Status != status {
		t.Errorf("status %d, want %d: %s", r.Status, status, r.Body)
	}
	if ct := r.Header.Get("Content-Type"); ct != problem.ContentType {
		t.Errorf("Content-Type %q, want %q", ct, problem.ContentType)
	}
}

// NewKey returns a valid random key.
func NewKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "key-" + hex.EncodeToString(b[:])
}
