package lab

import (
	"context"
	"embed"
	"errors"
	"io/fs"
	"net/http"
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

// matchDeduction is the statement text the lost acknowledgement waits
// for: a COMMIT of a transaction that wrote the coupon ledger (both of
// the coupon store's inserts read so), so that locks, the relay's and the
// jobs' commits pass untouched. The table name alone would not do: the
// proxy marks a connection on any statement naming it, a reconciler's
// SELECT included, and drops that connection's next COMMIT, whatever it
// commits.
const matchDeduction = "INSERT INTO `coupon_deduction`"

// maxDrops bounds one arming from the page.
const maxDrops = 10

// switches is the console's lab section.
type switches struct {
	cfg       Config
	couponURL string
	client    *upstream.Client
	hc        *http.Client
	counters  []counter

	mu sync.Mutex
	// baseline is every count when the switch was last armed; nil: never
	// armed since the storefront started.
	baseline map[string]int64
	armedAt  time.Time
}

func newSwitches(cfg Config, web config.Config, client *upstream.Client, hc *http.Client) *switches {
	return &switches{cfg: cfg, couponURL: web.CouponURL, client: client, hc: hc, counters: []counter{
		{family: "coupon_deductions_total"},
		{family: "inbox_messages_total", labels: map[string]string{"outcome": "duplicate"}},
		{family: "inbox_messages_total", labels: map[string]string{"outcome": "interrupted"}},
		{family: "coupon_deduction_duplicates_absorbed_total"},
		{family: "coupon_message_retries_scheduled_total"},
	}}
}

func (s *switches) section() pages.Section {
	sub, _ := fs.Sub(templateFS, "templates") // the embedded directory exists
	return pages.Section{Name: "Lab", Path: "/lab", Templates: sub, Routes: func(g gin.IRouter, k pages.Kit) {
		g.GET("", func(c *gin.Context) { s.page(c, k) })
		g.GET("/counts", func(c *gin.Context) { s.countsJSON(c, k) })
		g.POST("/lost-ack", k.Form(), func(c *gin.Context) { s.arm(c, k) })
		g.POST("/lost-ack/disarm", k.Form(), func(c *gin.Context) { s.disarm(c, k) })
	}}
}

func (s *switches) page(c *gin.Context, k pages.Kit) {
	counts := s.counts(c.Request.Context(), k.Caller(c))
	s.mu.Lock()
	armedAt := s.armedAt
	s.mu.Unlock()
	k.Render(c, http.StatusOK, "lab", map[string]any{"Counts": counts, "Groups": groups, "ArmedAt": armedAt,
		"TracesURL": s.cfg.TracesURL, "Done": c.Query("done")})
}

// groups are the headings of the counts' groups.
var groups = map[string]string{
	"switch":    "The switch",
	"effects":   "Effects written",
	"absorbed":  "Duplicates absorbed, retries made",
	"invariant": "The invariant: one deduction per order",
}

func (s *switches) countsJSON(c *gin.Context, k pages.Kit) {
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, gin.H{"counts": s.counts(c.Request.Context(), k.Caller(c))})
}

// arm has the fault proxy drop the acknowledgement of the next n COMMITs
// of a deduction, and takes the counts as they are now as the baseline of
// what the learner does next.
func (s *switches) arm(c *gin.Context, k pages.Kit) {
	n, err := strconv.Atoi(c.DefaultPostForm("drops", "1"))
	if err != nil || n < 1 || n > maxDrops {
		k.Problem(c, http.StatusBadRequest, "Not a number of drops", "Drop from 1 to "+strconv.Itoa(maxDrops)+" acknowledgements.")
		return
	}
	ctx := c.Request.Context()
	base := map[string]int64{}
	for _, ct := range s.counts(ctx, k.Caller(c)) {
		if ct.Err == "" {
			base[ct.Key] = ct.Now
		}
	}
	if err := s.proxy(ctx, http.MethodPost, "/arm", map[string]any{"drop_commit_acks": n, "match": matchDeduction}, nil); err != nil {
		k.Problem(c, http.StatusBadGateway, "The fault proxy was not armed", err.Error())
		return
	}
	s.mu.Lock()
	s.baseline, s.armedAt = base, time.Now()
	s.mu.Unlock()
	c.Redirect(http.StatusSeeOther, "/console/lab?done="+strconv.Itoa(n)+"+acknowledgement(s)+armed.+Now+buy+something+with+a+coupon+and+pay.")
}

func (s *switches) disarm(c *gin.Context, k pages.Kit) {
	if err := s.proxy(c.Request.Context(), http.MethodPost, "/disarm", nil, nil); err != nil {
		k.Problem(c, http.StatusBadGateway, "The fault proxy was not disarmed", err.Error())
		return
	}
	c.Redirect(http.StatusSeeOther, "/console/lab?done=Disarmed.")
}

// counts reads every count now: the fault proxy's, the coupon service's
// metrics, its reconciler's double deductions. One source that does not
// answer marks its counts, the others are still shown.
func (s *switches) counts(ctx context.Context, who upstream.Caller) []count {
	var st proxyStats
	stErr := s.proxy(ctx, http.MethodGet, "/stats", nil, &st)
	m, mErr := s.metrics(ctx, s.couponURL)
	findings, fErr := s.client.Findings(ctx, who, "coupon")
	doubles := int64(0)
	for _, f := range findings {
		if f.Kind == "order_deducted_more_than_once" {
			doubles++
		}
	}
	metric := func(c counter) int64 { return int64(m[c.key()]) }
	list := []count{
		{Key: "armed", Group: "switch", Name: "COMMIT acknowledgements still to drop", Source: "fault proxy: armed", Now: st.Armed, gauge: true, Err: errText(stErr)},
		{Key: "acks_dropped", Group: "effects", Name: "Deductions committed whose acknowledgement was lost", Source: "fault proxy: acks_dropped", Now: st.AcksDropped - st.ErrorRepliesDropped, Err: errText(stErr)},
		{Key: "deductions", Group: "effects", Name: "Deductions committed and acknowledged", Source: "coupon: coupon_deductions_total", Now: metric(s.counters[0]), Err: errText(mErr)},
		{Key: "inbox_duplicates", Group: "absorbed", Name: "Redelivered events the inbox answered without effect", Source: `coupon: inbox_messages_total{outcome="duplicate"}`, Now: metric(s.counters[1]), Err: errText(mErr)},
		{Key: "inbox_interrupted", Group: "absorbed", Name: "Deliveries whose connection broke (redelivered)", Source: `coupon: inbox_messages_total{outcome="interrupted"}`, Now: metric(s.counters[2]), Err: errText(mErr)},
		{Key: "retries_absorbed", Group: "absorbed", Name: "Retries that found the coupon already used by the order", Source: "coupon: coupon_deduction_duplicates_absorbed_total", Now: metric(s.counters[3]), Err: errText(mErr)},
		{Key: "retries_scheduled", Group: "absorbed", Name: "Deduction attempts that failed and were scheduled again", Source: "coupon: coupon_message_retries_scheduled_total", Now: metric(s.counters[4]), Err: errText(mErr)},
		{Key: "double_deductions", Group: "invariant", Name: "Orders deducted more than once (must stay 0)", Source: "coupon: GET /admin/reconcile", Now: doubles, gauge: true, Err: errText(fErr)},
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range list {
		if b, ok := s.baseline[list[i].Key]; ok && !list[i].gauge && list[i].Err == "" {
			d := list[i].Now - b
			list[i].Since = &d
		}
	}
	return list
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
