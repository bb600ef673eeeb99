package platform_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/nats-io/nats.go/jetstream"
	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/config"
	"github.com/oncemall/oncemall/pkg/database"
	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/pkg/inbox"
	"github.com/oncemall/oncemall/pkg/migrate"
	"github.com/oncemall/oncemall/pkg/natsjs"
	"github.com/oncemall/oncemall/pkg/outbox"
	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/pkg/variant"
)

// toyConfig is a service configuration as every service writes one: the
// shared settings embedded, its own settings beside them, a lab Mode.
type toyConfig struct {
	platform.Config
	Greeting string       `env:"TOY_GREETING" default:"hello" usage:"what GET /hello answers"`
	Mode     variant.Mode `env:"TOY_MODE" default:"fixed" usage:"fixed or broken"`
}

func (c toyConfig) Validate() error {
	if err := c.Config.Validate(); err != nil {
		return err
	}
	return config.CheckOneOf("TOY_MODE", c.Mode, variant.Fixed, variant.Broken)
}

var toyMigrations = migrate.Source{Name: "toy", FS: fstest.MapFS{
	"000001_create_toy.up.sql": {Data: []byte(`CREATE TABLE made (id BIGINT PRIMARY KEY) ENGINE=InnoDB;
CREATE TABLE seen (id BIGINT PRIMARY KEY) ENGINE=InnoDB;`)},
	"000001_create_toy.down.sql": {Data: []byte("DROP TABLE made; DROP TABLE seen;")},
}}

// toy is a whole service in a few lines: a route that writes a row and its
// event through the outbox, a consumer of that event through the inbox, and
// a job.
func toy(ticks chan<- struct{}) platform.Service[toyConfig] {
	return platform.Service[toyConfig]{
		Name:       "toy",
		Port:       18099,
		Migrations: []migrate.Source{toyMigrations},
		Streams:    []string{"thing"},
		Wire: func(w *platform.Wiring, cfg toyConfig) error {
			w.Routes(func(r gin.IRouter) {
				r.GET("/hello", func(c *gin.Context) { c.String(http.StatusOK, cfg.Greeting) })
				r.GET("/internal/ping", w.Internal, func(c *gin.Context) { c.String(http.StatusOK, "pong") })
				r.POST("/things/:id", func(c *gin.Context) {
					id := c.Param("id")
					// In the request's context, as the stores pass it: the
					// outbox row then joins the request's trace.
					err := w.DB.WithContext(c.Request.Context()).Transaction(func(tx *gorm.DB) error {
						if err := tx.Exec("INSERT INTO made (id) VALUES (?)", id).Error; err != nil {
							return err
						}
						msg, err := outbox.JSON("thing-made-"+id, "thing.made", map[string]string{"id": id})
						if err != nil {
							return err
						}
						return outbox.Add(tx, msg)
					})
					if err != nil {
						c.String(http.StatusInternalServerError, err.Error())
						return
					}
					w.Outbox.Wake()
					c.Status(http.StatusCreated)
				})
			})
			w.Consume(platform.Consumer{Name: "toy-thing-made", Subject: "thing.made", Handle: func(ctx context.Context, tx *gorm.DB, msg inbox.Message) error {
				var body struct{ ID string }
				if err := inbox.DecodeJSON(msg, &body); err != nil {
					return err
				}
				return tx.Exec("INSERT INTO seen (id) VALUES (?)", body.ID).Error
			}})
			w.Job(platform.Job{Name: "toy-tick", Schedule: "@every 1s", Run: func(context.Context) error {
				select {
				case ticks <- struct{}{}:
				default:
				}
				return nil
			}})
			return nil
		},
	}
}

// toyEnv sets the environment of a toy service on its own database, port,
// streams (under a unique event prefix) and admin token, and returns the
// base URL and the database.
func toyEnv(t *testing.T) (string, *gorm.DB) {
	t.Helper()
	mysqlCfg, dbName := testenv.NewDatabase(t)
	addr := testenv.FreeAddr(t)
	prefix := strings.ToLower(testenv.UniqueName(t, "toy")) + "."
	conn := testenv.NATS(t)
	testenv.DeleteStreamAtCleanup(t, conn.JS, strings.ToUpper(strings.ReplaceAll(prefix, ".", "_"))+"THING")
	for k, v := range map[string]string{
		"ONCEMALL_ENV": "lab", "MYSQL_ADDR": mysqlCfg.Addr, "MYSQL_DATABASE": dbName, "HTTP_ADDR": addr,
		"EVENT_SUBJECT_PREFIX": prefix, "ADMIN_TOKEN": "toy-admin-token-0123456789", "INTERNAL_TOKEN": "toy-internal-token-0123456789",
		"SHUTDOWN_TIMEOUT": "10s",
	} {
		t.Setenv(k, v)
	}
	db, err := database.Open(context.Background(), mysqlCfg, dbName, testenv.Logger(t))
	testenv.Must(t, err)
	t.Cleanup(func() { _ = database.Close(db) })
	return "http://" + addr, db
}

