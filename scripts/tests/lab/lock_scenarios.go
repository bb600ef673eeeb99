package lab

// Incident 7, locks that outlive their order: the order service
// (services/order/lab's OrderAPI) locks a coupon at the real coupon service
// (services/coupon/lab's ServeLocks) through a gate that holds a lock
// request or its answer where the scenario says, so each hazard happens on
// every run:
//
//   - late lock: the gate holds the order's lock call past the order's
//     coupon timeout until the order has sent its release, then delivers it;
//   - crash: the lock a killed order left (taken at the coupon service
//     under the number that try had; TestCrashBetweenLockAndCommit in
//     services/order kills one for real) and the customer's retry;
//   - sibling: two copies of one request, the entry layer's Redis key lost
//     (down or flushed); the gate holds the first copy's lock answer until
//     the second copy is answered;
//   - release: two copies again; the first copy's lock answer is held past
//     its timeout, so it fails and releases while the second copy, which
//     shares the lock, goes on to commit; then another order wants the
//     coupon.
//
// Each counts what the customer is left with: orders, a coupon held by an
// order that does not exist, and what the retries get.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oncemall/oncemall/pkg/lab"
	"github.com/oncemall/oncemall/pkg/redisclient"
	"github.com/oncemall/oncemall/pkg/variant"
	couponlab "github.com/oncemall/oncemall/services/coupon/lab"
	orderlab "github.com/oncemall/oncemall/services/order/lab"
)

// The variants of incident 7 beside broken and fixed, which are the late
// lock's.
const (
	VariantBrokenCrash   = "broken-crash"
	VariantFixedCrash    = "fixed-crash"
	VariantBrokenSibling = "broken-sibling"
	VariantFixedSibling  = "fixed-sibling"
	VariantBrokenRelease = "broken-release"
	VariantFixedRelease  = "fixed-release"
)

const (
	lockUser     = 7001
	lockPrice    = 2500
	lockDiscount = 300
	// lockTimeout is the order's COUPON_TIMEOUT in the late-lock run: the
	// gate holds the lock longer.
	lockTimeout = "300ms"
	// releaseTimeout is the order's COUPON_TIMEOUT in the release run; the
	// second copy's lock call starts half of it after the first's lock
	// landed, so the first copy times out, and releases, well before the
	// second does.
	releaseTimeout = time.Second
	// crashLockTTL is the order's IDEMPOTENCY_LOCK_TTL in the crash run:
	// how long the killed try's key stays in progress (60 s by default).
	crashLockTTL = "2s"
)

// LockScenarios lists incident 7.
func LockScenarios() []lab.Scenario {
	return []lab.Scenario{
		{Incident: 7, Variant: lab.Broken, WantHolds: false, WantCount: 1, Run: lockScenario(lab.Broken, "i7b", variant.Broken, lateLock)},
		{Incident: 7, Variant: lab.Fixed, WantHolds: true, WantCount: 0, Run: lockScenario(lab.Fixed, "i7f", variant.Fixed, lateLock)},
		{Incident: 7, Variant: VariantBrokenCrash, WantHolds: false, WantCount: 0, Run: lockScenario(VariantBrokenCrash, "i7bc", variant.Broken, crashRetry)},
		{Incident: 7, Variant: VariantFixedCrash, WantHolds: true, WantCount: 1, Run: lockScenario(VariantFixedCrash, "i7fc", variant.Fixed, crashRetry)},
		{Incident: 7, Variant: VariantBrokenSibling, WantHolds: false, WantCount: 0, Run: lockScenario(VariantBrokenSibling, "i7bs", variant.Broken, siblingCopies)},
		{Incident: 7, Variant: VariantFixedSibling, WantHolds: true, WantCount: 1, Run: lockScenario(VariantFixedSibling, "i7fs", variant.Fixed, siblingCopies)},
		{Incident: 7, Variant: VariantBrokenRelease, WantHolds: false, WantCount: 2, Run: lockScenario(VariantBrokenRelease, "i7br", variant.Broken, siblingRelease)},
		{Incident: 7, Variant: VariantFixedRelease, WantHolds: true, WantCount: 1, Run: lockScenario(VariantFixedRelease, "i7fr", variant.Fixed, siblingRelease)},
	}
}

