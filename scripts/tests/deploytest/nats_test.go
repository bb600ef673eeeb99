package deploytest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/oncemall/oncemall/pkg/events"
	"github.com/oncemall/oncemall/pkg/natsjs"
	"github.com/oncemall/oncemall/pkg/testkit/composecheck"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

// publishing is the policy deploy/nats.conf enforces: the subject roots
// each service publishes (the first token of the pkg/events subjects it
// writes to its outbox), its own name unless listed here. Everything else a
// user may do follows from the streams its service declares.
var publishing = map[string][]string{
	"order":    {"order", "product"},
	"coupon":   {}, // it consumes order.> and publishes nothing
	"identity": {}, // it neither publishes nor consumes
}

// inert are the services that neither publish nor consume an event: their
// user may connect and do nothing else.
var inert = map[string]bool{"identity": true}

func publishes(service string) []string {
	if roots, ok := publishing[service]; ok {
		return roots
	}
	return []string{service}
}

// users returns the services, in a stable order: the directories
// services/<name>/cmd/<name> whose main runs a platform service
// (scripts/servers.sh's run_services); the platform simulator, psp-sim,
// uses no NATS.
func users(t *testing.T) []string {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(composecheck.RepoRoot(t), "services", "*", "cmd", "*"))
	testenv.Must(t, err)
	var names []string
	for _, d := range dirs {
		main, err := os.ReadFile(filepath.Join(d, "main.go"))
		testenv.Must(t, err)
		if name := filepath.Base(d); filepath.Base(filepath.Dir(filepath.Dir(d))) == name && strings.Contains(string(main), "platform.Main(") {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// password is the test's password of a user of deploy/nats.conf, which
// reads them from the environment.
func password(user string) string { return "test-" + user + "-nats-password" }

var streamsField = regexp.MustCompile(`(?m)^\s*Streams:\s*\[\]string\{([^}]*)\}`)

// declaredStreams returns the subject roots whose streams the service
// declares at start-up (the Streams of its platform.Service, in its
// internal/assembly or its cmd/<service>/main.go): the ones it publishes.
func declaredStreams(t *testing.T, service string) []string {
	t.Helper()
	dir := filepath.Join(composecheck.RepoRoot(t), "services", service)
	files, err := filepath.Glob(filepath.Join(dir, "internal", "assembly", "*.go"))
	testenv.Must(t, err)
	var m [][]byte
	for _, path := range append(files, filepath.Join(dir, "cmd", service, "main.go")) {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		if src, err := os.ReadFile(path); err == nil {
			if m = streamsField.FindSubmatch(src); m != nil {
				break
			}
		}
	}
	if m == nil {
		t.Fatalf("services/%s declares no Streams: []string{…} in internal/assembly or cmd/%s/main.go", service, service)
	}
	var roots []string
	for _, q := range regexp.MustCompile(`"([a-z0-9_]+)"`).FindAllSubmatch(m[1], -1) {
		roots = append(roots, string(q[1]))
	}
	return roots
}

// subjectConst matches pkg/events' subject constants (OrderPaid =
// "order.paid"): their names and roots.
var subjectConst = regexp.MustCompile(`(?m)^\s*([A-Z]\w*)\s*=\s*"([a-z0-9_]+)\.[a-z0-9_.]+"`)

// consumedStreams returns the subject roots of the streams the service's
// consumers read (the pkg/events subject constants its internal/messaging
// names), which their publishers declare.
func consumedStreams(t *testing.T, service string) []string {
	t.Helper()
	root := composecheck.RepoRoot(t)
	evfiles, err := filepath.Glob(filepath.Join(root, "pkg", "events", "*.go"))
	testenv.Must(t, err)
	subjects := map[string]string{} // constant name → subject root
	for _, f := range evfiles {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		evsrc, err := os.ReadFile(f)
		testenv.Must(t, err)
		for _, m := range subjectConst.FindAllSubmatch(evsrc, -1) {
			subjects[string(m[1])] = string(m[2])
		}
	}
	if len(subjects) == 0 {
		t.Fatal("pkg/events declares no subject constants the test can read")
	}
	files, err := filepath.Glob(filepath.Join(root, "services", service, "internal", "messaging", "*.go"))
	testenv.Must(t, err)
	named := regexp.MustCompile(`\bevents\.([A-Z]\w*)\b`)
	var roots []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		testenv.Must(t, err)
		for _, m := range named.FindAllSubmatch(src, -1) {
			if r, ok := subjects[string(m[1])]; ok && !slices.Contains(roots, r) {
				roots = append(roots, r)
			}
		}
	}
	slices.Sort(roots)
	return roots
}

// loadNATSConfig parses deploy/nats.conf as nats-server does, with the
// test's passwords in the environment.
func loadNATSConfig(t *testing.T) *server.Options {
	t.Helper()
	for _, user := range append(users(t), admin) {
		t.Setenv("NATS_"+strings.ToUpper(user)+"_PASSWORD", password(user))
	}
	opts, err := server.ProcessConfigFile(filepath.Join(composecheck.RepoRoot(t), "deploy", "nats.conf"))
	if err != nil {
		t.Fatalf("deploy/nats.conf: %v", err)
	}
	return opts
}

// admin is the operator's user of deploy/nats.conf, with every right: the
// tests use it to put messages where a service's consumer reads them and to
// look at the streams afterwards, as make test does against make infra.
const admin = "admin"

// startNATS runs the nats-server of the version compose pins, in process,
// with deploy/nats.conf on a free 127.0.0.1 port and a store of its own,
// and returns its URL for user.
func startNATS(t *testing.T) func(user string) string {
	t.Helper()
	opts := loadNATSConfig(t)
	opts.Host, opts.Port, opts.StoreDir = "127.0.0.1", -1, t.TempDir()
	opts.HTTPPort = 0
	s, err := server.NewServer(opts)
	testenv.Must(t, err)
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server with deploy/nats.conf did not start")
	}
	t.Cleanup(s.Shutdown)
	return func(user string) string {
		return strings.Replace(s.ClientURL(), "nats://", "nats://"+user+":"+password(user)+"@", 1)
	}
}

