// Package testenv gives tests real dependencies: a throwaway MySQL/MariaDB
// database, a NATS JetStream connection with unique stream names, and a Redis
// client with a unique key prefix. Addresses come from the same environment
// variables the services read (MYSQL_ADDR, NATS_URL, REDIS_ADDR), with the
// same local defaults. An unreachable dependency fails the test at once with
// the command that starts it; nothing is skipped.
package testenv

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/config"
	"github.com/oncemall/oncemall/pkg/database"
	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/pkg/migrate"
	"github.com/oncemall/oncemall/pkg/natsjs"
	"github.com/oncemall/oncemall/pkg/redisclient"
)

// How to start each dependency on a development machine; printed when one is
// unreachable.
const (
	startMariaDB = "start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd"
	startRedis   = `redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no`
	startNATS    = "start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server -- -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server"
)

// Env is the dependency configuration tests use.
type Env struct {
	MySQL database.Config
	NATS  natsjs.Config
	Redis redisclient.Config
}

var (
	envOnce sync.Once
	env     Env
	envErr  error
)

// Config returns the dependency configuration, read once from the environment.
func Config(t testing.TB) Env {
	t.Helper()
	envOnce.Do(func() { envErr = config.Load(&env) })
	if envErr != nil {
		t.Fatalf("testenv: %v", envErr)
	}
	return env
}

// Logger returns a logger that writes to the test log when -v is given and
// discards otherwise, so failures stay readable.
func Logger(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// RandomSuffix returns n random hex characters.
func RandomSuffix(n int) string {
	b := make([]byte, (n+1)/2)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)[:n]
}

var unsafeChars = regexp.MustCompile(`[^a-z0-9]+`)

// UniqueName returns a name unique to this test run, made of prefix, a short
// form of the test name and a random suffix; safe for database, stream,
// consumer and key names (lowercase letters, digits, underscores).
func UniqueName(t testing.TB, prefix string) string {
	short := unsafeChars.ReplaceAllString(strings.ToLower(t.Name()), "_")
	if len(short) > 30 {
		short = short[len(short)-30:]
	}
	return strings.Trim(prefix+"_"+short, "_") + "_" + RandomSuffix(8)
}

func requireTCP(t testing.TB, what, addr, start string) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatalf("%s is not reachable at %s (%v).\nStart it with:\n  %s", what, addr, err, start)
	}
	conn.Close()
}

// NewDatabase creates an empty throwaway database, dropped when the test ends,
// and returns the connection settings and its name. Use it when the code under
// test opens the database itself (a service process, say).
func NewDatabase(t testing.TB) (database.Config, string) {
	t.Helper()
	cfg := Config(t).MySQL
	requireTCP(t, "MySQL/MariaDB", cfg.Addr, startMariaDB)
	name := UniqueName(t, "t")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := database.EnsureDatabase(ctx, cfg, name); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := database.DropDatabase(ctx, cfg, name); err != nil {
			t.Logf("testenv: %v", err)
		}
	})
	return cfg, name
}

// DB returns a gorm handle on a throwaway database with sources migrated.
func DB(t testing.TB, sources ...migrate.Source) *gorm.DB {
	t.Helper()
	cfg, name := NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := database.Open(ctx, cfg, name, Logger(t))
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(func() { _ = database.Close(db) })
	if len(sources) > 0 {
		sqlDB, _ := db.DB()
		if err := migrate.Up(ctx, sqlDB, sources...); err != nil {
			t.Fatalf("testenv: migrate: %v", err)
		}
	}
	return db
}

// NATS returns a JetStream connection closed when the test ends. Streams the
// test creates should be named with UniqueName and deleted with DeleteStream.
func NATS(t testing.TB) *natsjs.Conn {
	t.Helper()
	cfg := Config(t).NATS
	addr, err := natsjs.FirstServerAddr(cfg.URL)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	requireTCP(t, "NATS", addr, startNATS)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := natsjs.Connect(ctx, cfg, t.Name(), Logger(t))
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(c.NC.Close)
	return c
}

// DeleteStreamAtCleanup deletes the named stream when the test ends.
func DeleteStreamAtCleanup(t testing.TB, js jetstream.JetStream, name string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = js.DeleteStream(ctx, name)
	})
}

// PublishersStreams declares the event streams of roots under ev, as the
// services publishing them would, and deletes them when the test ends: a
// service declares only the streams it publishes, and its consumers wait for
// the others', so a test that runs one service provides the streams it
// consumes.
func PublishersStreams(t testing.TB, js jetstream.JetStream, ev events.Config, roots ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, root := range roots {
		if _, err := natsjs.EnsureStream(ctx, js, natsjs.EventStream(ev, root)); err != nil {
			t.Fatalf("declare the %s stream: %v", root, err)
		}
		DeleteStreamAtCleanup(t, js, ev.StreamName(root))
	}
}

// Redis returns a client and a key prefix unique to the test; keys under the
// prefix are deleted when the test ends.
func Redis(t testing.TB) (*redis.Client, string) {
	t.Helper()
	cfg := Config(t).Redis
	requireTCP(t, "Redis", cfg.Addr, startRedis)
	rdb := redisclient.New(cfg)
	prefix := UniqueName(t, "t") + ":"
	t.Cleanup(func() {
		ctx := context.Background()
		iter := rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			rdb.Del(ctx, iter.Val())
		}
		rdb.Close()
	})
	return rdb, prefix
}

// Must fails the test on err.
func Must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(fmt.Sprint(err))
	}
}

// SyncBuffer is a bytes.Buffer that goroutines of the code under test may
// write (a log sink, a process's output) while the test reads it.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// FreeAddr returns a 127.0.0.1 address whose port nobody listens on at the
// time of the call: for a server the test starts, or as an address where
// nothing answers.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	Must(t, err)
	defer ln.Close()
	return ln.Addr().String()
}

// WaitFor polls cond every 20 ms until it holds, and fails t with what once
// timeout has passed.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Eventually is WaitFor for a condition that can say why it does not hold
// yet: cond is polled every interval until it reports true, and a test that
// times out fails with cond's last description, which is usually what the
// reader needs (the state that never moved).
func Eventually(t testing.TB, timeout, interval time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for time.Now().Before(deadline) {
		ok, desc := cond()
		if ok {
			return
		}
		last = desc
		time.Sleep(interval)
	}
	t.Fatalf("%s: not within %s; last: %s", what, timeout, last)
}

// Serve runs a whole service in the background until the test ends (run is
// its platform.Run with the test's context), waits until base+"/readyz"
// answers 200, and fails the test if run returns early. At the end it
// cancels run, as SIGTERM would, and requires it to return nil within 20
// seconds.
func Serve(t testing.TB, run func(ctx context.Context) error, base string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("the service stopped with: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Error("the service did not stop within 20s of its cancellation")
		}
	})
	WaitFor(t, 30*time.Second, base+"/readyz to answer 200", func() bool {
		select {
		case err := <-done:
			t.Fatalf("the service stopped early: %v", err)
		default:
		}
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}