// lockRig is one run: the coupon service, the gate in front of it, the
// order service behind the gate, a product and the customer's coupon.
type lockRig struct {
	env     lab.Env
	mode    variant.Mode
	coupons *couponlab.Server
	gate    *couponGate
	orders  *orderlab.OrderAPI
	product uint64
	coupon  uint64
	tl      *lab.Timeline
}

// LockRun is what one run of incident 7 observed.
type LockRun struct {
	Orders int64
	// Ghost is 1 when the coupon is LOCKED by an order that does not exist.
	Ghost int
	// Unusable is how long the coupon stays unusable to its owner: until
	// the lock's deadline (and a sweep pass) for a ghost lock, zero
	// otherwise.
	Unusable time.Duration
	// Answers are the customer's answers, in order ("503", "422
	// not_available", "201", "201 replayed").
	Answers []string
}

// hazard is one of incident 7's three runs.
type hazard int

const (
	lateLock hazard = iota
	crashRetry
	siblingCopies
	siblingRelease
)

func (h hazard) run(ctx context.Context, r *lockRig) (LockRun, error) {
	switch h {
	case lateLock:
		return runLateLock(ctx, r)
	case crashRetry:
		return runCrashRetry(ctx, r)
	case siblingRelease:
		return runSiblingRelease(ctx, r)
	default:
		return runSiblingCopies(ctx, r)
	}
}

func lockScenario(name, suffix string, mode variant.Mode, h hazard) func(context.Context, lab.Env) (lab.Result, error) {
	return func(ctx context.Context, env lab.Env) (lab.Result, error) {
		r, err := startLockRig(ctx, env, suffix, mode, h)
		if err != nil {
			return lab.Result{}, err
		}
		defer r.close()
		out, err := h.run(ctx, r)
		if err != nil {
			return lab.Result{}, err
		}
		res := lab.Result{Incident: 7, Title: "locks that outlive their order", Variant: name}
		answers := strings.Join(out.Answers, ", ")
		switch h {
		case lateLock:
			res.Injected = "lock call held past the order's " + lockTimeout + " timeout, delivered after its release"
			res.Effect = fmt.Sprintf("coupons held by no order (unusable for %s); customer got %s", out.Unusable.Round(time.Minute), answers)
			res.Count, res.Expected, res.Holds = out.Ghost, "= 0", out.Ghost == 0 && out.Orders == 1
		case siblingRelease:
			res.Injected = "2 copies of one request; the first's lock answer held past its " + releaseTimeout.String() + " timeout, so it releases; then another order"
			res.Effect = fmt.Sprintf("orders discounted with one coupon; customer got %s", answers)
			res.Count, res.Expected, res.Holds = int(out.Orders), "= 1", out.Orders == 1 && out.Ghost == 0
		default:
			if h == crashRetry {
				res.Injected = "order service's binary killed (SIGKILL) between lock and commit; customer retries with the same key"
			} else {
				res.Injected = "2 copies of one request, entry layer's key lost, the first's lock answer held"
			}
			res.Effect = fmt.Sprintf("orders (coupon unusable for %s); customer got %s", out.Unusable.Round(time.Minute), answers)
			res.Count, res.Expected, res.Holds = int(out.Orders), "= 1", out.Orders == 1 && out.Ghost == 0
		}
		return res, nil
	}
}

