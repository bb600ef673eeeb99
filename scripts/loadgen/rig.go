package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/oncemall/oncemall/pkg/auth"
	"github.com/oncemall/oncemall/pkg/testkit/composecheck"
)

// rig is the private set of programs --own and --chaos start: NATS (with
// its monitoring endpoint) and Redis servers of its own on free ports
// (never the machine's shared ones), the platform simulator, and every
// service, each replica on its own port, on databases made for the run.
// The services talk to MySQL directly, unless the run needs the fault
// proxy: chaos puts it in front of the coupon service's database (it loses
// COMMIT acknowledgements), a database outage in front of every service's
// (it cuts them all). It owns its programs, so it can kill one and start
// it again exactly as it was.
type rig struct {
	dir     string
	ownDir  bool // dir was made for the run, and goes with it
	tag     string
	mysql   string // host:port of MySQL
	procs   []*proc
	byName  map[string]*proc
	targets Targets
	log     io.Writer
	// issuer signs the customers in: the development key's, served by
	// loadgen itself, which the services trust (AUTH_ISSUER).
	issuer *auth.DevIssuer
}

// proc is one program the rig runs.
type proc struct {
	name   string
	bin    string
	args   []string
	env    []string
	ready  string // an HTTP URL answering 200 when ready, or tcp://host:port
	logf   string
	kind   string // "service", "nats", "redis", "faultproxy", "psp"
	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{}
	starts int
	kills  int
}