// connect connects as the services do (natsjs.Connect). Errors the server
// sends back on the connection (permission violations) go to errs.
func connect(t *testing.T, url string) (*natsjs.Conn, chan error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := natsjs.Connect(ctx, natsjs.Config{URL: url}, t.Name(), testenv.Logger(t))
	testenv.Must(t, err)
	t.Cleanup(c.NC.Close)
	errs := make(chan error, 100)
	c.NC.SetErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		select {
		case errs <- err:
		default:
		}
	})
	return c, errs
}

func short() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), time.Second)
}

func streamMsgs(t *testing.T, js jetstream.JetStream, stream string) uint64 {
	t.Helper()
	ctx, cancel := short()
	defer cancel()
	s, err := js.Stream(ctx, stream)
	testenv.Must(t, err)
	info, err := s.Info(ctx)
	testenv.Must(t, err)
	return info.State.Msgs
}

// TestNATSUsersDoTheirServicesWork: each service's user, on the server
// compose runs, does what the platform does at start-up and after: the
// /readyz check, declaring the streams it publishes to, publishing each of
// its own subjects with a PubAck, and consuming each stream its consumers
// read (declared by admin, standing in for their publishers) through a
// durable pull consumer, acked with the server's confirmation.
func TestNATSUsersDoTheirServicesWork(t *testing.T) {
	url := startNATS(t)
	op, _ := connect(t, url(admin))
	for _, user := range users(t) {
		t.Run(user, func(t *testing.T) {
			c, _ := connect(t, url(user))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			testenv.Must(t, c.Ping(ctx))
			roots := declaredStreams(t, user)
			for _, root := range roots {
				if _, err := natsjs.EnsureStream(ctx, c.JS, natsjs.EventStream(events.Config{}, root)); err != nil {
					t.Fatalf("declare the %s stream: %v", root, err)
				}
			}
			for _, root := range publishes(user) {
				subject := root + ".deploytest"
				msg := nats.NewMsg(subject)
				msg.Header.Set(jetstream.MsgIDHeader, user+"-"+testenv.RandomSuffix(8))
				ack, err := c.JS.PublishMsg(ctx, msg)
				if err != nil {
					t.Fatalf("publish %s: %v", subject, err)
				}
				if want := (events.Config{}).StreamName(root); ack.Stream != want {
					t.Fatalf("publish %s: acked by stream %s, want %s", subject, ack.Stream, want)
				}
			}
			consumed := consumedStreams(t, user)
			if len(consumed) == 0 && !inert[user] {
				t.Fatalf("no consumer found in services/%s/internal/messaging", user)
			}
			for _, root := range consumed {
				// What another service published, put there by admin.
				_, err := natsjs.EnsureStream(ctx, op.JS, natsjs.EventStream(events.Config{}, root))
				testenv.Must(t, err)
				subject := root + ".consumed_by_" + user
				if _, err := op.JS.Publish(ctx, subject, []byte("{}")); err != nil {
					t.Fatalf("admin publish %s: %v", subject, err)
				}
				stream := (events.Config{}).StreamName(root)
				// The consumer as inbox.NewConsumer declares it.
				cons, err := c.JS.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{
					Durable:       user + "-deploytest",
					AckPolicy:     jetstream.AckExplicitPolicy,
					FilterSubject: subject,
					DeliverPolicy: jetstream.DeliverAllPolicy,
				})
				if err != nil {
					t.Fatalf("declare a consumer on %s: %v", stream, err)
				}
				batch, err := cons.Fetch(1, jetstream.FetchMaxWait(3*time.Second))
				testenv.Must(t, err)
				n := 0
				for m := range batch.Messages() {
					n++
					if err := m.DoubleAck(ctx); err != nil {
						t.Fatalf("ack a delivery of %s: %v", stream, err)
					}
				}
				if err := batch.Error(); err != nil || n != 1 {
					t.Fatalf("pull from %s: %d messages, %v; want 1", stream, n, err)
				}
			}
		})
	}
}