func startLockRig(ctx context.Context, env lab.Env, suffix string, mode variant.Mode, h hazard) (_ *lockRig, err error) {
	r := &lockRig{env: env, mode: mode, tl: env.Timeline}
	defer func() {
		if err != nil {
			r.close()
		}
	}()
	if r.coupons, err = couponlab.ServeLocks(ctx, env, suffix+"_cpn", orderlab.InternalToken, orderlab.AdminToken, mode); err != nil {
		return nil, err
	}
	r.gate = newCouponGate(r.coupons.URL, r.tl)
	vars := map[string]string{}
	numbers := mode
	switch h {
	case lateLock:
		vars["COUPON_TIMEOUT"] = lockTimeout
	case crashRetry:
		vars["IDEMPOTENCY_LOCK_TTL"] = crashLockTTL
	case siblingRelease:
		// The copies share an order number in both variants: the broken
		// part is the coupon service's release.
		vars["COUPON_TIMEOUT"] = releaseTimeout.String()
		numbers = variant.Fixed
	}
	if r.orders, err = orderlab.StartOrderAPI(ctx, env, suffix+"_ord", orderlab.OrderAPIConfig{
		Guard: variant.Fixed, Numbers: numbers, CouponURL: r.gate.URL, Clients: 4, Vars: vars}); err != nil {
		return nil, err
	}
	tpl, err := r.coupons.CreateTemplate(ctx, "3 off", lockDiscount, 0)
	if err != nil {
		return nil, err
	}
	if r.coupon, err = r.coupons.Issue(ctx, tpl, lockUser); err != nil {
		return nil, err
	}
	if r.product, err = r.orders.CreateProduct(ctx, "Teapot", lockPrice, 10); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *lockRig) close() {
	if r.orders != nil {
		r.orders.Close()
	}
	if r.gate != nil {
		r.gate.srv.Close()
	}
	if r.coupons != nil {
		_ = r.coupons.Close()
	}
}

func (r *lockRig) body() string {
	return fmt.Sprintf(`{"items":[{"product_id":%d,"quantity":1}],"coupon_id":%d}`, r.product, r.coupon)
}

// post sends the customer's POST /orders with key and records the answer
// on actor's lane.
func (r *lockRig) post(ctx context.Context, actor, key string) (string, error) {
	rep, err := r.orders.PostOrder(ctx, fmt.Sprint(lockUser), key, r.body())
	if err != nil {
		return "", err
	}
	answer := fmt.Sprint(rep.Status)
	kind := lab.KindError
	switch {
	case rep.Status == http.StatusCreated && rep.Replayed:
		answer, kind = "201 replayed", lab.KindAbsorbed
	case rep.Status == http.StatusCreated:
		answer, kind = "201", lab.KindEffect
	case rep.Status == http.StatusUnprocessableEntity:
		var p struct {
			Reason string `json:"reason"`
		}
		_ = json.Unmarshal(rep.Body, &p)
		answer, kind = "422 "+p.Reason, lab.KindRefused
		if rep.Replayed {
			answer += " replayed"
		}
	}
	r.tl.Add(lab.Event{Actor: actor, Kind: kind, Label: "POST /orders: " + answer, Start: rep.Start, End: rep.End})
	return answer, nil
}

// settle reads what the run left: the orders, and whether the coupon is
// held by an order that does not exist, and until when.
func (r *lockRig) settle(ctx context.Context, answers []string) (LockRun, error) {
	out := LockRun{Answers: answers}
	var err error
	if out.Orders, err = r.orders.Count(ctx, "orders"); err != nil {
		return out, err
	}
	status, holder, err := r.coupons.CouponState(ctx, r.coupon)
	if err != nil {
		return out, err
	}
	if status == "LOCKED" {
		var n int64
		if err := r.orders.DB.WithContext(ctx).Raw("SELECT COUNT(*) FROM orders WHERE order_no = ?", holder).Row().Scan(&n); err != nil {
			return out, err
		}
		if n == 0 {
			out.Ghost = 1
			var until time.Time
			if err := r.coupons.DB.WithContext(ctx).Raw("SELECT locked_until FROM coupons WHERE id = ?", r.coupon).Row().Scan(&until); err != nil {
				return out, err
			}
			out.Unusable = time.Until(until)
			r.tl.Point("coupon service", lab.KindDuplicate, "LOCKED by "+holder+", an order that does not exist")
		}
	}
	return out, nil
}