// serve runs svc until the test ends and waits until it is ready.
func serve(t *testing.T, svc platform.Service[toyConfig], base string) {
	t.Helper()
	testenv.Serve(t, func(ctx context.Context) error { return platform.Run(ctx, svc, nil, io.Discard) }, base)
}

// start runs svc, waits for /readyz, and returns what stops it as SIGTERM
// would and checks that Run returned nil.
func start(t *testing.T, svc platform.Service[toyConfig], base string) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- platform.Run(ctx, svc, nil, io.Discard) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(20 * time.Second):
				t.Error("Run did not return after cancellation")
			}
		})
	}
	t.Cleanup(stop)
	testenv.WaitFor(t, 30*time.Second, "/readyz to answer 200", func() bool {
		select {
		case err := <-done:
			t.Fatalf("Run returned early: %v", err)
		default:
		}
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return stop
}

func count(t *testing.T, db *gorm.DB, query string, args ...any) int {
	t.Helper()
	var n int
	testenv.Must(t, db.Raw(query, args...).Scan(&n).Error)
	return n
}

// TestRunRunsWhatTheServiceDeclares: the route, the outbox relay, the
// consumer through the inbox, the job, the redrive behind the admin token
// and the metrics all work from the declaration alone.
func TestRunRunsWhatTheServiceDeclares(t *testing.T) {
	base, db := toyEnv(t)
	ticks := make(chan struct{}, 1)
	serve(t, toy(ticks), base)

	resp, err := http.Get(base + "/hello")
	testenv.Must(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "hello" {
		t.Fatalf("GET /hello = %q, want the TOY_GREETING default", b)
	}
	for _, id := range []string{"1", "2", "3"} {
		resp, err := http.Post(base+"/things/"+id, "application/json", nil)
		testenv.Must(t, err)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("POST /things/%s = %d", id, resp.StatusCode)
		}
	}
	testenv.WaitFor(t, 15*time.Second, "the consumer to see the three events", func() bool {
		return count(t, db, "SELECT COUNT(*) FROM seen") == 3
	})
	if n := count(t, db, "SELECT COUNT(*) FROM processed_message WHERE consumer = 'toy-thing-made'"); n != 3 {
		t.Fatalf("processed_message rows = %d, want 3 (the inbox deduplicates in the handler's transaction)", n)
	}
	select {
	case <-ticks:
	case <-time.After(5 * time.Second):
		t.Fatal("the declared job never ran")
	}
	for _, tc := range []struct {
		method, path, token string
		want                int
	}{
		{http.MethodPost, outbox.RedrivePath, "", http.StatusUnauthorized},
		{http.MethodPost, outbox.RedrivePath, "toy-internal-token-0123456789", http.StatusUnauthorized},
		{http.MethodPost, outbox.RedrivePath, "toy-admin-token-0123456789", http.StatusOK},
		{http.MethodGet, "/internal/ping", "", http.StatusUnauthorized},
		{http.MethodGet, "/internal/ping", "toy-admin-token-0123456789", http.StatusUnauthorized},
		{http.MethodGet, "/internal/ping", "toy-internal-token-0123456789", http.StatusOK},
	} {
		token, want := tc.token, tc.want
		req, _ := http.NewRequest(tc.method, base+tc.path, bytes.NewBufferString(`{}`))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		testenv.Must(t, err)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s %s with token %q = %d, want %d", tc.method, tc.path, token, resp.StatusCode, want)
		}
	}
	resp, err = http.Get(base + "/metrics")
	testenv.Must(t, err)
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, series := range []string{`job_runs_total{job="toy-tick",outcome="ok"}`, `job_runs_total{job="inbox-cleanup",outcome="failed"} 0`, "outbox_"} {
		if !strings.Contains(string(b), series) {
			t.Errorf("/metrics has no %s", series)
		}
	}
}

