package outbox

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

// TestSenderDropsWhatWaitedPastTheHandoff: a message that waited in Send's
// queue until the poll may claim its row (the hand-off less the publish
// timeout) is not published by Send: it is skipped as late, so that a
// backlog is not published twice.
func TestSenderDropsWhatWaitedPastTheHandoff(t *testing.T) {
	nc := testenv.NATS(t)
	r, err := NewRelay(testenv.DB(t, Migrations), nc.JS, Config{}, testenv.Logger(t), nil)
	testenv.Must(t, err)
	r.queue <- queued{Message{ID: "waited-too-long", Subject: "nowhere.x"}, time.Now().Add(-r.cfg.Handoff + r.cfg.PublishTimeout - time.Second)}
	ctx, cancel := context.WithCancel(context.Background())
	acked := make(chan []string, 1)
	done := make(chan struct{})
	go func() { defer close(done); r.sender(ctx, acked) }()
	testenv.WaitFor(t, 5*time.Second, "the sender to take the message", func() bool { return len(r.queue) == 0 })
	cancel()
	<-done
	if late := testutil.ToFloat64(r.m.eagerSkipped.WithLabelValues(skipLate)); late != 1 {
		t.Fatalf("skipped as late: %v, want 1", late)
	}
	if p, f := testutil.ToFloat64(r.m.eagerPublished), testutil.ToFloat64(r.m.eagerFailed); p != 0 || f != 0 || len(acked) != 0 {
		t.Fatalf("a late message was published: %v published, %v failed, %d acked batches", p, f, len(acked))
	}
}