// runLateLock: the gate holds the first lock call until the order, whose call
// timed out, has sent its release; then delivers it. The customer, answered
// 503, retries with the same key.
func runLateLock(ctx context.Context, r *lockRig) (LockRun, error) {
	released := make(chan struct{})
	landed := make(chan struct{})
	var once sync.Once
	r.gate.beforeLock = func(n int) {
		if n != 1 {
			return
		}
		r.tl.Point("network", lab.KindFault, "lock call delayed")
		select {
		case <-released:
		case <-ctx.Done():
		case <-time.After(30 * time.Second):
		}
	}
	r.gate.afterLock = func(n int) {
		if n == 1 {
			close(landed)
		}
	}
	r.gate.afterRelease = func(int) { once.Do(func() { close(released) }) }
	key := "i7-late-" + r.env.Prefix
	first, err := r.post(ctx, "customer", key)
	if err != nil {
		return LockRun{}, err
	}
	select {
	case <-landed:
	case <-ctx.Done():
		return LockRun{}, ctx.Err()
	}
	retry, err := r.post(ctx, "customer", key)
	if err != nil {
		return LockRun{}, err
	}
	return r.settle(ctx, []string{first, retry})
}

// runCrashRetry: the order service died after locking the coupon, before its
// order committed; the lock stays under that try's number. The customer
// retries with the same key, twice.
func runCrashRetry(ctx context.Context, r *lockRig) (LockRun, error) {
	key := "i7-crash-" + r.env.Prefix
	start := time.Now()
	dead, err := r.killMidOrder(ctx, key)
	if err != nil {
		return LockRun{}, err
	}
	r.tl.Span("order service (killed)", lab.KindFault, "locked "+dead+", SIGKILL before commit", start)
	// The dead try's key is in progress at the entry layer until
	// IDEMPOTENCY_LOCK_TTL (crashLockTTL here): the customer is answered 409
	// and asks again a second later, as its Retry-After says, until the
	// key is taken over; then once more, for the stored answer.
	var answers []string
	for range 10 {
		a, err := r.post(ctx, "customer", key)
		if err != nil {
			return LockRun{}, err
		}
		answers = append(answers, a)
		if a != "409" {
			break
		}
		time.Sleep(time.Second)
	}
	a, err := r.post(ctx, "customer", key)
	if err != nil {
		return LockRun{}, err
	}
	return r.settle(ctx, append(answers, a))
}

// killMidOrder runs the order service's own binary beside the rig's, on its
// database and in its mode, holds the product's stock row, sends it the
// customer's POST /orders with key, and kills it with SIGKILL once its
// order transaction, begun after the coupon lock, waits on that row. It
// returns the order number the dead try locked the coupon under.
func (r *lockRig) killMidOrder(ctx context.Context, key string) (string, error) {
	bin, err := orderBinary()
	if err != nil {
		return "", err
	}
	addr, err := freeLoopbackAddr()
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	child := exec.CommandContext(ctx, bin)
	child.Env = os.Environ()
	for k, v := range r.orders.Env {
		child.Env = append(child.Env, k+"="+v)
	}
	child.Env = append(child.Env, "HTTP_ADDR="+addr, "ORDER_NUMBERING_MODE="+string(r.mode), "COUPON_TIMEOUT=1m")
	// The child's output goes to a file: what it said is read only after
	// it has exited.
	logs, err := os.CreateTemp("", "oncemall-lab-order-*.log")
	if err != nil {
		return "", err
	}
	defer func() { logs.Close(); os.Remove(logs.Name()) }()
	child.Stdout, child.Stderr = logs, logs
	if err := child.Start(); err != nil {
		return "", err
	}
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()
	var once sync.Once
	kill := func() { once.Do(func() { _ = child.Process.Kill(); <-exited }) }
	defer kill()
	base := "http://" + addr
	if err := waitUntil(ctx, exited, logs.Name(), func() bool {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}); err != nil {
		return "", fmt.Errorf("the order binary did not get ready: %w", err)
	}

	hold := r.orders.DB.WithContext(ctx).Begin()
	defer hold.Rollback()
	var available int
	if err := hold.Raw("SELECT available FROM product_stock WHERE product_id = ? FOR UPDATE", r.product).Row().Scan(&available); err != nil {
		return "", err
	}
	authz, err := r.orders.Authorization(lockUser)
	if err != nil {
		return "", err
	}
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/orders", strings.NewReader(r.body()))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", authz)
		req.Header.Set("Idempotency-Key", key)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	// The kill comes once the coupon is locked and the order's transaction
	// waits on the stock row (testenv.LockWaits says why both tables are
	// read).
	dead := ""
	if err := waitUntil(ctx, exited, logs.Name(), func() bool {
		status, holder, err := r.coupons.CouponState(ctx, r.coupon)
		if err != nil || status != "LOCKED" {
			return false
		}
		var waits int64
		if err := r.orders.DB.WithContext(ctx).Raw(`SELECT COUNT(*) FROM information_schema.PROCESSLIST p
			LEFT JOIN information_schema.INNODB_TRX x ON x.trx_mysql_thread_id = p.ID
			WHERE p.DB = DATABASE() AND p.ID <> CONNECTION_ID() AND p.COMMAND = 'Query'
			AND (x.trx_state = 'LOCK WAIT' OR p.TIME_MS > 1000)`).Row().Scan(&waits); err != nil || waits == 0 {
			return false
		}
		dead = holder
		return true
	}); err != nil {
		return "", fmt.Errorf("the order binary's transaction never waited on the stock row: %w", err)
	}
	kill()
	return dead, hold.Rollback().Error
}