// freePort returns a free 127.0.0.1 port.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// startRig builds every program and starts the rig; stop it with close.
func startRig(ctx context.Context, cfg Config, tag string, log io.Writer) (*rig, error) {
	root, err := composecheck.Root()
	if err != nil {
		return nil, err
	}
	dir, ownDir := cfg.RunDir, cfg.RunDir == ""
	if ownDir {
		if dir, err = os.MkdirTemp("", "loadgen-"+tag+"-"); err != nil {
			return nil, err
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	r := &rig{dir: dir, ownDir: ownDir, tag: tag, mysql: envOr("MYSQL_ADDR", "127.0.0.1:3306"), byName: map[string]*proc{}, log: log}
	fmt.Fprintf(log, "loadgen: private rig in %s (logs there)\n", dir)

	// Build.
	bins := map[string]string{
		"order": "./services/order/cmd/order", "coupon": "./services/coupon/cmd/coupon", "payment": "./services/payment/cmd/payment",
		"psp-sim": "./services/psp-sim/cmd/psp-sim", "faultproxy": "./scripts/tools/faultproxy",
	}
	for name, pkg := range bins {
		fmt.Fprintf(log, "loadgen: building %s\n", name)
		cmd := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(dir, "bin", name), pkg)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
		}
	}
	fmt.Fprintln(log, "loadgen: building nats-server (the version scripts/go.mod pins)")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(dir, "bin", "nats-server"), "github.com/nats-io/nats-server/v2")
	cmd.Dir = filepath.Join(root, "scripts")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build nats-server: %v\n%s", err, out)
	}
	redisBin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, errors.New("redis-server is not installed (apt-get install redis-server): the rig runs a Redis of its own")
	}

	if cfg.OwnMySQL {
		addr, err := r.startMySQL(ctx)
		if err != nil {
			r.close(false)
			return nil, err
		}
		r.mysql = addr
	}

	// Ports.
	port := func() int {
		p, perr := freePort()
		if perr != nil {
			err = perr
		}
		return p
	}
	natsPort, natsMon, redisPort, proxyPort, proxyAdmin, pspPort := port(), port(), port(), port(), port(), port()
	ports := map[string][]int{}
	for _, s := range []string{"order", "coupon", "payment"} {
		for range cfg.Replicas {
			ports[s] = append(ports[s], port())
		}
	}
	if err != nil {
		return nil, err
	}
	url := func(p int) string { return fmt.Sprintf("http://127.0.0.1:%d", p) }
	urls := func(s string) []string {
		var out []string
		for _, p := range ports[s] {
			out = append(out, url(p))
		}
		return out
	}
	joinPath := func(us []string, path string) string {
		var out []string
		for _, u := range us {
			out = append(out, u+path)
		}
		return strings.Join(out, ",")
	}

	const adminToken, pspAdminToken = "dev-admin-token", "dev-psp-admin-token"
	if r.issuer, err = auth.StartDevIssuer(); err != nil {
		return nil, err
	}
	r.targets = Targets{
		Issuer: r.issuer.URL, Audience: "oncemall",
		Order: urls("order"), Coupon: urls("coupon"), Payment: urls("payment"), PSP: url(pspPort),
		FaultProxyAdmin: url(proxyAdmin), AdminToken: adminToken, PSPAdminToken: pspAdminToken,
		MySQLDSN: mysqlDSN(cfg, r.mysql),
		OrderDB:  "lg_" + tag + "_order", CouponDB: "lg_" + tag + "_coupon", PaymentDB: "lg_" + tag + "_payment",
		RedisAddr:   fmt.Sprintf("127.0.0.1:%d", redisPort),
		NATSURL:     fmt.Sprintf("nats://127.0.0.1:%d", natsPort),
		NATSMonitor: url(natsMon),
	}
	proxied := cfg.proxied()
	if proxied == proxyNone {
		r.targets.FaultProxyAdmin = ""
	}

	r.add(&proc{name: "nats-server", kind: "nats", bin: filepath.Join(dir, "bin", "nats-server"),
		args:  []string{"-a", "127.0.0.1", "-p", fmt.Sprint(natsPort), "-m", fmt.Sprint(natsMon), "-js", "-sd", filepath.Join(dir, "nats")},
		ready: fmt.Sprintf("tcp://127.0.0.1:%d", natsPort)})
	r.add(&proc{name: "redis-server", kind: "redis", bin: redisBin,
		args:  []string{"--bind", "127.0.0.1", "--port", fmt.Sprint(redisPort), "--save", "", "--appendonly", "no", "--dir", dir},
		ready: fmt.Sprintf("tcp://127.0.0.1:%d", redisPort)})
	if proxied != proxyNone {
		r.add(&proc{name: "faultproxy", kind: "faultproxy", bin: filepath.Join(dir, "bin", "faultproxy"),
			env: []string{fmt.Sprintf("FAULTPROXY_ADDR=127.0.0.1:%d", proxyPort), fmt.Sprintf("FAULTPROXY_ADMIN_ADDR=127.0.0.1:%d", proxyAdmin),
				"FAULTPROXY_UPSTREAM=" + r.mysql, "ADMIN_TOKEN=" + adminToken, "LOG_LEVEL=warn"},
			ready: url(proxyAdmin) + "/healthz"})
	}
	viaProxy := fmt.Sprintf("127.0.0.1:%d", proxyPort)
	dbAddr := func(service string) string {
		if proxied == proxyAll || (proxied == proxyCoupon && service == "coupon") {
			return viaProxy
		}
		return r.mysql
	}
	lost := "0"
	if cfg.Chaos {
		// The platform loses the first 2xx answer of every charge's
		// notification: every payment is notified again after it was
		// processed.
		lost = "1"
	}
	r.add(&proc{name: "psp-sim", kind: "psp", bin: filepath.Join(dir, "bin", "psp-sim"),
		env: []string{fmt.Sprintf("PSP_HTTP_ADDR=127.0.0.1:%d", pspPort),
			"PSP_CALLBACK_URL=" + joinPath(urls("payment"), "/payments/callback"),
			"PSP_REFUND_CALLBACK_URL=" + joinPath(urls("payment"), "/payments/refunds/callback"),
			"PSP_ADMIN_TOKEN=" + pspAdminToken, "PSP_LOST_ANSWERS=" + lost, "PSP_NOTIFY_DELAY=10ms", "PSP_RETRY_SCHEDULE=200ms,500ms,1s,2s,4s,8s,15s", "LOG_LEVEL=warn"},
		ready: url(pspPort) + "/healthz"})

	// The MySQL server is shared (151 connections on this project's
	// machines): the services together keep to about 50 of them.
	conns := max(4, 16/cfg.Replicas)
	common := []string{
		fmt.Sprintf("MYSQL_MAX_OPEN_CONNS=%d", conns), fmt.Sprintf("MYSQL_MAX_IDLE_CONNS=%d", conns),
		"ONCEMALL_ENV=dev", "LOG_LEVEL=info", "STARTUP_TIMEOUT=60s", "SHUTDOWN_TIMEOUT=10s",
		"ADMIN_TOKEN=" + adminToken, "MYSQL_USER=root", "MYSQL_PASSWORD=",
		"AUTH_ISSUER=" + r.targets.Issuer, "AUTH_AUDIENCE=" + r.targets.Audience,
		"NATS_URL=" + r.targets.NATSURL, "REDIS_ADDR=" + r.targets.RedisAddr, "REDIS_PASSWORD=",
		"OUTBOX_POLL_SCHEDULE=@every 1s",
		// A client whose request died with the process retries the key;
		// the key's Redis lock would refuse it (409) until this runs out.
		"IDEMPOTENCY_LOCK_TTL=10s", "JOB_LOCK_TTL=10s",
	}
	for i := range cfg.Replicas {
		o, c, p := ports["order"][i], ports["coupon"][i], ports["payment"][i]
		r.add(&proc{name: fmt.Sprintf("order-%d", i), kind: "service", bin: filepath.Join(dir, "bin", "order"), ready: url(o) + "/readyz",
			env: append(slicesClone(common), fmt.Sprintf("HTTP_ADDR=127.0.0.1:%d", o), "MYSQL_ADDR="+dbAddr("order"), "MYSQL_DATABASE="+r.targets.OrderDB,
				"COUPON_URL="+url(c), "PAYMENT_URL="+url(p))})
		r.add(&proc{name: fmt.Sprintf("coupon-%d", i), kind: "service", bin: filepath.Join(dir, "bin", "coupon"), ready: url(c) + "/readyz",
			env: append(slicesClone(common), fmt.Sprintf("HTTP_ADDR=127.0.0.1:%d", c), "MYSQL_ADDR="+dbAddr("coupon"), "MYSQL_DATABASE="+r.targets.CouponDB,
				"ORDER_URL="+url(o), "COUPON_RETRY_SCHEDULE=@every 1s", "COUPON_RETRY_BACKOFF=200ms", "COUPON_RETRY_BATCH=500", "COUPON_RETRY_MAX=20")})
		r.add(&proc{name: fmt.Sprintf("payment-%d", i), kind: "service", bin: filepath.Join(dir, "bin", "payment"), ready: url(p) + "/readyz",
			env: append(slicesClone(common), fmt.Sprintf("HTTP_ADDR=127.0.0.1:%d", p), "MYSQL_ADDR="+dbAddr("payment"), "MYSQL_DATABASE="+r.targets.PaymentDB,
				"ORDER_URL="+url(o), "PSP_URL="+url(pspPort), "PAYMENT_QUERY_SCHEDULE=@every 2s", "PAYMENT_QUERY_AFTER=10s")})
	}

	// Servers first, then the first replica of each service alone (it
	// creates its database and applies the migrations), then the others
	// together.
	first := func(p *proc) bool { return p.kind != "service" || strings.HasSuffix(p.name, "-0") }
	for _, p := range r.procs {
		if first(p) && !p.running() { // the rig's own MariaDB is up already
			if err := p.start(ctx, dir); err != nil {
				r.close(false)
				return nil, err
			}
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(r.procs))
	for _, p := range r.procs {
		if !first(p) {
			wg.Go(func() { errs <- p.start(ctx, dir) })
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			r.close(false)
			return nil, err
		}
	}
	return r, nil
}

