// Command loadgen drives the whole purchase flow as real clients do, against
// running services, and then checks from the databases, JetStream and every
// reconciler that nothing was lost or duplicated.
//
// Usage:
//
//	loadgen [--rate 50 | --concurrency 20] [--duration 30s] [--replicas 3] [--json]
//	loadgen --own ...                       start a private rig of every program first
//	loadgen --chaos --seed 7 ...            the private rig, with processes killed and restarted,
//	                                        lost COMMIT acknowledgements and lost platform answers
//
// Without --own or --chaos it talks to the programs `make run` starts (their
// ports, tokens and databases are the defaults of the flags). Each purchase
// is one new customer: an issued coupon (most of the time), an order of one
// or two of the run's products (sometimes submitted twice at once with one
// Idempotency-Key), then a payment the simulator pays by callback, or a
// cancellation, or both racing. Requests that time out or answer 5xx are
// retried with the same key. The exit status is 1 when an invariant breaks,
// 2 on bad usage, and 3 when the run could not be made.
//
// docs/chaos.md lists the faults and what each proves;
// docs/benchmarks/e2e.md has the figures.
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
	FaultProxyAdmin        string   // the fault proxy's admin base URL (chaos only)
	AdminToken             string
	MySQLDSN               string // root-like DSN with no database: the checks read all three databases
	OrderDB, CouponDB      string
	PaymentDB              string
	RedisAddr, RedisPass   string
	NATSURL                string // with credentials that may read the streams' consumers; empty skips the JetStream check
	SubjectPrefix          string
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
	fs.DurationVar(&c.RetryFor, "retry-for", 45*time.Second, "how long a client keeps retrying one request (timeouts, 5xx, 409 in progress) with its key")
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
	fs.StringVar(&c.Targets.MySQLDSN, "mysql", envOr("LOADGEN_MYSQL_DSN", "root@tcp(127.0.0.1:3306)/"), "DSN (no database) the invariants are read with")
	fs.StringVar(&c.Targets.OrderDB, "order-db", "oncemall_order", "the order service's database")
	fs.StringVar(&c.Targets.CouponDB, "coupon-db", "oncemall_coupon", "the coupon service's database")
	fs.StringVar(&c.Targets.PaymentDB, "payment-db", "oncemall_payment", "the payment service's database")
	fs.StringVar(&c.Targets.RedisAddr, "redis", "127.0.0.1:6380", "the services' Redis (make run's), where the jobs claim their intervals; empty skips the job count")
	fs.StringVar(&c.Targets.RedisPass, "redis-password", envOr("REDIS_PASSWORD", "dev-redis-password"), "its password")
	fs.StringVar(&c.Targets.NATSURL, "nats", "nats://admin:"+envOr("NATS_ADMIN_PASSWORD", "dev-nats-admin-password")+"@127.0.0.1:4223", "NATS URL that may read the consumers (make run's, as admin); empty skips the JetStream check")
	fs.StringVar(&c.Targets.SubjectPrefix, "subject-prefix", "", "the services' EVENT_SUBJECT_PREFIX")
	fs.BoolVar(&c.Own, "own", false, "start a private rig (NATS, Redis, fault proxy, simulator, every service, fresh databases) instead of using make run's")
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
	if c.Replicas < 1 || c.Replicas > 9 {
		return c, errors.New("--replicas must be 1 to 9")
	}
	if c.Rate < 0 || (c.Rate == 0 && c.Concurrency < 1) || c.Duration <= 0 {
		return c, errors.New("want --rate > 0 or --concurrency ≥ 1, and --duration > 0")
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