// waitUntil polls cond every 20 ms until it holds, ctx ends, or the child
// whose exit exited reports does (its log file then says why).
func waitUntil(ctx context.Context, exited chan error, logFile string, cond func() bool) error {
	for !cond() {
		select {
		case err := <-exited:
			exited <- err
			out, _ := os.ReadFile(logFile)
			return fmt.Errorf("the child exited (%v):\n%s", err, out)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// orderBinary builds the order service's binary once per process.
var orderBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "oncemall-lab-order-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "order")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/oncemall/oncemall/services/order/cmd/order").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build the order service: %w\n%s", err, out)
	}
	return bin, nil
})

func freeLoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// runSiblingCopies: copy A's lock answer is held at the gate; the entry layer
// loses the key; copy B is sent and answered; then A goes on. A third try
// follows.
func runSiblingCopies(ctx context.Context, r *lockRig) (LockRun, error) {
	locked, bDone := make(chan struct{}), make(chan struct{})
	r.gate.afterLock = func(n int) {
		if n != 1 {
			return
		}
		close(locked)
		select {
		case <-bDone:
		case <-ctx.Done():
		case <-time.After(30 * time.Second):
		}
	}
	key := "i7-sibling-" + r.env.Prefix
	aDone := make(chan struct{})
	var a string
	var aErr error
	go func() {
		defer close(aDone)
		a, aErr = r.post(ctx, "copy A", key)
	}()
	select {
	case <-locked:
	case <-aDone:
		return LockRun{}, fmt.Errorf("copy A answered before its lock: %s %v", a, aErr)
	}
	if err := r.forgetEntries(ctx); err != nil {
		close(bDone)
		return LockRun{}, err
	}
	b, err := r.post(ctx, "copy B", key)
	close(bDone)
	<-aDone
	if err != nil {
		return LockRun{}, err
	}
	if aErr != nil {
		return LockRun{}, aErr
	}
	retry, err := r.post(ctx, "customer", key)
	if err != nil {
		return LockRun{}, err
	}
	return r.settle(ctx, []string{"A " + a, "B " + b, "retry " + retry})
}

