package app_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/problem"
	"github.com/oncemall/oncemall/services/coupon/internal/orderclient"
)

// internalToken is what the coupon service presents to the order service in
// these tests.
const internalToken = "test-internal-token"

// orderService is an httptest server that speaks the order service's side of
// GET /internal/orders/{no} (docs/purchase-flow.md): 200 with the order's
// status for the orders it knows, 404 problem+json for the others, 401
// without the internal token. It is the other service; the sweeper and the
// order client under test are the real ones.
type orderService struct {
	srv      *httptest.Server
	mu       sync.Mutex
	statuses map[string]string
	// pending are the orders whose transaction is open: invisible (404)
	// until commit, gone after a rollback or a crash.
	pending map[string]bool
	asked   atomic.Int64
	// beforeAnswer, when set, runs before each answer: what happens
	// elsewhere while the sweeper waits.
	beforeAnswer func()
}

func newOrderService(t testing.TB) *orderService {
	t.Helper()
	o := &orderService{statuses: map[string]string{}, pending: map[string]bool{}}
	o.srv = httptest.NewServer(http.HandlerFunc(o.serve))
	t.Cleanup(o.srv.Close)
	return o
}

func (o *orderService) serve(w http.ResponseWriter, r *http.Request) {
	no, ok := strings.CutPrefix(r.URL.Path, "/internal/orders/")
	if r.Method != http.MethodGet || !ok {
		http.NotFound(w, r)
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+internalToken {
		writeProblem(w, http.StatusUnauthorized, "bad internal token")
		return
	}
	o.asked.Add(1)
	if o.beforeAnswer != nil {
		o.beforeAnswer()
	}
	o.mu.Lock()
	status, known := o.statuses[no]
	o.mu.Unlock()
	if !known {
		writeProblem(w, http.StatusNotFound, "no order "+no)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"order_no":"` + no + `","user_id":7,"status":"` + status + `","pay_amount":4000}`))
}

func writeProblem(w http.ResponseWriter, status int, detail string) {
	w.Header().Set("Content-Type", problem.ContentType)
	w.WriteHeader(status)
	_, _ = w.Write([]byte(`{"title":"` + http.StatusText(status) + `","status":` + strconv.Itoa(status) + `,"detail":"` + detail + `"}`))
}

// set records what the order service answers for orderNo ("" forgets the
// order: 404).
func (o *orderService) set(orderNo, status string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if status == "" {
		delete(o.statuses, orderNo)
		return
	}
	o.statuses[orderNo] = status
}

// begin opens the transaction that writes orderNo, after the coupon lock:
// the order is not visible until commit.
func (o *orderService) begin(orderNo string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.pending[orderNo] = true
}

// commit makes orderNo visible, WAIT_PAY.
func (o *orderService) commit(orderNo string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.pending, orderNo)
	o.statuses[orderNo] = "WAIT_PAY"
}

// rollback ends orderNo's transaction without the order (an insert failed).
func (o *orderService) rollback(orderNo string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.pending, orderNo)
}

// crash is the order service dying and restarting: open transactions are
// gone, committed orders stay.
func (o *orderService) crash() {
	o.mu.Lock()
	defer o.mu.Unlock()
	clear(o.pending)
}

// client is the coupon service's real order client, pointed at this server.
func (o *orderService) client() *orderclient.Client {
	return orderclient.New(o.srv.URL, internalToken, &http.Client{Timeout: 2 * time.Second})
}