// TestRunCleansTheInboxTables: every service gets the inbox cleanup without
// asking for it, so processed ids, refusal counts and dead letters past
// their retention go and younger ones stay. (The order service once forgot this wiring, and
// its processed_message grew without bound.)
func TestRunCleansTheInboxTables(t *testing.T) {
	base, db := toyEnv(t)
	t.Setenv("INBOX_CLEANUP_SCHEDULE", "@every 1s")
	t.Setenv("INBOX_RETENTION", "1h")
	t.Setenv("INBOX_DEAD_RETENTION", "2h")
	testenv.Must(t, platform.Run(context.Background(), toy(nil), []string{"migrate"}, io.Discard))
	now := time.Now().UTC()
	for i, at := range []time.Time{now.Add(-90 * time.Minute), now.Add(-30 * time.Minute)} {
		testenv.Must(t, db.Exec("INSERT INTO processed_message (consumer, message_id, processed_at) VALUES ('c', ?, ?)", fmt.Sprint("p", i), at).Error)
	}
	for i, at := range []time.Time{now.Add(-90 * time.Minute), now.Add(-30 * time.Minute)} {
		testenv.Must(t, db.Exec("INSERT INTO refused_message (consumer, message_id, refusals, reason, refused_at) VALUES ('c', ?, 1, 'r', ?)", fmt.Sprint("r", i), at).Error)
	}
	for i, at := range []time.Time{now.Add(-3 * time.Hour), now.Add(-90 * time.Minute)} {
		testenv.Must(t, db.Exec("INSERT INTO dead_message (consumer, message_id, subject, body, reason, deliveries, created_at) VALUES ('c', ?, 's', '', 'r', 1, ?)", fmt.Sprint("d", i), at).Error)
	}
	serve(t, toy(nil), base)
	testenv.WaitFor(t, 10*time.Second, "the inbox cleanup to delete the old rows", func() bool {
		return count(t, db, "SELECT COUNT(*) FROM processed_message") == 1 && count(t, db, "SELECT COUNT(*) FROM refused_message") == 1 &&
			count(t, db, "SELECT COUNT(*) FROM dead_message") == 1
	})
	if n := count(t, db, "SELECT COUNT(*) FROM refused_message WHERE message_id = 'r1'"); n != 1 {
		t.Fatal("the young refusal count was deleted")
	}
	if n := count(t, db, "SELECT COUNT(*) FROM processed_message WHERE message_id = 'p1'"); n != 1 {
		t.Fatal("the young processed id was deleted")
	}
	if n := count(t, db, "SELECT COUNT(*) FROM dead_message WHERE message_id = 'd1'"); n != 1 {
		t.Fatal("the young dead letter was deleted")
	}
}

// TestLoadGuardsTheLabAndTheSecrets: a broken variant and the published
// development token run only where they are meant to, an empty secret never
// starts, and every refusal names its variable.
func TestLoadGuardsTheLabAndTheSecrets(t *testing.T) {
	svc := toy(nil)
	for _, tc := range []struct {
		name string
		env  map[string]string
		want string // "" for success, else a part of the error
	}{
		{"production refuses the dev token", map[string]string{}, "ADMIN_TOKEN"},
		{"production with real tokens", map[string]string{"ADMIN_TOKEN": "a-real-secret-of-some-length", "INTERNAL_TOKEN": "another-real-secret-of-length"}, ""},
		{"production refuses a short token", map[string]string{"ADMIN_TOKEN": "short"}, "ADMIN_TOKEN"},
		{"dev allows the dev token", map[string]string{"ONCEMALL_ENV": "dev"}, ""},
		{"an empty token is refused even in dev", map[string]string{"ONCEMALL_ENV": "dev", "ADMIN_TOKEN": ""}, "ADMIN_TOKEN"},
		{"dev refuses a broken mode", map[string]string{"ONCEMALL_ENV": "dev", "TOY_MODE": "broken"}, "TOY_MODE"},
		{"production refuses a broken mode", map[string]string{"ADMIN_TOKEN": "a-real-secret-of-some-length", "INTERNAL_TOKEN": "another-real-secret-of-length", "TOY_MODE": "broken"}, "TOY_MODE"},
		{"lab allows a broken mode", map[string]string{"ONCEMALL_ENV": "lab", "TOY_MODE": "broken"}, ""},
		{"an unknown environment", map[string]string{"ONCEMALL_ENV": "staging"}, "ONCEMALL_ENV"},
		{"production refuses the dev internal token", map[string]string{"ADMIN_TOKEN": "a-real-secret-of-some-length"}, "INTERNAL_TOKEN"},
		{"one secret for both tokens", map[string]string{"ONCEMALL_ENV": "dev", "ADMIN_TOKEN": "same-secret-for-both-01", "INTERNAL_TOKEN": "same-secret-for-both-01"}, "INTERNAL_TOKEN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := svc.Load(func(name string) (string, bool) { v, ok := tc.env[name]; return v, ok })
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Load: %v, want success", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Load: %v, want an error naming %s", err, tc.want)
			}
			if err == nil && (cfg.HTTPAddr != ":18099" || cfg.Database != "oncemall_toy") {
				t.Fatalf("defaults HTTP_ADDR=%q MYSQL_DATABASE=%q, want the service's :18099 and oncemall_toy", cfg.HTTPAddr, cfg.Database)
			}
			if err != nil && strings.Contains(err.Error(), "dev-admin-token") {
				t.Fatalf("the error shows the secret: %v", err)
			}
		})
	}
}

