package lab

import (
	"context"
	"embed"
	"errors"
	"io/fs"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/oncemall/oncemall/services/web/internal/config"
	"github.com/oncemall/oncemall/services/web/internal/pages"
	"github.com/oncemall/oncemall/services/web/internal/upstream"
)

//go:embed templates/*.html
var templateFS embed.FS

// The switches, each a panel of the lab page with its own counts.
const (
	// panelLostAck is incident 1's: the fault proxy loses a deduction's
	// COMMIT acknowledgement.
	panelLostAck = "lost-ack"
	// panelStorm is incident 2's: the simulator delivers the next charge's
	// notification in a storm of copies, late replays and lost answers.
	panelStorm = "storm"
	// panelDouble is incident 4's: the storefront sends the next submits
	// twice at once.
	panelDouble = "double"
	// panelCopy is incident 3's: the order service copies a batch sent
	// twice, broken or fixed, with N workers (its lab's
	// /admin/lab/product-copy).
	panelCopy = "copy"
)

// switches is the console's lab section.
type switches struct {
	cfg                                     Config
	orderURL, couponURL, paymentURL, pspURL string
	client                                  *upstream.Client
	hc                                      *http.Client
	double                                  *doubler
	orderCounters, couponCounters           []counter
	paymentCounters                         []counter

	mu sync.Mutex
	// armed is, per panel, when its switch was last used and every count
	// then, the baseline of what the learner did next.
	armed map[string]armed
	// copyRun is the order service's last run of incident 3's switch.
	copyRun string
}

type armed struct {
	at   time.Time
	base map[string]int64
}

func newSwitches(cfg Config, web config.Config, client *upstream.Client, hc *http.Client, d *doubler) *switches {
	return &switches{cfg: cfg, orderURL: web.OrderURL, couponURL: web.CouponURL, paymentURL: web.PaymentURL, pspURL: web.PSPURL,
		client: client, hc: hc, double: d, armed: map[string]armed{},
		orderCounters: []counter{
			{family: "idempotency_requests_total", labels: map[string]string{"outcome": "first"}},
			{family: "idempotency_requests_total", labels: map[string]string{"outcome": "replayed"}},
			{family: "idempotency_requests_total", labels: map[string]string{"outcome": "conflict"}},
			{family: "order_product_copy_products_total", labels: map[string]string{"outcome": "created"}},
			{family: "order_product_copy_products_total", labels: map[string]string{"outcome": "skipped"}},
		},
		couponCounters: []counter{
			{family: "coupon_deductions_total"},
			{family: "inbox_messages_total", labels: map[string]string{"outcome": "duplicate"}},
			{family: "inbox_messages_total", labels: map[string]string{"outcome": "interrupted"}},
			{family: "coupon_deduction_duplicates_absorbed_total"},
			{family: "coupon_message_retries_scheduled_total"},
		},
		paymentCounters: []counter{
			{family: "payment_callbacks_total", labels: map[string]string{"outcome": "processed"}},
			{family: "payment_callbacks_total", labels: map[string]string{"outcome": "duplicate"}},
			{family: "payment_callbacks_total", labels: map[string]string{"outcome": "locked"}},
			{family: "idempotency_requests_total", labels: map[string]string{"outcome": "first"}},
			{family: "idempotency_requests_total", labels: map[string]string{"outcome": "replayed"}},
			{family: "idempotency_requests_total", labels: map[string]string{"outcome": "conflict"}},
		}}
}

func (s *switches) section() pages.Section {
	sub, _ := fs.Sub(templateFS, "templates") // the embedded directory exists
	return pages.Section{Name: "Lab", Path: "/lab", Templates: sub, Routes: func(g gin.IRouter, k pages.Kit) {
		g.GET("", func(c *gin.Context) { s.page(c, k) })
		g.GET("/counts", func(c *gin.Context) { s.countsJSON(c, k) })
		g.POST("/lost-ack", k.Form(), func(c *gin.Context) { s.armLostAck(c, k) })
		g.POST("/lost-ack/disarm", k.Form(), func(c *gin.Context) { s.disarmLostAck(c, k) })
		g.POST("/storm", k.Form(), func(c *gin.Context) { s.armStorm(c, k) })
		g.POST("/double", k.Form(), func(c *gin.Context) { s.armDouble(c, k) })
		g.POST("/copy", k.Form(), func(c *gin.Context) { s.runCopy(c, k) })
		g.POST("/deduction", k.Form(), func(c *gin.Context) { s.setDeduction(c, k) })
	}}
}

