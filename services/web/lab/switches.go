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
)

// switches is the console's lab section.
type switches struct {
	cfg                             Config
	couponURL, paymentURL, pspURL   string
	client                          *upstream.Client
	hc                              *http.Client
	couponCounters, paymentCounters []counter

	mu sync.Mutex
	// armed is, per panel, when its switch was last used and every count
	// then, the baseline of what the learner did next.
	armed map[string]armed
}

type armed struct {
	at   time.Time
	base map[string]int64
}

func newSwitches(cfg Config, web config.Config, client *upstream.Client, hc *http.Client) *switches {
	return &switches{cfg: cfg, couponURL: web.CouponURL, paymentURL: web.PaymentURL, pspURL: web.PSPURL,
		client: client, hc: hc, armed: map[string]armed{},
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
	k.Render(c, http.StatusOK, "lab", map[string]any{"LostAck": views[panelLostAck], "Storm": views[panelStorm],
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
		return s.send(ctx, "psp-sim", http.MethodPost, s.pspURL+"/sim/plans", "", map[string]any{"next_charge": true,
			"mode": "storm", "copies": copies, "replays": replays, "lost_answers": lost}, nil)
	}, "The next charge's notification will come as a storm. Now buy something and pay.")
}

// arm takes panel's counts as they are now as its baseline, then uses the
// switch (do), and goes back to the page saying done.
func (s *switches) arm(c *gin.Context, k pages.Kit, panel string, do func(context.Context) error, done string) {
	ctx := c.Request.Context()
	base := map[string]int64{}
	for _, ct := range s.counts(ctx, k.Caller(c))[panel] {
		if ct.Err == "" {
			base[ct.Key] = ct.Now
		}
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
	var st proxyStats
	stErr := s.proxy(ctx, http.MethodGet, "/stats", nil, &st)
	cm, cmErr := s.metrics(ctx, s.couponURL, s.couponCounters)
	pm, pmErr := s.metrics(ctx, s.paymentURL, s.paymentCounters)
	doubleDeductions, cfErr := s.findings(ctx, who, "coupon", "order_deducted_more_than_once")
	multiplePayments, pfErr := s.findings(ctx, who, "payment", "multiple_records")
	c := func(cs []counter, m map[string]float64, i int) int64 { return int64(m[cs[i].key()]) }
	cc, pc := s.couponCounters, s.paymentCounters
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
