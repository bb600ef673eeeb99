package idempotencytest

import (
	"net/http"
	"testing"
)

// Target is an endpoint under the Idempotency-Key middleware, as RunSuite
// needs it.
type Target struct {
	Handler http.Handler
	// Request builds a request by caller with key. Variant 0 is the base
	// request; variant 1 the same operation with a different body.
	Request func(key, caller string, variant int) Request
	// Effects counts the business effects in the database (orders,
	// payments), all callers together.
	Effects func(t testing.TB) int
	// WantStatus is the endpoint's success status (201).
	WantStatus int
	// Callers are two distinct caller ids.
	Callers [2]string
}

// RunSuite runs the Idempotency-Key checks every guarded endpoint must pass,
// each as a subtest counting the effects it adds:
//
//   - 50 concurrent requests with one key: one effect; every answer is the
//     success (one fresh, the rest replayed, one body) or a 409 problem;
//   - 5 sequential retries: one effect, 5 identical answers, the last 4
//     replayed;
//   - the same key with a different body: 422 problem, no effect;
//   - no key: 400 problem, no effect;
//   - two callers with one key: two effects.
func RunSuite(t *testing.T, tgt Target) {
	delta := func(t *testing.T, run func()) int {
		t.Helper()
		before := tgt.Effects(t)
		run()
		return tgt.Effects(t) - before
	}
	a, b := tgt.Callers[0], tgt.Callers[1]

	t.Run("concurrent requests with one key have one effect", func(t *testing.T) {
		var rs []Response
		if n := delta(t, func() { rs = Race(tgt.Handler, 50, tgt.Request(NewKey(), a, 0)) }); n != 1 {
			t.Errorf("%d effects, want 1", n)
		}
		CheckOneEffect(t, rs, tgt.WantStatus)
	})

	t.Run("sequential retries are replayed", func(t *testing.T) {
		var rs []Response
		if n := delta(t, func() { rs = Sequential(tgt.Handler, 5, tgt.Request(NewKey(), a, 0)) }); n != 1 {
			t.Errorf("%d effects, want 1", n)
		}
		for i, r := range rs {
			if r.Status != tgt.WantStatus || string(r.Body) != string(rs[0].Body) || r.Replayed != (i > 0) {
				t.Errorf("response %d: %d replayed=%v %s; want %d, replayed=%v, the first body", i, r.Status, r.Replayed, r.Body, tgt.WantStatus, i > 0)
			}
		}
	})

	t.Run("a different body under the same key is refused", func(t *testing.T) {
		key := NewKey()
		if r := Do(tgt.Handler, tgt.Request(key, a, 0)); r.Status != tgt.WantStatus {
			t.Fatalf("first: %d %s", r.Status, r.Body)
		}
		var r Response
		if n := delta(t, func() { r = Do(tgt.Handler, tgt.Request(key, a, 1)) }); n != 0 {
			t.Errorf("%d effects from a refused request", n)
		}
		CheckProblem(t, r, http.StatusUnprocessableEntity)
	})

	t.Run("a missing key is refused", func(t *testing.T) {
		var r Response
		if n := delta(t, func() { r = Do(tgt.Handler, tgt.Request("", a, 0)) }); n != 0 {
			t.Errorf("%d effects from a refused request", n)
		}
		CheckProblem(t, r, http.StatusBadRequest)
	})

	t.Run("two callers with one key have two effects", func(t *testing.T) {
		key := NewKey()
		var ra, rb Response
		n := delta(t, func() {
			ra = Do(tgt.Handler, tgt.Request(key, a, 0))
			rb = Do(tgt.Handler, tgt.Request(key, b, 0))
		})
		if n != 2 || ra.Status != tgt.WantStatus || rb.Status != tgt.WantStatus || rb.Replayed {
			t.Errorf("%d effects (%d, %d replayed=%v), want 2 fresh", n, ra.Status, rb.Status, rb.Replayed)
		}
	})
}