// mysqlDSN is the DSN the invariants are read with: LOADGEN_MYSQL_DSN's,
// or root on addr, which is always the rig's own server's.
func mysqlDSN(cfg Config, addr string) string {
	if cfg.OwnMySQL {
		return "root@tcp(" + addr + ")/"
	}
	return envOr("LOADGEN_MYSQL_DSN", "root@tcp("+addr+")/")
}

// startMySQL initialises a data directory in the rig's and starts a MariaDB
// server on it, on a free port, with the server's defaults (as the shared
// one runs) but for room for the rig's connections; root may connect over
// TCP with no password. It returns the server's address.
func (r *rig) startMySQL(ctx context.Context) (string, error) {
	install, err1 := exec.LookPath("mariadb-install-db")
	server, err2 := exec.LookPath("mariadbd")
	client, err3 := exec.LookPath("mariadb")
	if err := errors.Join(err1, err2, err3); err != nil {
		return "", fmt.Errorf("--own-mysql needs MariaDB's programs (apt-get install mariadb-server): %w", err)
	}
	data, sock := filepath.Join(r.dir, "mysql"), filepath.Join(r.dir, "mysql.sock")
	// Its temporary files go to the rig's own directory: in a shared /tmp
	// another server's start (a benchmark's, another rig's) made the
	// initialisation fail on a temporary table it found deleted.
	tmp := filepath.Join(r.dir, "mysql-tmp")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return "", err
	}
	fmt.Fprintf(r.log, "loadgen: initialising a MariaDB data directory in %s\n", data)
	cmd := exec.CommandContext(ctx, install, "--no-defaults", "--datadir="+data, "--tmpdir="+tmp, "--user=root", "--skip-test-db")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("mariadb-install-db: %v\n%s", err, out)
	}
	port, err := freePort()
	if err != nil {
		return "", err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	p := &proc{name: "mariadb", kind: "mysql", bin: server, ready: "tcp://" + addr,
		args: []string{"--no-defaults", "--datadir=" + data, "--tmpdir=" + tmp, "--socket=" + sock, "--port=" + fmt.Sprint(port),
			"--bind-address=127.0.0.1", "--user=root", "--max-connections=500", "--log-error=" + filepath.Join(r.dir, "mariadb.err")}}
	r.add(p)
	if err := p.start(ctx, r.dir); err != nil {
		return "", err
	}
	// The data directory's root authenticates by unix socket only: let
	// it in over TCP, with no password, as on the shared server.
	grant := "ALTER USER root@localhost IDENTIFIED VIA mysql_native_password USING PASSWORD(''); " +
		"CREATE USER IF NOT EXISTS root@'127.0.0.1' IDENTIFIED BY ''; GRANT ALL ON *.* TO root@'127.0.0.1' WITH GRANT OPTION; FLUSH PRIVILEGES;"
	if out, err := exec.CommandContext(ctx, client, "--no-defaults", "-S", sock, "-uroot", "-e", grant).CombinedOutput(); err != nil {
		return "", fmt.Errorf("let root in over TCP: %v\n%s", err, out)
	}
	return addr, nil
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }

func (r *rig) add(p *proc) {
	p.logf = filepath.Join(r.dir, p.name+".log")
	r.procs = append(r.procs, p)
	r.byName[p.name] = p
}

// start runs p and waits until it is ready.
func (p *proc) start(ctx context.Context, dir string) error {
	f, err := os.OpenFile(p.logf, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Dir = dir
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); f.Close(); close(done) }()
	p.mu.Lock()
	p.cmd, p.done = cmd, done
	p.starts++
	p.mu.Unlock()
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		select {
		case <-done:
			return fmt.Errorf("%s exited during start-up; see %s", p.name, p.logf)
		default:
		}
		if p.isReady() {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s not ready within 90s; see %s", p.name, p.logf)
}

var readyClient = &http.Client{Timeout: 2 * time.Second}

func (p *proc) isReady() bool {
	if addr, ok := strings.CutPrefix(p.ready, "tcp://"); ok {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	}
	resp, err := readyClient.Get(p.ready)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// running reports whether p's process is alive.
func (p *proc) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *proc) kill() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.kills++
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
}

// stop sends SIGTERM and waits (SIGKILL after 20 s).
func (p *proc) stop() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-done
	}
}

// pids returns the rig's live processes by group: each service (its
// replicas together), the simulator, the fault proxy, NATS and Redis.
func (r *rig) pids() map[string][]int {
	out := map[string][]int{}
	for _, p := range r.procs {
		p.mu.Lock()
		if p.cmd != nil && p.cmd.Process != nil {
			group, _, _ := strings.Cut(p.name, "-")
			if p.kind != "service" {
				group = p.name
			}
			out[group] = append(out[group], p.cmd.Process.Pid)
		}
		p.mu.Unlock()
	}
	return out
}

// cutDB cuts every service's database off at the fault proxy, as outage
// says ("refuse" or "blackhole"), until healDB.
func (r *rig) cutDB(outage string) error {
	if r.targets.FaultProxyAdmin == "" {
		return errors.New("the rig has no fault proxy")
	}
	if st, body := post(r.targets.FaultProxyAdmin+"/cut", r.targets.AdminToken, `{"mode":"`+outage+`"}`); st != http.StatusOK {
		return fmt.Errorf("cut the database: %d %s", st, body)
	}
	return nil
}

// healDB ends the cut.
func (r *rig) healDB() error {
	if r.targets.FaultProxyAdmin == "" {
		return nil
	}
	if st, body := post(r.targets.FaultProxyAdmin+"/heal", r.targets.AdminToken, "{}"); st != http.StatusOK {
		return fmt.Errorf("heal the database: %d %s", st, body)
	}
	return nil
}

// close stops every program, services first, and drops the run's
// databases and directory unless keep is set.
func (r *rig) close(keep bool) {
	if r.issuer != nil {
		defer r.issuer.Close()
	}
	var wg sync.WaitGroup
	for _, p := range r.procs {
		if p.kind == "service" {
			wg.Go(p.stop)
		}
	}
	wg.Wait()
	for i := len(r.procs) - 1; i >= 0; i-- {
		if p := r.procs[i]; p.kind != "service" {
			p.stop()
		}
	}
	if keep {
		fmt.Fprintf(r.log, "loadgen: kept the rig's logs in %s and its databases %s, %s, %s\n", r.dir, r.targets.OrderDB, r.targets.CouponDB, r.targets.PaymentDB)
		return
	}
	if db, err := sql.Open("mysql", r.targets.MySQLDSN); err == nil {
		for _, name := range []string{r.targets.OrderDB, r.targets.CouponDB, r.targets.PaymentDB} {
			_, _ = db.Exec("DROP DATABASE IF EXISTS `" + name + "`")
		}
		db.Close()
	}
	if r.ownDir {
		os.RemoveAll(r.dir)
	}
}
