// Command loadgen drives the whole purchase flow as real clients do, against
// running services, and then checks from the databases, JetStream and every
// reconciler that nothing was lost or duplicated.
//
// Usage:
//
//	loadgen [--rate 50 | --concurrency 20] [--duration 30s] [--replicas 3] [--json]
//	loadgen --phases 300/s:60s,75/s:30s ...  the offered rate changes over the run
//	loadgen --own ...                        start a private rig of every program first
//	loadgen --own --phases 50/s:60s,50/s:5m:db-cut,50/s:60s
//	                                         an outage in a phase: every service's database cut
//	                                         (db-cut, db-blackhole) or the rig's NATS stopped (nats-down)
//	loadgen --chaos --seed 7 ...             the private rig, with processes killed and restarted,
//	                                         lost COMMIT acknowledgements and lost platform answers
//
// Without --own or --chaos it talks to the programs `make run` starts (their
// ports, tokens and databases are the defaults of the flags). Each purchase
// is one new customer: an issued coupon (most of the time), an order of one
// or two of the run's products (sometimes submitted twice at once with one
// Idempotency-Key), then a payment the simulator pays by callback, or a
// cancellation, or both racing. A request that times out, is refused (503,
// 429) or answers another 5xx is retried with the same key, as a well-made
// client does: after the server's Retry-After with jitter, within a retry
// budget (--retry-at-once makes the bad client that retries at once).
//
// Before the load, the rig is measured idle for --idle; the report gives
// what each completed purchase cost, idle subtracted (CPU per process, SQL
// statements, transactions, fsyncs, HTTP requests, NATS messages, Redis
// commands), then each phase's goodput, latencies, refusals, memory,
// readiness and recovery, then the invariants. The exit status is 1 when an
// invariant breaks, 2 on bad usage, and 3 when the run could not be made.
//
// docs/chaos.md lists the faults and what each proves;
// docs/benchmarks/e2e.md has the figures and what each one means.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	os.Exit(Main(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// Main runs the load generator with args and returns the exit status.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "loadgen:", err)
		return 2
	}
	rep, err := Run(ctx, cfg, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "loadgen:", err)
		return 3
	}
	if cfg.JSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			fmt.Fprintln(stderr, "loadgen:", err)
			return 3
		}
	} else {
		rep.WriteText(stdout)
	}
	if !rep.InvariantsHold {
		return 1
	}
	return 0
}

// Config is what one run does and whom it talks to.
type Config struct {
	Rate        float64       // purchases started per second (open loop); 0: Concurrency workers
	Concurrency int           // workers each running purchases back to back, when Rate is 0
	Duration    time.Duration // how long purchases are started
	Settle      time.Duration // how long to wait after the load for the flow to finish before judging
	Timeout     time.Duration // one HTTP request's bound
	RetryFor    time.Duration // how long a client keeps retrying one request with its key
	// Phases is the load over time; from Rate (or Concurrency) and Duration
	// when --phases is not given.
	Phases []Phase
	// Idle is how long the programs are measured with no load before it,
	// for the cost report's idle subtraction.
	Idle time.Duration
	// RetryAtOnce makes the customers retry at once, ignoring Retry-After,
	// with no budget; RetryBudget is otherwise their retries' share of
	// their first tries.
	RetryAtOnce bool
	RetryBudget float64
	Seed        int64
	JSON        bool
	Quiet       bool // no progress line

	// The mix, as fractions of purchases.
	CouponShare  float64
	DoubleShare  float64 // orders and payments submitted twice at once with one key
	CancelShare  float64 // cancelled instead of paid
	RaceShare    float64 // paid and cancelled at the same moment
	Products     int
	StockPerItem int

	Targets Targets

	Own      bool // start a private rig of every program (implied by Chaos)
	OwnMySQL bool // the private rig runs a MariaDB server of its own
	Chaos    bool
	Replicas int
	KeepDBs  bool   // keep the private rig's databases after a run that held
	RunDir   string // where the private rig writes logs and stores (default: a temporary directory)
	// ChaosEvery is the mean wait between two faults.
	ChaosEvery time.Duration
	// ProfileDir, when set, receives a CPU profile of each service taken
	// during the load.
	ProfileDir string
}