// TestNATSUsersCannotActForAnotherService: no user can publish another
// service's event (the order user's payment.succeeded would mark an order
// PAID), subscribe to events outside JetStream, or destroy what the
// streams hold; and a push consumer aimed at another service's subject
// delivers nothing into that service's stream.
func TestNATSUsersCannotActForAnotherService(t *testing.T) {
	url := startNATS(t)
	op, _ := connect(t, url(admin))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, root := range []string{"order", "product", "coupon", "payment"} {
		_, err := natsjs.EnsureStream(ctx, op.JS, natsjs.EventStream(events.Config{}, root))
		testenv.Must(t, err)
		_, err = op.JS.Publish(ctx, root+".seed", []byte("{}"))
		testenv.Must(t, err)
	}
	forged := map[string]string{
		"order":   events.PaymentSucceeded,
		"coupon":  events.OrderPaid,
		"payment": events.OrderPaid,
	}
	for _, user := range users(t) {
		t.Run(user, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			c, errs := connect(t, url(user))
			subject, ok := forged[user]
			if !ok {
				subject = events.PaymentSucceeded
			}
			stream := (events.Config{}).StreamName(subject)
			before := streamMsgs(t, op.JS, stream)
			pctx, cancel := short()
			_, err := c.JS.Publish(pctx, subject, []byte(`{"order_no":"forged"}`))
			cancel()
			if err == nil {
				t.Fatalf("%s published %s", user, subject)
			}
			if after := streamMsgs(t, op.JS, stream); after != before {
				t.Fatalf("%s stream went from %d to %d messages after %s's refused publish", stream, before, after, user)
			}
			expectViolation(t, errs, subject)

			// Reading events outside JetStream.
			sub, err := c.NC.SubscribeSync(subject)
			testenv.Must(t, err)
			testenv.Must(t, c.NC.Flush())
			expectViolation(t, errs, subject)
			_ = sub.Unsubscribe()

			// Destroying: a stream, its messages, a consumer; changing a
			// stream of another service (a source with a subject transform
			// would copy the user's events in under that service's
			// subjects).
			// A service that publishes nothing is tried on the stream it
			// reads.
			// A service with no stream at all (inert) is tried on order's.
			mine := append(publishes(user), consumedStreams(t, user)...)
			if inert[user] {
				mine = []string{"order"}
			}
			own := (events.Config{}).StreamName(mine[0])
			for _, api := range []string{
				"$JS.API.STREAM.UPDATE." + stream,
				"$JS.API.STREAM.CREATE." + stream,
				"$JS.API.STREAM.DELETE." + own,
				"$JS.API.STREAM.PURGE." + own,
				"$JS.API.STREAM.MSG.DELETE." + own,
				"$JS.API.CONSUMER.DELETE." + own + ".any",
				"$JS.API.STREAM.DELETE." + stream,
			} {
				if _, err := c.NC.Request(api, []byte(`{"seq":1}`), 500*time.Millisecond); err == nil {
					t.Errorf("%s: %s answered", user, api)
				}
				expectViolation(t, errs, api)
			}
			if got := streamMsgs(t, op.JS, own); got == 0 {
				t.Errorf("%s lost its messages", own)
			}

			// A push consumer on a stream the user may consume, delivering
			// to another service's subject: the server publishes the
			// deliveries itself, past the user's permissions, but only to
			// a subject someone subscribes to, and no user of the deploy
			// configuration may subscribe to an event subject.
			// (The server refuses a deliver subject inside the consumed
			// stream itself, so the target is one of another stream.)
			if inert[user] {
				// It may declare no consumer at all, push or pull.
				pctx, cancel := short()
				defer cancel()
				if _, err := c.JS.CreateOrUpdateConsumer(pctx, own, jetstream.ConsumerConfig{
					Durable: user + "-push", DeliverSubject: subject, AckPolicy: jetstream.AckNonePolicy,
				}); err == nil {
					t.Fatalf("%s, which consumes nothing, declared a consumer on %s", user, own)
				}
				return
			}
			consumed := (events.Config{}).StreamName(consumedStreams(t, user)[0])
			target := subject
			for _, s := range []string{events.PaymentSucceeded, events.OrderPaid} {
				if (events.Config{}).StreamName(target) != consumed {
					break
				}
				target = s
			}
			targetStream := (events.Config{}).StreamName(target)
			beforePush := streamMsgs(t, op.JS, targetStream)
			if _, err := c.JS.CreateOrUpdateConsumer(ctx, consumed, jetstream.ConsumerConfig{
				Durable: user + "-push", DeliverSubject: target, AckPolicy: jetstream.AckNonePolicy,
			}); err != nil {
				t.Fatalf("declare a push consumer: %v", err)
			}
			time.Sleep(500 * time.Millisecond)
			if after := streamMsgs(t, op.JS, targetStream); after != beforePush {
				t.Fatalf("a push consumer of %s on %s delivering to %s put %d messages into %s", user, consumed, target, after-beforePush, targetStream)
			}
		})
	}
}

