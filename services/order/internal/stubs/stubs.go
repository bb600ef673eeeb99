// Package stubs are in-process stand-ins for the services the order
// service calls: the coupon service's lock and release, and the payment
// service's close. Each speaks its side of docs/purchase-flow.md over real
// HTTP, refuses a call without the internal token, and counts every call,
// so the order service's tests and lab can play each answer (and each
// failure) the contract allows. They are not the services: the end-to-end
// tests run those.
package stubs

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"
)

// authorized reports whether r carries token as its bearer token, and
// answers 401 when it does not.
func authorized(w http.ResponseWriter, r *http.Request, token string) bool {
	if got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && got == token {
		return true
	}
	problem(w, http.StatusUnauthorized, nil)
	return false
}

// problem answers status as problem+json with the extra members.
func problem(w http.ResponseWriter, status int, extra map[string]any) {
	doc := map[string]any{"title": http.StatusText(status), "status": status}
	for k, v := range extra {
		doc[k] = v
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(doc)
}

func answer(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// Coupon is one coupon the coupon stub knows.
type Coupon struct {
	ID     uint64
	UserID uint64
	// Discount is the template's discount_amount; MinOrderAmount its
	// min_order_amount (cents).
	Discount       int64
	MinOrderAmount int64
	Expired        bool
}

// Coupon states, as the coupon service names them.
const (
	CouponUnused = "UNUSED"
	CouponLocked = "LOCKED"
	CouponUsed   = "USED"
)

type couponState struct {
	Coupon
	status string
	order  string // the order holding the lock
}

// CouponService answers POST /internal/coupons/{id}/lock and /release as
// the coupon service does: UNUSED → LOCKED for one order (a lock by the
// order that holds it returns the same lock), the refusal reasons of the
// contract with 422, and a release that frees only a lock the order holds.
type CouponService struct {
	// URL is the stub's base URL.
	URL string
	// LockTTL is added to now for locked_until (default 45m).
	LockTTL time.Duration

	token string
	srv   *httptest.Server

	mu       sync.Mutex
	coupons  map[uint64]*couponState
	down     bool
	locks    int
	releases []string // order numbers of every release call
	lose     bool
	onLock   func(orderNo string)
}

// NewCouponService starts a coupon stub that accepts token. Close stops it.
func NewCouponService(token string) *CouponService {
	s := &CouponService{token: token, coupons: map[uint64]*couponState{}, LockTTL: 45 * time.Minute}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /internal/coupons/{id}/lock", s.lock)
	mux.HandleFunc("POST /internal/coupons/{id}/release", s.release)
	s.srv = httptest.NewServer(mux)
	s.URL = s.srv.URL
	return s
}

// Close stops the stub.
func (s *CouponService) Close() { s.srv.Close() }

// Add makes c known, UNUSED.
func (s *CouponService) Add(c Coupon) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.coupons[c.ID] = &couponState{Coupon: c, status: CouponUnused}
}

// State returns coupon id's status and the order holding its lock.
func (s *CouponService) State(id uint64) (status, orderNo string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.coupons[id]
	if !ok {
		return "", ""
	}
	return c.status, c.order
}

// Use marks a coupon USED, as order.paid does to a locked one.
func (s *CouponService) Use(id uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.coupons[id]; ok {
		c.status = CouponUsed
	}
}

// SetDown makes every call answer 503 (true) or be served again (false).
func (s *CouponService) SetDown(down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = down
}

// OnLock sets a function run on every lock call that took its lock, before
// the answer goes out (nil: none): what happens in the world while the
// order service waits for the coupon service.
func (s *CouponService) OnLock(fn func(orderNo string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onLock = fn
}

// LoseLockAnswers makes every lock call take its lock and then answer 502,
// as if the answer were lost on the way back (true), or answer again
// (false).
func (s *CouponService) LoseLockAnswers(lose bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lose = lose
}

// Calls returns how many lock calls were made and the order numbers of
// the release calls, in order.
func (s *CouponService) Calls() (locks int, releases []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.locks, append([]string(nil), s.releases...)
}

func (s *CouponService) lock(w http.ResponseWriter, r *http.Request) {
	if !authorized(w, r, s.token) {
		return
	}
	var in struct {
		OrderNo     string `json:"order_no"`
		UserID      uint64 `json:"user_id"`
		OrderAmount int64  `json:"order_amount"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.OrderNo == "" {
		problem(w, http.StatusBadRequest, nil)
		return
	}
	id, _ := strconv.ParseUint(r.PathValue("id"), 10, 64)
	s.mu.Lock()
	s.locks++
	if s.down {
		s.mu.Unlock()
		problem(w, http.StatusServiceUnavailable, nil)
		return
	}
	c, ok := s.coupons[id]
	reason := ""
	switch {
	case !ok:
		reason = "not_found"
	case c.UserID != in.UserID:
		reason = "not_owner"
	case c.status == CouponLocked && c.order == in.OrderNo:
		// The same order again: the same lock.
	case c.status != CouponUnused:
		reason = "not_available"
	case c.Expired:
		reason = "expired"
	case in.OrderAmount < c.MinOrderAmount || in.OrderAmount <= c.Discount:
		reason = "below_minimum"
	default:
		c.status, c.order = CouponLocked, in.OrderNo
	}
	var out map[string]any
	if reason == "" {
		out = map[string]any{"coupon_id": id, "order_no": in.OrderNo, "discount_amount": c.Discount, "locked_until": time.Now().UTC().Add(s.LockTTL)}
	}
	lose, hook := s.lose, s.onLock
	s.mu.Unlock()
	if reason == "" && hook != nil {
		hook(in.OrderNo)
	}
	switch {
	case reason != "":
		problem(w, http.StatusUnprocessableEntity, map[string]any{"reason": reason})
	case lose:
		problem(w, http.StatusBadGateway, nil)
	default:
		answer(w, out)
	}
}

func (s *CouponService) release(w http.ResponseWriter, r *http.Request) {
	if !authorized(w, r, s.token) {
		return
	}
	var in struct {
		OrderNo string `json:"order_no"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.OrderNo == "" {
		problem(w, http.StatusBadRequest, nil)
		return
	}
	id, _ := strconv.ParseUint(r.PathValue("id"), 10, 64)
	s.mu.Lock()
	s.releases = append(s.releases, in.OrderNo)
	if s.down {
		s.mu.Unlock()
		problem(w, http.StatusServiceUnavailable, nil)
		return
	}
	released := false
	if c, ok := s.coupons[id]; ok && c.status == CouponLocked && c.order == in.OrderNo {
		c.status, c.order, released = CouponUnused, "", true
	}
	s.mu.Unlock()
	answer(w, map[string]bool{"released": released})
}

// PaymentService answers POST /internal/orders/{no}/close as the payment
// service does: "closed" unless the order was set to answer "paid".
type PaymentService struct {
	// URL is the stub's base URL.
	URL string

	token string
	srv   *httptest.Server

	mu     sync.Mutex
	paid   map[string]bool
	down   bool
	closes map[string]int
	hook   func(orderNo string)
}

// NewPaymentService starts a payment stub that accepts token. Close stops
// it.
func NewPaymentService(token string) *PaymentService {
	s := &PaymentService{token: token, paid: map[string]bool{}, closes: map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /internal/orders/{no}/close", s.close)
	s.srv = httptest.NewServer(mux)
	s.URL = s.srv.URL
	return s
}

// Close stops the stub.
func (s *PaymentService) Close() { s.srv.Close() }

// SetPaid makes closing orderNo's charge answer "paid": the customer paid
// before the close.
func (s *PaymentService) SetPaid(orderNo string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.paid[orderNo] = true
}

// SetDown makes every call answer 503 (true) or be served again (false).
func (s *PaymentService) SetDown(down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = down
}

// OnClose sets a function run on every close call before it is answered
// (nil: none).
func (s *PaymentService) OnClose(fn func(orderNo string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hook = fn
}

// Closes returns how many close calls orderNo got.
func (s *PaymentService) Closes(orderNo string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closes[orderNo]
}

func (s *PaymentService) close(w http.ResponseWriter, r *http.Request) {
	if !authorized(w, r, s.token) {
		return
	}
	no := r.PathValue("no")
	s.mu.Lock()
	s.closes[no]++
	down, paid, hook := s.down, s.paid[no], s.hook
	s.mu.Unlock()
	if hook != nil {
		hook(no)
	}
	if down {
		problem(w, http.StatusServiceUnavailable, nil)
		return
	}
	outcome := "closed"
	if paid {
		outcome = "paid"
	}
	answer(w, map[string]string{"outcome": outcome})
}