// runSiblingRelease: copy B's lock lands and its answer is held until B,
// timed out, has released; half a timeout after B's lock landed (the entry
// layer's key lost meanwhile), copy A locks the same coupon under the same
// order number, and its answer is held until B's release is answered. A
// then commits its order. Another order of the customer, under a new key,
// asks for the same coupon.
func runSiblingRelease(ctx context.Context, r *lockRig) (LockRun, error) {
	landed, released := make(chan struct{}), make(chan struct{})
	var once sync.Once
	r.gate.afterLock = func(n int) {
		switch n {
		case 1:
			close(landed)
		case 2:
		default:
			return
		}
		select {
		case <-released:
		case <-ctx.Done():
		case <-time.After(30 * time.Second):
		}
	}
	r.gate.afterRelease = func(int) { once.Do(func() { close(released) }) }
	key := "i7-release-" + r.env.Prefix
	bDone := make(chan struct{})
	var b string
	var bErr error
	go func() {
		defer close(bDone)
		b, bErr = r.post(ctx, "copy B", key)
	}()
	select {
	case <-landed:
	case <-bDone:
		return LockRun{}, fmt.Errorf("copy B answered before its lock landed: %s %v", b, bErr)
	}
	if err := r.forgetEntries(ctx); err != nil {
		return LockRun{}, err
	}
	select {
	case <-time.After(releaseTimeout / 2):
	case <-ctx.Done():
		return LockRun{}, ctx.Err()
	}
	a, err := r.post(ctx, "copy A", key)
	<-bDone
	if err != nil {
		return LockRun{}, err
	}
	if bErr != nil {
		return LockRun{}, bErr
	}
	other, err := r.post(ctx, "customer", key+"-other")
	if err != nil {
		return LockRun{}, err
	}
	return r.settle(ctx, []string{"B " + b, "A " + a, "other order " + other})
}

// forgetEntries deletes the order service's idempotency entries in Redis:
// the entry layer lost them (down or flushed), and the database decides.
func (r *lockRig) forgetEntries(ctx context.Context) error {
	rdb := redisclient.New(r.env.Redis)
	defer rdb.Close()
	keys, err := rdb.Keys(ctx, r.env.Name("*_ord")+":idem:*").Result()
	if err != nil {
		return err
	}
	if len(keys) > 0 {
		if err := rdb.Del(ctx, keys...).Err(); err != nil {
			return err
		}
	}
	r.tl.Point("redis", lab.KindFault, fmt.Sprintf("entry layer lost %d key(s)", len(keys)))
	return nil
}

// couponGate stands between the order service and the coupon service and
// forwards every call, running the scenario's hooks around the n-th lock
// and release. A forwarded call outlives its caller: a lock the order
// stopped waiting for still arrives.
type couponGate struct {
	URL                   string
	srv                   *httptest.Server
	target                string
	tl                    *lab.Timeline
	locks, releases       atomic.Int64
	beforeLock, afterLock func(n int)
	afterRelease          func(n int)
}

func newCouponGate(target string, tl *lab.Timeline) *couponGate {
	g := &couponGate{target: target, tl: tl}
	g.srv = httptest.NewServer(http.HandlerFunc(g.serve))
	g.URL = g.srv.URL
	return g
}

func (g *couponGate) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	var n int
	lock, release := strings.HasSuffix(req.URL.Path, "/lock"), strings.HasSuffix(req.URL.Path, "/release")
	switch {
	case lock:
		n = int(g.locks.Add(1))
		if g.beforeLock != nil {
			g.beforeLock(n)
		}
	case release:
		n = int(g.releases.Add(1))
	}
	start := time.Now()
	ctx := context.WithoutCancel(req.Context())
	fwd, err := http.NewRequestWithContext(ctx, req.Method, g.target+req.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	fwd.Header = req.Header.Clone()
	resp, err := http.DefaultClient.Do(fwd)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	switch {
	case lock:
		g.tl.Span("coupon service", lockKind(resp.StatusCode), fmt.Sprintf("lock %d: %s", n, lockLabel(resp.StatusCode, out)), start)
		if g.afterLock != nil {
			g.afterLock(n)
		}
	case release:
		g.tl.Span("coupon service", lab.KindStep, fmt.Sprintf("release %d: %s", n, strings.TrimSpace(string(out))), start)
		if g.afterRelease != nil {
			g.afterRelease(n)
		}
	}
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(out)
}

func lockKind(status int) string {
	if status == http.StatusOK {
		return lab.KindEffect
	}
	return lab.KindRefused
}

func lockLabel(status int, body []byte) string {
	if status == http.StatusOK {
		return "locked"
	}
	var p struct {
		Reason string `json:"reason"`
	}
	_ = json.Unmarshal(body, &p)
	return fmt.Sprintf("%d %s", status, p.Reason)
}
