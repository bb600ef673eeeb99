package platform_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/robfig/cron/v3"

	"github.com/oncemall/oncemall/pkg/config"
	"github.com/oncemall/oncemall/pkg/migrate"
	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

var things = migrate.Source{Name: "things", FS: fstest.MapFS{
	"000001_create_things.up.sql":   {Data: []byte("CREATE TABLE things (id BIGINT PRIMARY KEY) ENGINE=InnoDB;")},
	"000001_create_things.down.sql": {Data: []byte("DROP TABLE things;")},
}}

func setup(t *testing.T) (platform.Config, platform.Options, *testenv.SyncBuffer) {
	t.Helper()
	var cfg platform.Config
	if err := config.LoadFrom(&cfg, func(string) (string, bool) { return "", false }); err != nil {
		t.Fatal(err)
	}
	env := testenv.Config(t)
	mysqlCfg, dbName := testenv.NewDatabase(t)
	cfg.MySQL = mysqlCfg
	cfg.NATS = env.NATS
	cfg.Redis = env.Redis
	cfg.StartupTimeout = 20 * time.Second
	cfg.ShutdownTimeout = 5 * time.Second
	cfg.Env = platform.EnvLab
	cfg.HTTPAddr = testenv.FreeAddr(t) // free now; the server binds it
	cfg.Database = dbName
	logs := &testenv.SyncBuffer{}
	return cfg, platform.Options{
		Service:    "platformtest",
		Migrations: []migrate.Source{things},
		Logger:     slog.New(slog.NewJSONHandler(io.MultiWriter(logs, testLogWriter{t}), nil)),
	}, logs
}

type testLogWriter struct{ t *testing.T }

func (w testLogWriter) Write(p []byte) (int, error) {
	if testing.Verbose() {
		w.t.Log(strings.TrimSpace(string(p)))
	}
	return len(p), nil
}

func get(t *testing.T, url string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body
}

func TestStartMigratesAndServesReady(t *testing.T) {
	cfg, opts, logs := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rt, err := platform.Start(ctx, cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := rt.DB.Raw("SELECT COUNT(*) FROM schema_migrations WHERE source = 'things'").Scan(&n).Error; err != nil || n != 1 {
		t.Fatalf("migrations not applied: n=%d err=%v", n, err)
	}
	served := make(chan error, 1)
	go func() { served <- rt.Serve(ctx) }()
	waitReady(t, "http://"+cfg.HTTPAddr+"/readyz", http.StatusOK)
	cancel()
	if err := <-served; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if !strings.Contains(logs.String(), "shutdown complete") {
		t.Fatalf("no 'shutdown complete' log line:\n%s", logs)
	}
}

func waitReady(t *testing.T, url string, want int) map[string]any {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			var body map[string]any
			_ = json.NewDecoder(resp.Body).Decode(&body)
			resp.Body.Close()
			if resp.StatusCode == want {
				return body
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never answered %d (last err %v)", url, want, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestReadyzNamesDeadRedis(t *testing.T) {
	cfg, opts, _ := setup(t)
	cfg.Redis.Addr = testenv.FreeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rt, err := platform.Start(ctx, cfg, opts)
	if err != nil {
		t.Fatalf("Start must not need Redis: %v", err)
	}
	served := make(chan error, 1)
	go func() { served <- rt.Serve(ctx) }()
	body := waitReady(t, "http://"+cfg.HTTPAddr+"/readyz", http.StatusServiceUnavailable)
	failed, _ := body["failed"].(map[string]any)
	if len(failed) != 1 || failed["redis"] == nil || !strings.Contains(body["detail"].(string), "redis") {
		t.Fatalf("/readyz = %v, want redis (and only redis) named", body)
	}
	if code, _ := get(t, "http://"+cfg.HTTPAddr+"/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz = %d with Redis down, want 200 (liveness does not depend on Redis)", code)
	}
	cancel()
	if err := <-served; err != nil {
		t.Fatalf("Serve: %v", err)
	}
}

// TestReadyzNamesUnreachableMySQL: while MySQL cannot be reached (here a
// forwarder in front of it is cut), /readyz answers 503 naming mysql alone,
// /healthz stays 200, and both recover with MySQL.
func TestReadyzNamesUnreachableMySQL(t *testing.T) {
	cfg, opts, _ := setup(t)
	fwd := testenv.NewForwarder(t, cfg.MySQL.Addr)
	cfg.MySQL.Addr = fwd.Addr()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rt, err := platform.Start(ctx, cfg, opts)
	testenv.Must(t, err)
	served := make(chan error, 1)
	go func() { served <- rt.Serve(ctx) }()
	ready := "http://" + cfg.HTTPAddr + "/readyz"
	waitReady(t, ready, http.StatusOK)
	fwd.Close()
	body := waitReady(t, ready, http.StatusServiceUnavailable)
	failed, _ := body["failed"].(map[string]any)
	if len(failed) != 1 || failed["mysql"] == nil {
		t.Fatalf("/readyz with MySQL cut = %v, want mysql (and only mysql) named", body)
	}
	if code, _ := get(t, "http://"+cfg.HTTPAddr+"/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz = %d with MySQL cut, want 200 (liveness does not depend on MySQL)", code)
	}
	fwd.Reopen()
	waitReady(t, ready, http.StatusOK)
	cancel()
	if err := <-served; err != nil {
		t.Fatalf("Serve: %v", err)
	}
}