// Targets are the addresses and credentials of the programs under load.
type Targets struct {
	Order, Coupon, Payment []string // base URLs of each replica
	PSP                    string   // the platform simulator's base URL
	PSPAdminToken          string   // its PSP_ADMIN_TOKEN, for its switches (chaos's plans)
	FaultProxyAdmin        string   // the fault proxy's admin base URL (the private rig, when a run needs it)
	AdminToken             string
	// Issuer and Audience are whose access tokens the services accept
	// (their AUTH_ISSUER and AUTH_AUDIENCE): the customers' tokens are
	// minted for them with the development signing key, which only an
	// issuer in dev or lab publishes.
	Issuer, Audience     string
	MySQLDSN             string // root-like DSN with no database: the checks read all three databases
	OrderDB, CouponDB    string
	PaymentDB            string
	RedisAddr, RedisPass string
	NATSURL              string // with credentials that may read the streams' consumers; empty skips the JetStream check
	NATSMonitor          string // the NATS server's monitoring endpoint (nats-server -m); empty leaves its figures out
	SubjectPrefix        string
}

// The fault proxy's place in the private rig.
const (
	proxyNone   = iota // every service talks to MySQL directly
	proxyCoupon        // in front of the coupon service's database (chaos)
	proxyAll           // in front of every service's database (a database outage)
)

// proxied says where the run needs the fault proxy.
func (c Config) proxied() int {
	switch {
	case newTimeline(c.Phases).faults(faultDBCut, faultDBBlackhole):
		return proxyAll
	case c.Chaos:
		return proxyCoupon
	}
	return proxyNone
}

