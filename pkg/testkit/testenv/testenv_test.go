package testenv_test

import (
	"context"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/natsjs"
	"github.com/oncemall/oncemall/pkg/redisclient"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

func TestUniqueNameIsSafeAndUnique(t *testing.T) {
	a, b := testenv.UniqueName(t, "t"), testenv.UniqueName(t, "t")
	if a == b {
		t.Fatalf("two names are equal: %s", a)
	}
	if !regexp.MustCompile(`^[a-z0-9_]+$`).MatchString(a) || len(a) > 64 {
		t.Fatalf("unsafe name %q", a)
	}
}

func TestRedisPrefixIsCleanedUp(t *testing.T) {
	var prefix string
	t.Run("inner", func(t *testing.T) {
		rdb, p := testenv.Redis(t)
		prefix = p
		if err := rdb.Set(context.Background(), p+"k", "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
	})
	rdb, _ := testenv.Redis(t)
	keys, err := rdb.Keys(context.Background(), prefix+"*").Result()
	if err != nil || len(keys) != 0 {
		t.Fatalf("keys left under %s: %v %v", prefix, keys, err)
	}
	if !strings.HasSuffix(prefix, ":") {
		t.Fatalf("prefix %q does not end in ':'", prefix)
	}
}

func TestDBIsDroppedAtCleanup(t *testing.T) {
	var name string
	t.Run("inner", func(t *testing.T) {
		db := testenv.DB(t)
		if err := db.Raw("SELECT DATABASE()").Scan(&name).Error; err != nil {
			t.Fatal(err)
		}
	})
	db := testenv.DB(t)
	var n int
	if err := db.Raw("SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = ?", name).Scan(&n).Error; err != nil || n != 0 {
		t.Fatalf("database %s still exists after its test (n=%d, err=%v)", name, n, err)
	}
}

func TestForwarderGoesDownAndComesBack(t *testing.T) {
	fwd := testenv.NewForwarder(t, testenv.Config(t).Redis.Addr)
	cfg := testenv.Config(t).Redis
	cfg.Addr = fwd.Addr()
	rdb := redisclient.New(cfg)
	defer rdb.Close()
	ctx := context.Background()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatalf("ping through the forwarder: %v", err)
	}
	fwd.Close()
	if err := rdb.Ping(ctx).Err(); err == nil {
		t.Fatal("ping succeeded with the forwarder closed")
	}
	if _, err := net.DialTimeout("tcp", fwd.Addr(), time.Second); err == nil {
		t.Fatal("a closed forwarder still accepts connections")
	}
	fwd.Reopen()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatalf("ping after Reopen: %v", err)
	}
}

// TestForwarderStallsAndResumes: a stalled forwarder answers nothing, on a
// connection in use or a new one, without closing either; on Resume what
// was held back goes through.
func TestForwarderStallsAndResumes(t *testing.T) {
	fwd := testenv.NewForwarder(t, testenv.Config(t).Redis.Addr)
	cfg := testenv.Config(t).Redis
	cfg.Addr = fwd.Addr()
	rdb := redisclient.New(cfg)
	defer rdb.Close()
	ctx := context.Background()
	testenv.Must(t, rdb.Ping(ctx).Err())
	fwd.Stall()
	sctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if err := rdb.Ping(sctx).Err(); err == nil {
		t.Fatal("ping answered through a stalled forwarder")
	}
	conn, err := net.DialTimeout("tcp", fwd.Addr(), time.Second)
	testenv.Must(t, err)
	defer conn.Close()
	_, err = conn.Write([]byte("PING\r\n"))
	testenv.Must(t, err)
	reply := make(chan string, 1)
	go func() {
		b := make([]byte, 16)
		n, _ := conn.Read(b)
		reply <- string(b[:n])
	}()
	select {
	case r := <-reply:
		t.Fatalf("a new connection got %q through a stalled forwarder", r)
	case <-time.After(300 * time.Millisecond):
	}
	fwd.Resume()
	if r := <-reply; r != "+PONG\r\n" {
		t.Fatalf("after Resume the held-back PING got %q, want +PONG", r)
	}
	testenv.Must(t, rdb.Ping(ctx).Err())
}

func TestNATSServerStopsAndStartsOnItsAddress(t *testing.T) {
	srv := testenv.NewNATSServer(t, "-js", "-sd", t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := natsjs.Connect(ctx, natsjs.Config{URL: srv.URL()}, t.Name(), testenv.Logger(t))
	testenv.Must(t, err)
	defer c.NC.Close()
	// JetStream answers only if the arguments reached the server.
	testenv.Must(t, c.Ping(ctx))
	srv.Stop()
	if conn, err := net.DialTimeout("tcp", srv.Addr(), time.Second); err == nil {
		conn.Close()
		t.Fatal("a stopped server still accepts connections")
	}
	srv.Start()
	testenv.WaitFor(t, 5*time.Second, "the client to reconnect", c.NC.IsConnected)
	testenv.Must(t, c.Ping(ctx))
}
