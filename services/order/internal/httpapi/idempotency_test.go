package httpapi_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/oncemall/oncemall/pkg/testkit/idempotencytest"
	"github.com/oncemall/oncemall/services/order/internal/assembly"
)

// guardedServer is POST /orders as cmd/order serves it: the
// Idempotency-Key guard and the form-token check in front, the record
// completed inside the order's transaction.
type guardedServer struct {
	*server
	// product is what the suite's requests order, with stock for all of
	// them.
	product uint64
}

func newGuardedServer(t *testing.T, s *server) *guardedServer {
	t.Helper()
	return &guardedServer{server: s, product: s.Product(t, "Kettle", 1999, 100_000)}
}

func orderTarget(s *guardedServer) idempotencytest.Target {
	return idempotencytest.Target{
		Handler: s.e,
		Request: func(key, caller string, variant int) idempotencytest.Request {
			body := fmt.Sprintf(`{"items":[{"product_id":%d,"quantity":1}]}`, s.product)
			if variant == 1 {
				body = fmt.Sprintf(`{"items":[{"product_id":%d,"quantity":2}]}`, s.product)
			}
			return idempotencytest.Request{
				Path: "/orders", Key: key, Token: s.callerToken(caller),
				Body: []byte(body), Header: http.Header{"Content-Type": {"application/json"}},
			}
		},
		Effects:    func(t testing.TB) int { return int(s.count(t.(*testing.T), "orders")) },
		WantStatus: http.StatusCreated,
		Callers:    [2]string{"101", "202"},
	}
}

// TestCreateOrderIdempotencyKey runs the Idempotency-Key suite on the real
// POST /orders: one order per key under a 50-way race, replayed retries,
// 422 on a changed body, 400 without a key, one order per user.
func TestCreateOrderIdempotencyKey(t *testing.T) {
	idempotencytest.RunSuite(t, orderTarget(newGuardedServer(t, newServer(t))))
}

// TestCreateOrderIdempotencyKeyWithRedisDown proves Redis is only the entry
// layer: pointed at a dead port, the database alone still lets one order
// through per key.
func TestCreateOrderIdempotencyKeyWithRedisDown(t *testing.T) {
	s := newGuardedServer(t, newServerRedisDown(t, nil, assembly.Options{}))
	before := s.count(t, "orders")
	rs := idempotencytest.Race(s.e, 50, orderTarget(s).Request(idempotencytest.NewKey(), "101", 0))
	if n := s.count(t, "orders") - before; n != 1 {
		t.Fatalf("%d orders for one key with Redis down, want 1", n)
	}
	idempotencytest.CheckOneEffect(t, rs, http.StatusCreated)
}

// TestCreateOrderRejectedInputIsReplayedNotRerun checks that a deterministic
// 400 (a bad quantity) is stored and replayed, writing nothing either time.
func TestCreateOrderRejectedInputIsReplayedNotRerun(t *testing.T) {
	s := newGuardedServer(t, newServer(t))
	req := orderTarget(s).Request(idempotencytest.NewKey(), "101", 0)
	req.Body = []byte(fmt.Sprintf(`{"items":[{"product_id":%d,"quantity":-5}]}`, s.product))
	first := idempotencytest.Do(s.e, req)
	second := idempotencytest.Do(s.e, req)
	if first.Status != http.StatusBadRequest || second.Status != http.StatusBadRequest || !second.Replayed || string(first.Body) != string(second.Body) {
		t.Fatalf("first %d %s, second %d replayed=%v %s", first.Status, first.Body, second.Status, second.Replayed, second.Body)
	}
	if n := s.count(t, "orders"); n != 0 {
		t.Fatalf("%d orders written for a rejected request", n)
	}
}

// TestFormTokenIsSpentOnce shows the synchronous-only scheme: a token from
// GET /orders/token admits exactly one POST /orders, even when the client
// sends two requests with different Idempotency-Keys.
func TestFormTokenIsSpentOnce(t *testing.T) {
	s := newGuardedServer(t, newServer(t))

	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/orders/token", nil)
	req.Header.Set("Authorization", "Bearer "+s.Token(t, 101))
	s.e.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK && rec.Code != http.StatusCreated {
		t.Fatalf("GET /orders/token: %d %s", rec.Code, rec.Body)
	}
	token := extractToken(t, rec.Body.String())

	var statuses []int
	for range 2 {
		r := orderTarget(s).Request(idempotencytest.NewKey(), "101", 0)
		r.Header.Set("X-Form-Token", token)
		statuses = append(statuses, idempotencytest.Do(s.e, r).Status)
	}
	if statuses[0] != http.StatusCreated || statuses[1] == http.StatusCreated {
		t.Fatalf("statuses with one form token: %v, want 201 then a refusal", statuses)
	}
	if n := s.count(t, "orders"); n != 1 {
		t.Fatalf("%d orders for one form token, want 1", n)
	}
}

func extractToken(t *testing.T, body string) string {
	t.Helper()
	_, rest, ok := strings.Cut(body, `"token":"`)
	if !ok {
		t.Fatalf("no token in %s", body)
	}
	tok, _, _ := strings.Cut(rest, `"`)
	return tok
}