// panelView is one panel as the page shows it.
type panelView struct {
	Counts  []count
	ArmedAt time.Time
}

func (s *switches) page(c *gin.Context, k pages.Kit) {
	counts := s.counts(c.Request.Context(), k.Caller(c))
	s.mu.Lock()
	views := map[string]panelView{}
	for panel, list := range counts {
		views[panel] = panelView{Counts: list, ArmedAt: s.armed[panel].at}
	}
	s.mu.Unlock()
	_, _, _, last := s.double.state()
	var deduction struct {
		Mode string `json:"mode"`
	}
	if err := s.send(c.Request.Context(), "coupon", http.MethodGet, s.couponURL+deductionPath, k.Caller(c).Token, nil, &deduction); err != nil {
		deduction.Mode = "unknown (" + errText(err) + ")"
	}
	k.Render(c, http.StatusOK, "lab", map[string]any{"Deduction": deduction.Mode, "LostAck": views[panelLostAck], "Storm": views[panelStorm],
		"Double": views[panelDouble], "Doubled": last, "Copy": views[panelCopy],
		"Groups": groups, "TracesURL": s.cfg.TracesURL, "Done": c.Query("done")})
}

// groups are the headings of the counts' groups.
var groups = map[string]string{
	"switch":    "The switch",
	"effects":   "Effects written",
	"absorbed":  "Duplicates absorbed, retries made",
	"invariant": "The invariant",
}

func (s *switches) countsJSON(c *gin.Context, k pages.Kit) {
	var all []count
	for _, list := range s.counts(c.Request.Context(), k.Caller(c)) {
		all = append(all, list...)
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, gin.H{"counts": all})
}

// maxDrops bounds one arming of the fault proxy from the page.
const maxDrops = 10

// matchDeduction is the statement text the lost acknowledgement waits
// for: a COMMIT of a transaction that wrote the coupon ledger (both of
// the coupon store's inserts read so), so that locks, the relay's and the
// jobs' commits pass untouched. The table name alone would not do: the
// proxy marks a connection on any statement naming it, a reconciler's
// SELECT included, and drops that connection's next COMMIT, whatever it
// commits.
const matchDeduction = "INSERT INTO `coupon_deduction`"

// armLostAck has the fault proxy drop the acknowledgement of the next n
// COMMITs of a deduction.
func (s *switches) armLostAck(c *gin.Context, k pages.Kit) {
	n, err := strconv.Atoi(c.DefaultPostForm("drops", "1"))
	if err != nil || n < 1 || n > maxDrops {
		k.Problem(c, http.StatusBadRequest, "Not a number of drops", "Drop from 1 to "+strconv.Itoa(maxDrops)+" acknowledgements.")
		return
	}
	s.arm(c, k, panelLostAck, func(ctx context.Context) error {
		return s.proxy(ctx, http.MethodPost, "/arm", map[string]any{"drop_commit_acks": n, "match": matchDeduction}, nil)
	}, strconv.Itoa(n)+" acknowledgement(s) armed. Now buy something with a coupon and pay.")
}

func (s *switches) disarmLostAck(c *gin.Context, k pages.Kit) {
	if err := s.proxy(c.Request.Context(), http.MethodPost, "/disarm", nil, nil); err != nil {
		k.Problem(c, http.StatusBadGateway, "The fault proxy was not disarmed", err.Error())
		return
	}
	c.Redirect(http.StatusSeeOther, "/console/lab?done=Disarmed.")
}

// Bounds of a storm filed from the page.
const (
	maxCopies      = 20
	maxReplays     = 10
	maxLostAnswers = 5
)