func parseFlags(args []string, stderr io.Writer) (Config, error) {
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c Config
	var order, coupon, payment string
	fs.Float64Var(&c.Rate, "rate", 0, "purchases started per second (open loop); 0 uses --concurrency")
	fs.IntVar(&c.Concurrency, "concurrency", 10, "workers running purchases back to back (when --rate is 0)")
	fs.DurationVar(&c.Duration, "duration", 30*time.Second, "how long purchases are started")
	fs.DurationVar(&c.Settle, "settle", 90*time.Second, "how long to wait after the load for payments, events and coupons to finish before the invariants are judged")
	fs.DurationVar(&c.Timeout, "timeout", 5*time.Second, "bound of one HTTP request; a timeout is retried with the same Idempotency-Key")
	fs.DurationVar(&c.RetryFor, "retry-for", 45*time.Second, "how long a client keeps retrying one request (timeouts, 503/429 refusals, 5xx, 409 in progress) with its key")
	phases := fs.String("phases", "", "the load over time, instead of --rate and --duration: comma-separated RATE/s:DURATION[:FAULT], FAULT one of "+strings.Join(phaseFaults, ", ")+" (--own): 300/s:60s,75/s:30s")
	fs.DurationVar(&c.Idle, "idle", 5*time.Second, "how long the programs are measured with no load before it: their idle CPU and counters are subtracted from the cost report")
	fs.BoolVar(&c.RetryAtOnce, "retry-at-once", false, "the bad client: customers retry at once, ignoring Retry-After, with no retry budget (still within --retry-for)")
	fs.Float64Var(&c.RetryBudget, "retry-budget", 0.2, "the customers' retries as a share of their first tries (a token bucket); a retry beyond it is not made")
	fs.Int64Var(&c.Seed, "seed", 1, "seed of the purchase mix and of the chaos schedule: the same seed, the same choices")
	fs.BoolVar(&c.JSON, "json", false, "print the report as JSON")
	fs.BoolVar(&c.Quiet, "quiet", false, "no progress line")
	fs.Float64Var(&c.CouponShare, "coupon-share", 0.7, "share of purchases with a coupon")
	fs.Float64Var(&c.DoubleShare, "double-share", 0.1, "share of orders and payments submitted twice at once with one Idempotency-Key")
	fs.Float64Var(&c.CancelShare, "cancel-share", 0.1, "share of orders cancelled by their customer instead of paid")
	fs.Float64Var(&c.RaceShare, "race-share", 0.05, "share of orders paid and cancelled at the same moment")
	fs.IntVar(&c.Products, "products", 20, "products created for the run")
	fs.IntVar(&c.StockPerItem, "stock", 1000000, "units of stock each product starts with")
	fs.StringVar(&order, "order-url", "http://127.0.0.1:8081", "order service replicas, comma-separated (or the first one, with --replicas)")
	fs.StringVar(&coupon, "coupon-url", "http://127.0.0.1:8082", "coupon service replicas, comma-separated (or the first one, with --replicas)")
	fs.StringVar(&payment, "payment-url", "http://127.0.0.1:8083", "payment service replicas, comma-separated (or the first one, with --replicas)")
	fs.StringVar(&c.Targets.PSP, "psp-url", "http://127.0.0.1:8090", "the payment-platform simulator")
	fs.StringVar(&c.Targets.AdminToken, "admin-token", envOr("ADMIN_TOKEN", "dev-admin-token"), "the services' ADMIN_TOKEN")
	fs.StringVar(&c.Targets.PSPAdminToken, "psp-admin-token", envOr("PSP_ADMIN_TOKEN", "dev-psp-admin-token"), "the simulator's PSP_ADMIN_TOKEN (chaos files plans with it)")
	fs.StringVar(&c.Targets.Issuer, "auth-issuer", envOr("AUTH_ISSUER", "http://127.0.0.1:8084"), "the services' AUTH_ISSUER (make run's identity service); the customers' tokens are signed with its development key")
	fs.StringVar(&c.Targets.Audience, "auth-audience", envOr("AUTH_AUDIENCE", "oncemall"), "the services' AUTH_AUDIENCE")
	fs.StringVar(&c.Targets.MySQLDSN, "mysql", envOr("LOADGEN_MYSQL_DSN", "root@tcp(127.0.0.1:3306)/"), "DSN (no database) the invariants are read with")
	fs.StringVar(&c.Targets.OrderDB, "order-db", "oncemall_order", "the order service's database")
	fs.StringVar(&c.Targets.CouponDB, "coupon-db", "oncemall_coupon", "the coupon service's database")
	fs.StringVar(&c.Targets.PaymentDB, "payment-db", "oncemall_payment", "the payment service's database")
	fs.StringVar(&c.Targets.RedisAddr, "redis", "127.0.0.1:6380", "the services' Redis (make run's), where the jobs claim their intervals; empty skips the job count")
	fs.StringVar(&c.Targets.RedisPass, "redis-password", envOr("REDIS_PASSWORD", "dev-redis-password"), "its password")
	fs.StringVar(&c.Targets.NATSURL, "nats", "nats://admin:"+envOr("NATS_ADMIN_PASSWORD", "dev-nats-admin-password")+"@127.0.0.1:4223", "NATS URL that may read the consumers (make run's, as admin); empty skips the JetStream check")
	fs.StringVar(&c.Targets.NATSMonitor, "nats-monitor", "", "the NATS server's monitoring endpoint (http://host:port, nats-server -m) for the cost report's NATS figures; the private rig sets its own")
	fs.StringVar(&c.Targets.SubjectPrefix, "subject-prefix", "", "the services' EVENT_SUBJECT_PREFIX")
	fs.BoolVar(&c.Own, "own", false, "start a private rig (NATS, Redis, fault proxy, simulator, every service, fresh databases) instead of using make run's")
	fs.BoolVar(&c.OwnMySQL, "own-mysql", false, "the private rig starts a MariaDB server of its own (mariadb-install-db, mariadbd on a free port) instead of using MYSQL_ADDR's: its CPU and counters are the run's alone")
	fs.BoolVar(&c.Chaos, "chaos", false, "private rig, and while the load runs: SIGKILL and restart services, restart NATS and Redis, lose COMMIT acknowledgements and platform answers")
	fs.IntVar(&c.Replicas, "replicas", 1, "replicas of each service (make run REPLICAS=n puts replica i on port base+100*i)")
	fs.DurationVar(&c.ChaosEvery, "chaos-every", 3*time.Second, "mean wait between two faults")
	fs.BoolVar(&c.KeepDBs, "keep-dbs", false, "keep the private rig's databases even when the invariants hold")
	fs.StringVar(&c.ProfileDir, "profile-dir", "", "take a CPU profile of each service during the load and write it there (<service>.pprof)")
	fs.StringVar(&c.RunDir, "run-dir", "", "where the private rig keeps its logs and stores (default: a new temporary directory, removed when the invariants hold)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if c.Chaos {
		c.Own = true
	}
	if c.OwnMySQL && !c.Own {
		return c, errors.New("--own-mysql is for the private rig: add --own")
	}
	if c.Replicas < 1 || c.Replicas > 9 {
		return c, errors.New("--replicas must be 1 to 9")
	}
	if c.Rate < 0 || (c.Rate == 0 && c.Concurrency < 1) || c.Duration <= 0 {
		return c, errors.New("want --rate > 0 or --concurrency ≥ 1, and --duration > 0")
	}
	if *phases == "" {
		c.Phases = []Phase{{Rate: c.Rate, Duration: c.Duration}}
	} else {
		var set []string
		fs.Visit(func(f *flag.Flag) {
			if f.Name == "rate" || f.Name == "duration" || f.Name == "concurrency" {
				set = append(set, "--"+f.Name)
			}
		})
		if len(set) > 0 {
			return c, fmt.Errorf("--phases replaces %s", strings.Join(set, " and "))
		}
		var err error
		if c.Phases, err = parsePhases(*phases); err != nil {
			return c, fmt.Errorf("--phases: %w", err)
		}
		tl := newTimeline(c.Phases)
		c.Rate, c.Duration = c.Phases[0].Rate, tl.total
	}
	if tl := newTimeline(c.Phases); tl.faults(phaseFaults...) {
		if c.Chaos {
			return c, errors.New("a phase's fault and --chaos cannot be combined: chaos restarts NATS and arms the proxy on its own schedule")
		}
		if !c.Own {
			return c, errors.New("a phase's fault needs the private rig (--own): it is made there, never on make run's programs")
		}
	}
	if c.RetryBudget < 0 || c.Idle < 0 {
		return c, errors.New("want --retry-budget ≥ 0 and --idle ≥ 0")
	}
	if c.Products < 1 || c.StockPerItem < 100 {
		return c, errors.New("want --products ≥ 1 and --stock ≥ 100")
	}
	var err error
	if c.Targets.Order, err = replicaURLs(order, c.Replicas); err != nil {
		return c, fmt.Errorf("--order-url: %w", err)
	}
	if c.Targets.Coupon, err = replicaURLs(coupon, c.Replicas); err != nil {
		return c, fmt.Errorf("--coupon-url: %w", err)
	}
	if c.Targets.Payment, err = replicaURLs(payment, c.Replicas); err != nil {
		return c, fmt.Errorf("--payment-url: %w", err)
	}
	return c, nil
}

// replicaURLs expands a flag's value: a comma-separated list is taken as
// is; one URL with n > 1 becomes n URLs on the ports make run gives the
// replicas (scripts/run.sh: port + 100 × i).
func replicaURLs(v string, n int) ([]string, error) {
	parts := strings.Split(v, ",")
	for i := range parts {
		parts[i] = strings.TrimRight(strings.TrimSpace(parts[i]), "/")
	}
	if len(parts) > 1 || n == 1 {
		return parts, nil
	}
	host, port, ok := strings.Cut(strings.TrimPrefix(parts[0], "http://"), ":")
	var p int
	if _, err := fmt.Sscanf(port, "%d", &p); !ok || err != nil {
		return nil, fmt.Errorf("%q: want http://host:port to derive %d replicas from", v, n)
	}
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("http://%s:%d", host, p+100*i)
	}
	return out, nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