// TestStartRejectsBadConfig: a bad setting stops Start and MigrateOnly at
// once, with an error naming it. The database name is the service's
// config's to name as MYSQL_DATABASE; here database.EnsureDatabase refuses
// it, naming the database, and no start-up retry waits on it.
func TestStartRejectsBadConfig(t *testing.T) {
	good, goodOpts, _ := setup(t)
	for _, tc := range []struct {
		name, want string
		bad        func(*platform.Config, *platform.Options)
	}{
		{"HTTP_ADDR", "HTTP_ADDR", func(c *platform.Config, _ *platform.Options) { c.HTTPAddr = ":abc" }},
		{"MYSQL_MAX_OPEN_CONNS", "MYSQL_MAX_OPEN_CONNS", func(c *platform.Config, _ *platform.Options) { c.MySQL.MaxOpenConns = 0 }},
		{"NATS_URL", "NATS_URL", func(c *platform.Config, _ *platform.Options) { c.NATS.URL = "not a url" }},
		{"database name", "bad`name", func(c *platform.Config, _ *platform.Options) { c.Database = "bad`name" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, opts := good, goodOpts
			tc.bad(&cfg, &opts)
			began := time.Now()
			if _, err := platform.Start(context.Background(), cfg, opts); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Start: %v, want an error naming %s", err, tc.want)
			}
			if took := time.Since(began); took > 5*time.Second {
				t.Fatalf("Start gave up after %s, want at once (STARTUP_TIMEOUT is %s)", took, cfg.StartupTimeout)
			}
			if tc.name == "HTTP_ADDR" {
				return // migrate does not listen
			}
			began = time.Now()
			if err := platform.MigrateOnly(context.Background(), cfg, opts); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("MigrateOnly: %v, want an error naming %s", err, tc.want)
			}
			if took := time.Since(began); took > 5*time.Second {
				t.Fatalf("MigrateOnly gave up after %s, want at once (STARTUP_TIMEOUT is %s)", took, cfg.StartupTimeout)
			}
		})
	}
}

// TestStartGivesUpAtOnceOnRefusedCredentials: refused credentials do not
// heal, so Start reports them at once instead of retrying them until
// STARTUP_TIMEOUT as it does an unreachable server.
func TestStartGivesUpAtOnceOnRefusedCredentials(t *testing.T) {
	cfg, opts, _ := setup(t)
	cfg.MySQL.User = "t_no_such_user_" + testenv.RandomSuffix(6)
	cfg.StartupTimeout = 20 * time.Second
	began := time.Now()
	_, err := platform.Start(context.Background(), cfg, opts)
	if err == nil || !strings.Contains(err.Error(), "Access denied") {
		t.Fatalf("Start as an unknown MySQL user: %v, want the server's access denied", err)
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Fatalf("Start gave up after %s, want at once (STARTUP_TIMEOUT is %s)", took, cfg.StartupTimeout)
	}
}