// TestHelpListsTheCommandsAndEveryVariable: --help needs no configuration
// and prints every variable the service reads, with the service's defaults.
func TestHelpListsTheCommandsAndEveryVariable(t *testing.T) {
	t.Setenv("LOG_LEVEL", "loud") // help must not need a valid configuration
	var out bytes.Buffer
	testenv.Must(t, platform.Run(context.Background(), toy(nil), []string{"--help"}, &out))
	help := out.String()
	for _, want := range []string{"migrate", "outbox redrive", "TOY_GREETING", "ONCEMALL_ENV", "INBOX_CLEANUP_SCHEDULE", "JOB_LOCK_TTL", ":18099", "oncemall_toy"} {
		if !strings.Contains(help, want) {
			t.Errorf("--help does not mention %s:\n%s", want, help)
		}
	}
	for _, v := range toy(nil).Vars() {
		if !strings.Contains(help, v.Name) {
			t.Errorf("--help leaves out %s", v.Name)
		}
	}
	if err := platform.Run(context.Background(), toy(nil), []string{"serve-please"}, io.Discard); err == nil || !strings.Contains(err.Error(), "--help") {
		t.Fatalf("unknown command: %v, want an error pointing to --help", err)
	}
}

// TestHealthcheckCommandNeedsNoConfiguration: `<service> healthcheck URL`,
// the compose healthcheck, probes URL with an environment the service
// would refuse, and fails when the answer is not 2xx.
func TestHealthcheckCommandNeedsNoConfiguration(t *testing.T) {
	t.Setenv("LOG_LEVEL", "loud")
	var down atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	testenv.Must(t, platform.Run(context.Background(), toy(nil), []string{"healthcheck", srv.URL + "/readyz"}, io.Discard))
	down.Store(true)
	if err := platform.Run(context.Background(), toy(nil), []string{"healthcheck", srv.URL + "/readyz"}, io.Discard); err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("healthcheck of a 503: %v, want an error naming it", err)
	}
}

// TestConsumerWaitsForItsPublishersStream: a service consumes a stream it
// does not declare (its publisher does). Started first, it serves at once,
// its consumer waits; once the publisher's stream exists, the consumer
// attaches and processes what is published there.
func TestConsumerWaitsForItsPublishersStream(t *testing.T) {
	base, db := toyEnv(t)
	prefix := os.Getenv("EVENT_SUBJECT_PREFIX")
	ev := events.Config{SubjectPrefix: prefix}
	conn := testenv.NATS(t)
	testenv.DeleteStreamAtCleanup(t, conn.JS, ev.StreamName("other"))
	svc := toy(nil)
	var wiring atomic.Pointer[platform.Wiring]
	svc.Wire = func(w *platform.Wiring, cfg toyConfig) error {
		wiring.Store(w)
		w.Consume(platform.Consumer{Name: "toy-other-made", Subject: "other.made", Handle: func(ctx context.Context, tx *gorm.DB, msg inbox.Message) error {
			return tx.Exec("INSERT INTO seen (id) VALUES (1)").Error
		}})
		return nil
	}
	serve(t, svc, base) // ready although the stream it consumes does not exist
	if c := wiring.Load().Consumer("toy-other-made"); c != nil {
		t.Fatal("Consumer returned a consumer still waiting for its stream")
	}

	ctx := context.Background()
	_, err := natsjs.EnsureStream(ctx, conn.JS, natsjs.EventStream(ev, "other"))
	testenv.Must(t, err)
	_, err = conn.JS.Publish(ctx, ev.Subject("other.made"), []byte(`{}`), jetstream.WithMsgID("other-1"))
	testenv.Must(t, err)
	testenv.WaitFor(t, 15*time.Second, "the consumer to attach and process the message", func() bool {
		return count(t, db, "SELECT COUNT(*) FROM seen") == 1
	})
	// Consumer is the one that ran: the message it processed is its
	// duplicate.
	c := wiring.Load().Consumer("toy-other-made")
	if c == nil {
		t.Fatal("no consumer toy-other-made once it attached")
	}
	if out, err := c.Process(ctx, inbox.Message{ID: "other-1", Subject: ev.Subject("other.made"), Body: []byte(`{}`)}); out != inbox.Duplicate {
		t.Fatalf("other-1 handed again: %s %v, want duplicate", out, err)
	}
}