// armStorm files a plan for the simulator's next charge: copies
// concurrent deliveries of its notification, replays more after the first
// success, and the first lostAnswers 2xx answers lost on the way back (the
// platform retries what the merchant has processed).
func (s *switches) armStorm(c *gin.Context, k pages.Kit) {
	copies, err1 := strconv.Atoi(c.DefaultPostForm("copies", "5"))
	replays, err2 := strconv.Atoi(c.DefaultPostForm("replays", "2"))
	lost, err3 := strconv.Atoi(c.DefaultPostForm("lost_answers", "1"))
	if err1 != nil || err2 != nil || err3 != nil || copies < 1 || copies > maxCopies || replays < 0 || replays > maxReplays ||
		lost < 0 || lost > maxLostAnswers {
		k.Problem(c, http.StatusBadRequest, "Not a storm",
			"Give 1 to 20 copies, 0 to 10 replays and 0 to 5 lost answers.")
		return
	}
	s.arm(c, k, panelStorm, func(ctx context.Context) error {
		return s.send(ctx, "psp-sim", http.MethodPost, s.pspURL+"/sim/plans", s.cfg.PSPToken, map[string]any{"next_charge": true,
			"mode": "storm", "copies": copies, "replays": replays, "lost_answers": lost}, nil)
	}, "The next charge's notification will come as a storm. Now buy something and pay.")
}

// maxDoubles bounds the submits one arming sends twice.
const maxDoubles = 5

// armDouble has the storefront send the next n "Place order" or "Pay"
// submits twice at once.
func (s *switches) armDouble(c *gin.Context, k pages.Kit) {
	n, err := strconv.Atoi(c.DefaultPostForm("submits", "2"))
	if err != nil || n < 1 || n > maxDoubles {
		k.Problem(c, http.StatusBadRequest, "Not a number of submits", "Send from 1 to "+strconv.Itoa(maxDoubles)+" submits twice.")
		return
	}
	s.arm(c, k, panelDouble, func(context.Context) error {
		s.double.arm(n)
		return nil
	}, "The next "+strconv.Itoa(n)+` "Place order" or "Pay" submit(s) will be sent twice at once. Now buy something.`)
}

// deductionPath is the coupon service's lab route for incident 1's
// deduction, fixed or broken.
const deductionPath = "/admin/lab/deduction"

// setDeduction switches the coupon service's deduction to the fixed or the
// broken code (the broken one with the incident's schema) while it runs.
func (s *switches) setDeduction(c *gin.Context, k pages.Kit) {
	mode := c.PostForm("mode")
	if mode != "fixed" && mode != "broken" {
		k.Problem(c, http.StatusBadRequest, "Not a deduction", "Give fixed or broken.")
		return
	}
	if err := s.send(c.Request.Context(), "coupon", http.MethodPut, s.couponURL+deductionPath, k.Caller(c).Token, map[string]string{"mode": mode}, nil); err != nil {
		k.Problem(c, http.StatusBadGateway, "The coupon service did not switch", errText(err))
		return
	}
	c.Redirect(http.StatusSeeOther, "/console/lab?done="+url.QueryEscape("The coupon service now deducts with the "+mode+" code."))
}

// Bounds of a copy run from the page (the order service checks them too).
const (
	maxCopyWorkers  = 16
	maxCopyCopies   = 5
	maxCopyProducts = 500
)

// copyRunPath is the order service's lab route for incident 3's runs.
const copyRunPath = "/admin/lab/product-copy"

