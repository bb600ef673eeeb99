package platform_test

import (
	"context"
	"net/http"
	"os"
	"slices"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/oncemall/oncemall/pkg/inbox"
	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

// TestBuildWireServe: what Run does, done by hand as a test that assembles
// a service with its own substitutions does it. Build opens the runtime with
// nothing declared, Declared lists what the assembly declared (routes,
// consumers, jobs) without mounting anything, and Serve runs exactly that.
func TestBuildWireServe(t *testing.T) {
	base, _ := toyEnv(t)
	svc := toy(make(chan struct{}, 1))
	cfg, err := svc.Load(os.LookupEnv)
	testenv.Must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	w, err := platform.Build(ctx, svc, cfg, testenv.Logger(t))
	testenv.Must(t, err)
	if d := w.Declared(); len(d.Routes)+len(d.Consumers)+len(d.Jobs) != 0 {
		t.Fatalf("a fresh wiring declares %+v, want nothing", d)
	}
	testenv.Must(t, svc.Wire(w, cfg))
	d := w.Declared()
	if !slices.Contains(d.Routes, "GET /hello") || !slices.Contains(d.Routes, "POST /things/:id") ||
		!slices.Equal(d.Consumers, []string{"toy-thing-made thing.made"}) || !slices.Equal(d.Jobs, []string{"toy-tick @every 1s"}) {
		t.Fatalf("declared %+v", d)
	}
	done := make(chan error, 1)
	go func() { done <- w.Serve(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	testenv.WaitFor(t, 30*time.Second, "the built service to answer", func() bool {
		resp, err := http.Get(base + "/hello")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// TestBindHandsTheHandlerItsOwnTransaction: a ConsumerOf's handler gets the
// view its store makes of the inbox's transaction, and the message.
func TestBindHandsTheHandlerItsOwnTransaction(t *testing.T) {
	type view struct{ tx *gorm.DB }
	var got view
	var gotID string
	c := platform.Bind(func(_ context.Context, tx *gorm.DB) view { return view{tx} }, platform.ConsumerOf[view]{
		Name: "n", Subject: "s.x",
		Handle: func(_ context.Context, v view, msg inbox.Message) error { got, gotID = v, msg.ID; return nil },
	})
	tx := &gorm.DB{}
	testenv.Must(t, c.Handle(context.Background(), tx, inbox.Message{ID: "m1"}))
	if c.Name != "n" || c.Subject != "s.x" || got.tx != tx || gotID != "m1" {
		t.Fatalf("bound consumer %+v handed %+v and %q", c, got, gotID)
	}
}
