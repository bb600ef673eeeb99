// Package pspsim is a payment-platform simulator: it accepts charges,
// closes, queries and refunds, and delivers signed "paid" and "refunded"
// notifications the way real platforms do, retrying on any non-2xx answer
// or timeout, and, by its configuration (PSP_MODE) or by a plan a lab files
// for one charge (Plan, POST /sim/plans), misbehaving in the ways that break
// naive handlers (storms of concurrent copies, replays after success,
// out-of-order delivery, wrong amounts, bad signatures, stale timestamps,
// notifications held in flight or never sent, a close that answers closed
// on a paid charge). cmd/psp-sim serves it on :8090; tests run it
// in-process.
package pspsim

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	pkgconfig "github.com/oncemall/oncemall/pkg/config"
	"github.com/oncemall/oncemall/pkg/logging"
	"github.com/oncemall/oncemall/pkg/tracing"
)

// Config is the simulator's configuration, read from the environment by
// pkg/config. It lives in an importable package so that the compose and
// README drift tests can list its variables.
type Config struct {
	Log      logging.Config
	HTTPAddr string `env:"PSP_HTTP_ADDR" default:":8090" usage:"listen address of the payment-platform simulator"`
	Secret   string `env:"PSP_SECRET" default:"dev-psp-secret-not-for-production" usage:"HMAC-SHA256 key shared with the payment service; never empty (the default is the published development value)"`
	// AdminToken guards the simulator's own switches (POST /sim/...), which
	// no platform has: a lab's, not a merchant's.
	AdminToken  string `env:"PSP_ADMIN_TOKEN" default:"dev-psp-admin-token" usage:"bearer token of the simulator's switches (POST /sim/plans, /sim/charges/{out_trade_no}/deliver); empty refuses them"`
	CallbackURL string `env:"PSP_CALLBACK_URL" default:"http://127.0.0.1:8083/payments/callback" usage:"where payment notifications go when a charge names no notify_url; a comma-separated list spreads the deliveries over several receivers in turn (the replicas of the payment service)"`
	// RefundCallbackURL is the refund notifications' default address, as
	// CallbackURL is the payment notifications'.
	RefundCallbackURL string `env:"PSP_REFUND_CALLBACK_URL" default:"http://127.0.0.1:8083/payments/refunds/callback" usage:"where refund notifications go when a refund request names no notify_url; a comma-separated list is taken in turn as for PSP_CALLBACK_URL"`
	// RetrySchedule is the wait before each retry of an unanswered or
	// rejected notification. Real platforms spread about eight attempts over
	// a day (for example 4m, 10m, 10m, 1h, 2h, 6h, 15h); the default
	// compresses that into seconds for demos and tests.
	RetrySchedule []string      `env:"PSP_RETRY_SCHEDULE" default:"200ms,500ms,1s,2s,4s" usage:"comma-separated waits before each notification retry (compressed by default; real platforms use minutes to hours)"`
	NotifyTimeout time.Duration `env:"PSP_NOTIFY_TIMEOUT" default:"5s" usage:"how long one notification attempt waits for the merchant's answer before it counts as failed"`
	NotifyDelay   time.Duration `env:"PSP_NOTIFY_DELAY" default:"50ms" usage:"wait between answering a charge and the first notification"`
	Mode          string        `env:"PSP_MODE" default:"normal" usage:"delivery mode of charges without a plan naming one: normal, storm, replay, out_of_order, wrong_amount, bad_signature, stale_timestamp, hold, silent, close_race"`
	// StormCopies, Replays and LostAnswers, like Mode, apply only to charges
	// without a plan that names a mode (what the payment service's charges
	// are, unless a lab filed a plan); a plan that names its mode gets
	// exactly what it names.
	StormCopies int `env:"PSP_STORM_COPIES" default:"50" usage:"concurrent copies of a notification in storm mode, for charges without a plan naming a mode (1 to 1000)"`
	Replays     int `env:"PSP_REPLAYS" default:"10" usage:"deliveries repeated after the first success in replay and storm mode, for charges without a plan naming a mode (0 to 1000; 0: a storm without late retries)"`
	// LostAnswers makes the platform lose the first 2xx answers of every
	// charge (Plan.LostAnswers), so that even a merchant that
	// answers every delivery at once sees a notification it has processed
	// retried.
	LostAnswers int `env:"PSP_LOST_ANSWERS" default:"0" usage:"how many of each charge's first 2xx answers the platform loses, so it retries a notification the merchant already processed; for charges without a plan naming a mode (0 to 1000)"`
	// Tracing is read by cmd/psp-sim, which builds TracerProvider from it
	// (tracing.New checks it): the same TRACING_* variables as the
	// services'. A simulator built in process leaves it zero.
	Tracing tracing.Config
	// TracerProvider serves the API's requests in server spans continuing
	// the caller's trace, and delivers each notification in that trace:
	// every delivery attempt is a client span of its own, carrying its
	// traceparent to the merchant. Nil or a no-op provider: no spans and no
	// trace headers.
	TracerProvider trace.TracerProvider `env:"-"`
}

// Load reads the configuration from the environment and validates it.
func Load() (Config, error) { return pkgconfig.LoadValid[Config]() }

// Validate reports every unusable setting, each naming its variable.
func (c Config) Validate() error {
	_, schedErr := c.Schedule()
	return errors.Join(
		c.Log.Validate(),
		pkgconfig.CheckAddr("PSP_HTTP_ADDR", c.HTTPAddr),
		checkURL("PSP_CALLBACK_URL", c.CallbackURL),
		checkURL("PSP_REFUND_CALLBACK_URL", c.RefundCallbackURL),
		// The simulator is a development tool, so its published default is
		// allowed anywhere; an empty key would sign with nothing.
		pkgconfig.CheckNotEmpty("PSP_SECRET", c.Secret),
		schedErr,
		pkgconfig.CheckPositive("PSP_NOTIFY_TIMEOUT", c.NotifyTimeout),
		pkgconfig.CheckOneOf("PSP_MODE", c.Mode, Modes...),
		// The bounds a plan's own settings have (Plan.Validate): the
		// configured ones become the settings of every charge whose plan
		// names no mode.
		pkgconfig.CheckRange("PSP_STORM_COPIES", c.StormCopies, 1, maxPerCharge),
		pkgconfig.CheckRange("PSP_REPLAYS", c.Replays, 0, maxPerCharge),
		pkgconfig.CheckRange("PSP_LOST_ANSWERS", c.LostAnswers, 0, maxPerCharge),
	)
}

// checkURL reports a value that is not an absolute http(s) URL, or a
// comma-separated list of them, naming its variable: the simulator posts
// its notifications there.
func checkURL(varName, v string) error {
	for _, one := range strings.Split(v, ",") {
		u, err := url.Parse(one)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return &pkgconfig.Error{Var: varName, Value: v, Err: errors.New("want an absolute http or https URL, or a comma-separated list of them")}
		}
	}
	return nil
}

// Schedule parses RetrySchedule.
func (c Config) Schedule() ([]time.Duration, error) {
	out := make([]time.Duration, 0, len(c.RetrySchedule))
	for _, s := range c.RetrySchedule {
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil || d < 0 {
			return nil, &pkgconfig.Error{Var: "PSP_RETRY_SCHEDULE", Value: strings.Join(c.RetrySchedule, ","), Err: fmt.Errorf("%q is not a non-negative duration", s)}
		}
		out = append(out, d)
	}
	return out, nil
}