// runCopy has the order service copy a batch of new products sent copies
// times at once, its chunks created by the broken or the fixed code with
// at most workers at a time.
func (s *switches) runCopy(c *gin.Context, k pages.Kit) {
	v := c.DefaultPostForm("variant", "fixed")
	workers, err1 := strconv.Atoi(c.DefaultPostForm("workers", "4"))
	copies, err2 := strconv.Atoi(c.DefaultPostForm("copies", "2"))
	products, err3 := strconv.Atoi(c.DefaultPostForm("products", "50"))
	if (v != "fixed" && v != "broken") || err1 != nil || err2 != nil || err3 != nil || workers < 1 || workers > maxCopyWorkers ||
		copies < 1 || copies > maxCopyCopies || products < 1 || products > maxCopyProducts {
		k.Problem(c, http.StatusBadRequest, "Not a copy run", "Give fixed or broken, 1 to 16 workers, 1 to 5 copies and 1 to 500 products.")
		return
	}
	who := k.Caller(c)
	s.arm(c, k, panelCopy, func(ctx context.Context) error {
		var run struct {
			Run string `json:"run"`
		}
		err := s.send(ctx, "order", http.MethodPost, s.orderURL+copyRunPath, who.Token,
			map[string]any{"variant": v, "workers": workers, "copies": copies, "products": products}, &run)
		if err == nil {
			s.mu.Lock()
			s.copyRun = run.Run
			s.mu.Unlock()
		}
		return err
	}, "Run "+v+" with "+strconv.Itoa(workers)+" worker(s): the counts fill in as its chunks are copied.")
}

// copyRunView is the part of the order service's view of a run the panel
// shows.
type copyRunView struct {
	Variant    string `json:"variant"`
	Workers    int64  `json:"workers"`
	Chunks     int64  `json:"chunks"`
	ChunksDone int64  `json:"chunks_done"`
	Created    int64  `json:"created"`
	Skipped    int64  `json:"skipped"`
	Duplicates int64  `json:"duplicates"`
}

// arm takes panel's counts as they are now as its baseline, then uses the
// switch (do), and goes back to the page saying done.
func (s *switches) arm(c *gin.Context, k pages.Kit, panel string, do func(context.Context) error, done string) {
	ctx := c.Request.Context()
	// Without every count's baseline the page could not say what the
	// learner's next purchase did: a source that fails is asked again,
	// and if it still fails nothing is armed.
	base := map[string]int64{}
	var failed string
	for range 3 {
		failed = ""
		for _, ct := range s.counts(ctx, k.Caller(c))[panel] {
			if _, ok := base[ct.Key]; ok {
				continue
			}
			if ct.Err != "" {
				failed = ct.Source + ": " + ct.Err
				continue
			}
			base[ct.Key] = ct.Now
		}
		if failed == "" {
			break
		}
	}
	if failed != "" {
		k.Problem(c, http.StatusBadGateway, "The counts cannot be read", "Nothing was armed: "+failed)
		return
	}
	if err := do(ctx); err != nil {
		k.Problem(c, http.StatusBadGateway, "The switch did not answer", err.Error())
		return
	}
	s.mu.Lock()
	s.armed[panel] = armed{at: time.Now(), base: base}
	s.mu.Unlock()
	c.Redirect(http.StatusSeeOther, "/console/lab?done="+url.QueryEscape(done))
}