// expectViolation waits for the server's permissions violation on subject.
func expectViolation(t *testing.T, errs chan error, subject string) {
	t.Helper()
	deadline := time.After(2 * time.Second)
	for {
		select {
		case err := <-errs:
			if errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), `"`+subject+`"`) {
				return
			}
		case <-deadline:
			t.Fatalf("no permissions violation reported for %s", subject)
		}
	}
}

// TestNATSConfigPermissionsFollowTheServices is the drift test of
// deploy/nats.conf: each user may publish exactly its service's event
// roots, may create and update exactly the streams its service's main.go
// declares, may consume every stream its consumers read (so a stream or a
// consumer added without its rights here fails now, not at a user's first
// `docker compose up`), subscribes only to replies, and JetStream syncs
// every write.
func TestNATSConfigPermissionsFollowTheServices(t *testing.T) {
	opts := loadNATSConfig(t)
	if !opts.SyncAlways {
		t.Error("deploy/nats.conf: jetstream.sync_interval is not always")
	}
	found := map[string]bool{}
	roots := map[string]bool{}
	for _, user := range users(t) {
		for _, root := range append(publishes(user), user) {
			roots[root] = true
		}
	}
	for _, u := range opts.Users {
		found[u.Username] = true
		if u.Username == admin {
			continue // the operator's user: every right, by design
		}
		if !slices.Contains(users(t), u.Username) {
			t.Errorf("deploy/nats.conf has a user %s that no service is", u.Username)
			continue
		}
		want := publishes(u.Username)
		if u.Permissions == nil || u.Permissions.Publish == nil || u.Permissions.Subscribe == nil {
			t.Errorf("user %s has no publish and subscribe permissions", u.Username)
			continue
		}
		allow := u.Permissions.Publish.Allow
		var events []string
		for _, s := range allow {
			if root, _, _ := strings.Cut(s, "."); roots[root] {
				events = append(events, s)
			}
		}
		var wantEvents []string
		for _, root := range want {
			wantEvents = append(wantEvents, root+".>")
		}
		if !slices.Equal(events, wantEvents) {
			t.Errorf("user %s may publish the events %v, want %v", u.Username, events, wantEvents)
		}
		var streamRights, wantStreamRights []string
		for _, s := range allow {
			if strings.HasPrefix(s, "$JS.API.STREAM.") {
				streamRights = append(streamRights, s)
			}
		}
		for _, root := range declaredStreams(t, u.Username) {
			s := strings.ToUpper(root)
			wantStreamRights = append(wantStreamRights, "$JS.API.STREAM.CREATE."+s, "$JS.API.STREAM.UPDATE."+s)
		}
		slices.Sort(streamRights)
		slices.Sort(wantStreamRights)
		if !slices.Equal(streamRights, wantStreamRights) {
			t.Errorf("user %s has the stream rights %v, want exactly %v (those of the streams its service declares)", u.Username, streamRights, wantStreamRights)
		}
		for _, root := range consumedStreams(t, u.Username) {
			s := strings.ToUpper(root)
			for _, need := range []string{
				"$JS.API.CONSUMER.CREATE." + s + ".>", "$JS.API.CONSUMER.MSG.NEXT." + s + ".*", "$JS.ACK." + s + ".>",
			} {
				if !slices.Contains(allow, need) {
					t.Errorf("user %s lacks %s, which its consumers of the %s stream need", u.Username, need, s)
				}
			}
		}
		if sub := u.Permissions.Subscribe.Allow; !slices.Equal(sub, []string{"_INBOX.>"}) {
			t.Errorf("user %s may subscribe to %v, want only _INBOX.> (see the push-consumer note in deploy/nats.conf)", u.Username, sub)
		}
	}
	for _, user := range users(t) {
		if !found[user] {
			t.Errorf("deploy/nats.conf has no user %s", user)
		}
	}
}

// TestComposePinsTheNATSTheTestsRun: the nats image of docker-compose.yml
// is the nats-server version scripts/go.mod pins, the one these tests run
// deploy/nats.conf on (NATS 2.9, the machine's, refuses sync_interval).
func TestComposePinsTheNATSTheTestsRun(t *testing.T) {
	root := composecheck.RepoRoot(t)
	mod, err := os.ReadFile(filepath.Join(root, "scripts", "go.mod"))
	testenv.Must(t, err)
	m := regexp.MustCompile(`github.com/nats-io/nats-server/v2 v(\d+\.\d+\.\d+)`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("scripts/go.mod does not require github.com/nats-io/nats-server/v2")
	}
	want := fmt.Sprintf("nats:%s", m[1])
	if got := composecheck.RepoCompose(t).Services["nats"].Image; got != want {
		t.Errorf("compose's nats image is %q, want %q: the version deploy/nats.conf is tested on", got, want)
	}
}
