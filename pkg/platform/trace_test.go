package platform_test

import (
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/httpserver"
	"github.com/oncemall/oncemall/pkg/testkit/spantest"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

// postThing makes the toy service write thing id and its event, with a
// request id of the test's choosing.
func postThing(t *testing.T, base, id, requestID string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/things/"+id, nil)
	testenv.Must(t, err)
	req.Header.Set(httpserver.RequestIDHeader, requestID)
	resp, err := http.DefaultClient.Do(req)
	testenv.Must(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /things/%s = %d", id, resp.StatusCode)
	}
}

// TestRunTracesARequestToItsConsumer: a service that declares nothing about
// tracing, run with TRACING_EXPORTER=otlp, exports one trace from the
// request through the outbox row and the relay's publish to its consumer,
// and a span per job pass; the spans still buffered when it stops are
// flushed by the shutdown, which runs the tracing down last.
func TestRunTracesARequestToItsConsumer(t *testing.T) {
	base, db := toyEnv(t)
	recv := spantest.NewReceiver(t)
	t.Setenv("TRACING_EXPORTER", "otlp")
	t.Setenv("TRACING_OTLP_ENDPOINT", recv.URL)
	subject := os.Getenv("EVENT_SUBJECT_PREFIX") + "thing.made"
	ticks := make(chan struct{}, 1)
	stop := start(t, toy(ticks), base)

	postThing(t, base, "7", "req-toy-7")
	testenv.WaitFor(t, 15*time.Second, "the consumer to see the event", func() bool {
		return count(t, db, "SELECT COUNT(*) FROM seen") == 1
	})
	select {
	case <-ticks:
	case <-time.After(5 * time.Second):
		t.Fatal("the declared job never ran")
	}
	stop()

	spans := recv.Spans(t)
	request := spantest.Find(t, spans, "POST /things/:id")
	publish := spantest.Find(t, spans, "publish "+subject)
	process := spantest.Find(t, spans, "process "+subject)
	spantest.ChildOf(t, publish, request)
	spantest.ChildOf(t, process, publish)
	if request.Parent != "" || request.Service != "toy" || request.Attrs["request_id"] != "req-toy-7" {
		t.Fatalf("request span %s of service %q, want a root span of toy with request_id req-toy-7", request, request.Service)
	}
	if process.Attrs["request_id"] != "req-toy-7" || process.Attrs["consumer"] != "toy-thing-made" || process.Attrs["duplicate"] != "false" {
		t.Fatalf("consumer span %s, want the request id, the consumer and duplicate=false", process)
	}
	jobs := spantest.Named(spans, "job toy-tick")
	if len(jobs) == 0 || jobs[0].Parent != "" || jobs[0].Attrs["outcome"] != "ok" {
		t.Fatalf("job spans %v, want root spans with outcome ok", jobs)
	}
	if polls := spantest.Named(spans, "job outbox-poll"); len(polls) != 0 {
		t.Fatalf("%d spans of the relay's safety-net poll, want none (one a second would bury the rest)", len(polls))
	}
}

// TestRunWithTracingOffRecordsNothing: by default (TRACING_EXPORTER=none)
// nothing is exported, even with an endpoint set, and the outbox row holds
// no trace.
func TestRunWithTracingOffRecordsNothing(t *testing.T) {
	base, db := toyEnv(t)
	recv := spantest.NewReceiver(t)
	t.Setenv("TRACING_OTLP_ENDPOINT", recv.URL)
	stop := start(t, toy(nil), base)

	req, err := http.NewRequest(http.MethodPost, base+"/things/8", nil)
	testenv.Must(t, err)
	req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	resp, err := http.DefaultClient.Do(req)
	testenv.Must(t, err)
	resp.Body.Close()
	testenv.WaitFor(t, 15*time.Second, "the consumer to see the event", func() bool {
		return count(t, db, "SELECT COUNT(*) FROM seen") == 1
	})
	stop()

	if spans := recv.Spans(t); len(spans) != 0 {
		t.Fatalf("tracing off exported spans:\n%s", spantest.List(spans))
	}
	if n := count(t, db, "SELECT COUNT(*) FROM local_message WHERE headers IS NOT NULL"); n != 0 {
		t.Fatalf("%d outbox rows hold headers with tracing off, want none", n)
	}
}