// counts reads every panel's counts now: the fault proxy's stats, the
// coupon and payment services' metrics, their reconcilers' findings. A
// source that does not answer marks its counts; the others are still
// shown.
func (s *switches) counts(ctx context.Context, who upstream.Caller) map[string][]count {
	// The sources are read at once: the page waits for the slowest, not
	// for their sum.
	var (
		wg                                 sync.WaitGroup
		st                                 proxyStats
		cm, pm, om                         map[string]float64
		doubleDeductions, multiplePayments int64
		stErr, cmErr, pmErr, omErr         error
		cfErr, pfErr, runErr               error
		run                                copyRunView
	)
	s.mu.Lock()
	lastRun := s.copyRun
	s.mu.Unlock()
	for _, read := range []func(){
		func() { stErr = s.proxy(ctx, http.MethodGet, "/stats", nil, &st) },
		func() { cm, cmErr = s.metrics(ctx, s.couponURL, s.couponCounters) },
		func() { pm, pmErr = s.metrics(ctx, s.paymentURL, s.paymentCounters) },
		func() { om, omErr = s.metrics(ctx, s.orderURL, s.orderCounters) },
		func() { doubleDeductions, cfErr = s.findings(ctx, who, "coupon", "order_deducted_more_than_once") },
		func() { multiplePayments, pfErr = s.findings(ctx, who, "payment", "multiple_records") },
		func() {
			if lastRun != "" {
				runErr = s.send(ctx, "order", http.MethodGet, s.orderURL+copyRunPath+"/"+url.PathEscape(lastRun), who.Token, nil, &run)
			}
		},
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			read()
		}()
	}
	wg.Wait()
	toDouble, doubledN, split, _ := s.double.state()
	c := func(cs []counter, m map[string]float64, i int) int64 { return int64(m[cs[i].key()]) }
	cc, pc, oc := s.couponCounters, s.paymentCounters, s.orderCounters
	out := map[string][]count{
		panelLostAck: {
			{Key: "armed", Group: "switch", Name: "COMMIT acknowledgements still to drop", Source: "fault proxy: armed", Now: st.Armed, gauge: true, Err: errText(stErr)},
			{Key: "acks_dropped", Group: "effects", Name: "Deductions committed whose acknowledgement was lost", Source: "fault proxy: acks_dropped", Now: st.AcksDropped - st.ErrorRepliesDropped, Err: errText(stErr)},
			{Key: "deductions", Group: "effects", Name: "Deductions committed and acknowledged", Source: "coupon: coupon_deductions_total", Now: c(cc, cm, 0), Err: errText(cmErr)},
			{Key: "inbox_duplicates", Group: "absorbed", Name: "Redelivered events the inbox answered without effect", Source: `coupon: inbox_messages_total{outcome="duplicate"}`, Now: c(cc, cm, 1), Err: errText(cmErr)},
			{Key: "inbox_interrupted", Group: "absorbed", Name: "Deliveries whose connection broke (redelivered)", Source: `coupon: inbox_messages_total{outcome="interrupted"}`, Now: c(cc, cm, 2), Err: errText(cmErr)},
			{Key: "retries_absorbed", Group: "absorbed", Name: "Retries that found the coupon already used by the order", Source: "coupon: coupon_deduction_duplicates_absorbed_total", Now: c(cc, cm, 3), Err: errText(cmErr)},
			{Key: "retries_scheduled", Group: "absorbed", Name: "Deduction attempts that failed and were scheduled again", Source: "coupon: coupon_message_retries_scheduled_total", Now: c(cc, cm, 4), Err: errText(cmErr)},
			{Key: "double_deductions", Group: "invariant", Name: "Orders deducted more than once (must stay 0)", Source: "coupon: GET /admin/reconcile", Now: doubleDeductions, gauge: true, Err: errText(cfErr)},
		},
		panelStorm: {
			{Key: "callbacks_processed", Group: "effects", Name: "Notifications that recorded a payment", Source: `payment: payment_callbacks_total{outcome="processed"}`, Now: c(pc, pm, 0), Err: errText(pmErr)},
			{Key: "callbacks_duplicate", Group: "absorbed", Name: "Copies answered 200 without effect", Source: `payment: payment_callbacks_total{outcome="duplicate"}`, Now: c(pc, pm, 1), Err: errText(pmErr)},
			{Key: "callbacks_locked", Group: "absorbed", Name: "Copies told to come again (another copy held the payment)", Source: `payment: payment_callbacks_total{outcome="locked"}`, Now: c(pc, pm, 2), Err: errText(pmErr)},
			{Key: "multiple_payments", Group: "invariant", Name: "Orders with more than one payment record (must stay 0)", Source: "payment: GET /admin/reconcile", Now: multiplePayments, gauge: true, Err: errText(pfErr)},
		},
		panelDouble: {
			{Key: "doubles_armed", Group: "switch", Name: "Submits still to send twice", Source: "storefront", Now: int64(toDouble), gauge: true},
			{Key: "doubled", Group: "switch", Name: "Submits sent twice", Source: "storefront", Now: doubledN},
			{Key: "orders_first", Group: "effects", Name: "Order requests that ran (a key's first)", Source: `order: idempotency_requests_total{outcome="first"}`, Now: c(oc, om, 0), Err: errText(omErr)},
			{Key: "payments_first", Group: "effects", Name: "Payment requests that ran (a key's first)", Source: `payment: idempotency_requests_total{outcome="first"}`, Now: c(pc, pm, 3), Err: errText(pmErr)},
			{Key: "orders_replayed", Group: "absorbed", Name: "Order requests answered the first one's result", Source: `order: idempotency_requests_total{outcome="replayed"}`, Now: c(oc, om, 1), Err: errText(omErr)},
			{Key: "orders_conflict", Group: "absorbed", Name: "Order requests told the first is still running", Source: `order: idempotency_requests_total{outcome="conflict"}`, Now: c(oc, om, 2), Err: errText(omErr)},
			{Key: "payments_replayed", Group: "absorbed", Name: "Payment requests answered the first one's result", Source: `payment: idempotency_requests_total{outcome="replayed"}`, Now: c(pc, pm, 4), Err: errText(pmErr)},
			{Key: "payments_conflict", Group: "absorbed", Name: "Payment requests told the first is still running", Source: `payment: idempotency_requests_total{outcome="conflict"}`, Now: c(pc, pm, 5), Err: errText(pmErr)},
			{Key: "split", Group: "invariant", Name: "Submits whose two copies got different answers (must stay 0)", Source: "storefront", Now: split},
		},
		panelCopy: {
			{Key: "copy_workers", Group: "switch", Name: "Workers of the last run" + runVariant(run.Variant), Source: "order: GET " + copyRunPath + "/{run}", Now: run.Workers, gauge: true, Err: errText(runErr)},
			{Key: "copy_chunks_left", Group: "switch", Name: "Chunks of the last run still to copy", Source: "order: GET " + copyRunPath + "/{run}", Now: run.Chunks - run.ChunksDone, gauge: true, Err: errText(runErr)},
			{Key: "copy_run_created", Group: "effects", Name: "Products the last run's copies wrote", Source: "order: GET " + copyRunPath + "/{run}", Now: run.Created, gauge: true, Err: errText(runErr)},
			{Key: "copy_created", Group: "effects", Name: "Products every batch copy wrote", Source: `order: order_product_copy_products_total{outcome="created"}`, Now: c(oc, om, 3), Err: errText(omErr)},
			{Key: "copy_run_skipped", Group: "absorbed", Name: "Copies of the last run that found their product there", Source: "order: GET " + copyRunPath + "/{run}", Now: run.Skipped, gauge: true, Err: errText(runErr)},
			{Key: "copy_skipped", Group: "absorbed", Name: "Products every batch copy skipped as already there", Source: `order: order_product_copy_products_total{outcome="skipped"}`, Now: c(oc, om, 4), Err: errText(omErr)},
			{Key: "copy_duplicates", Group: "invariant", Name: "Live products of the last run beyond one per name and model (must stay 0)", Source: "order: GET " + copyRunPath + "/{run}", Now: run.Duplicates, gauge: true, Err: errText(runErr)},
		},
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for panel, list := range out {
		a, ok := s.armed[panel]
		if !ok {
			continue
		}
		for i := range list {
			if b, ok := a.base[list[i].Key]; ok && !list[i].gauge && list[i].Err == "" {
				d := list[i].Now - b
				list[i].Since = &d
			}
		}
	}
	return out
}

// findings counts service's reconciler's findings of kind.
func (s *switches) findings(ctx context.Context, who upstream.Caller, service, kind string) (int64, error) {
	list, err := s.client.Findings(ctx, who, service)
	n := int64(0)
	for _, f := range list {
		if f.Kind == kind {
			n++
		}
	}
	return n, err
}

func runVariant(v string) string {
	if v == "" {
		return ""
	}
	return " (" + v + ")"
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	var e *upstream.Error
	if errors.As(err, &e) && e.Status != 0 {
		return e.Service + " answered " + strconv.Itoa(e.Status) + ": " + e.Detail
	}
	return err.Error()
}