// TestShutdownOrder checks the promise of OnShutdown: the HTTP server has
// finished its in-flight requests before any component stops, components stop
// in reverse order of registration while the database still answers, and
// the dependencies are closed last.
func TestShutdownOrder(t *testing.T) {
	cfg, opts, _ := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rt, err := platform.Start(ctx, cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu     sync.Mutex
		events []string
	)
	record := func(e string) { mu.Lock(); events = append(events, e); mu.Unlock() }
	started := make(chan struct{})
	rt.HTTP.Engine().GET("/slow", func(c *gin.Context) {
		close(started)
		time.Sleep(300 * time.Millisecond)
		record("slow request handled")
		c.String(http.StatusOK, "finished")
	})
	for _, name := range []string{"relay", "cron", "consumers"} {
		rt.OnShutdown(name, func(ctx context.Context) error {
			sqlDB, _ := rt.DB.DB()
			if err := sqlDB.PingContext(ctx); err != nil {
				record(name + ":db-closed")
			}
			if !rt.NATS.NC.IsConnected() {
				record(name + ":nats-closed")
			}
			record(name)
			return nil
		})
	}
	served := make(chan error, 1)
	go func() { served <- rt.Serve(ctx) }()
	waitReady(t, "http://"+cfg.HTTPAddr+"/readyz", http.StatusOK)

	slow := make(chan string, 1)
	go func() {
		resp, err := http.Get("http://" + cfg.HTTPAddr + "/slow")
		if err != nil {
			slow <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		slow <- string(b)
	}()
	<-started
	cancel()
	if got := <-slow; got != "finished" {
		t.Fatalf("in-flight request: %q, want it to finish", got)
	}
	if err := <-served; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	want := []string{"slow request handled", "consumers", "cron", "relay"}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(events, ",") != strings.Join(want, ",") {
		t.Fatalf("shutdown events %v, want %v", events, want)
	}
	sqlDB, _ := rt.DB.DB()
	if err := sqlDB.Ping(); err == nil {
		t.Fatal("database still open after shutdown")
	}
	if !rt.NATS.NC.IsClosed() {
		t.Fatal("NATS still open after shutdown")
	}
	if _, err := net.DialTimeout("tcp", cfg.HTTPAddr, time.Second); err == nil {
		t.Fatal("HTTP still accepting after shutdown")
	}
}

// TestShutdownGivesUpAtTheBound: a request still running when
// SHUTDOWN_TIMEOUT passes does not hold the process. Serve returns about when
// the bound passes, having waited for the request until then, and says the
// deadline was hit.
func TestShutdownGivesUpAtTheBound(t *testing.T) {
	cfg, opts, _ := setup(t)
	cfg.ShutdownTimeout = time.Second
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rt, err := platform.Start(ctx, cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	started, release := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(release) })
	rt.HTTP.Engine().GET("/stuck", func(c *gin.Context) {
		close(started)
		select {
		case <-release:
		case <-time.After(time.Minute):
		}
		c.Status(http.StatusOK)
	})
	served := make(chan error, 1)
	go func() { served <- rt.Serve(ctx) }()
	waitReady(t, "http://"+cfg.HTTPAddr+"/readyz", http.StatusOK)
	go func() {
		if resp, err := http.Get("http://" + cfg.HTTPAddr + "/stuck"); err == nil {
			resp.Body.Close()
		}
	}()
	<-started

	began := time.Now()
	cancel()
	select {
	case err = <-served:
	case <-time.After(cfg.ShutdownTimeout + 2*time.Second):
		t.Fatalf("Serve still running %s after the shutdown began; SHUTDOWN_TIMEOUT is %s", time.Since(began), cfg.ShutdownTimeout)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Serve: %v, want the shutdown deadline reported", err)
	}
	if took := time.Since(began); took < cfg.ShutdownTimeout/2 {
		t.Fatalf("Serve returned after %s, before the in-flight request had its %s", took, cfg.ShutdownTimeout)
	}
}

func TestMigrateOnly(t *testing.T) {
	cfg, opts, _ := setup(t)
	if err := platform.MigrateOnly(context.Background(), cfg, opts); err != nil {
		t.Fatal(err)
	}
	if err := platform.MigrateOnly(context.Background(), cfg, opts); err != nil {
		t.Fatalf("second run: %v", err)
	}
}

// TestGoAndStartCronStopInReverse checks that background components keep
// running through the HTTP drain, are cancelled in reverse registration
// order, and that StartCron's stop waits for a running job.
func TestGoAndStartCronStopInReverse(t *testing.T) {
	cfg, opts, _ := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rt, err := platform.Start(ctx, cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu     sync.Mutex
		events []string
	)
	record := func(e string) { mu.Lock(); events = append(events, e); mu.Unlock() }
	component := func(name string) func(context.Context) error {
		return func(ctx context.Context) error {
			<-ctx.Done()
			record(name)
			return ctx.Err() // a cancelled component is a clean stop
		}
	}
	rt.Go("relay", component("relay"))
	jobStarted := make(chan struct{}, 1)
	c := cron.New(cron.WithSeconds())
	if _, err := c.AddFunc("* * * * * *", func() {
		select {
		case jobStarted <- struct{}{}:
			time.Sleep(300 * time.Millisecond)
			record("cron job finished")
		default:
		}
	}); err != nil {
		t.Fatal(err)
	}
	rt.StartCron("cron", c)
	rt.Go("consumer", component("consumer"))

	served := make(chan error, 1)
	go func() { served <- rt.Serve(ctx) }()
	waitReady(t, "http://"+cfg.HTTPAddr+"/readyz", http.StatusOK)
	select {
	case <-jobStarted:
	case <-time.After(3 * time.Second):
		t.Fatal("cron job never ran")
	}
	cancel()
	if err := <-served; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	want := []string{"consumer", "cron job finished", "relay"}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(events, ",") != strings.Join(want, ",") {
		t.Fatalf("stop events %v, want %v", events, want)
	}
}
