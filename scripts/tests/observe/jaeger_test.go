package observe_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/testkit/composecheck"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
	"github.com/oncemall/oncemall/scripts/tests/proctest"
)

// jaeger is a Jaeger started by the test on free loopback ports, with the
// repository's local configuration (deploy/jaeger/local.yml).
type jaeger struct {
	// OTLP is the base URL of its OTLP/HTTP receiver: TRACING_OTLP_ENDPOINT.
	OTLP string
	// Query is the base URL of its query API and UI.
	Query string
}

// jaegerBin is the binary `make tools` links into .tools/bin, or JAEGER_BIN.
// The test does not skip without it: it fails and says how to get it.
func jaegerBin(t *testing.T, root string) string {
	t.Helper()
	bin := os.Getenv("JAEGER_BIN")
	if bin == "" {
		bin = filepath.Join(root, ".tools", "bin", "jaeger")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("no Jaeger binary at %s (%v): run `make tools`, which builds the pinned Jaeger once per machine", bin, err)
	}
	return bin
}

// startJaeger starts Jaeger and waits until its query API answers; it is
// stopped when the test ends, and its log printed if the test failed.
func startJaeger(t *testing.T) *jaeger {
	t.Helper()
	root := composecheck.RepoRoot(t)
	otlp, query, grpc := testenv.FreeAddr(t), testenv.FreeAddr(t), testenv.FreeAddr(t)
	cmd := exec.Command(jaegerBin(t, root), "--config", filepath.Join(root, "deploy", "jaeger", "local.yml"))
	cmd.Env = append(os.Environ(), "JAEGER_OTLP_HTTP_ADDR="+otlp, "JAEGER_QUERY_ADDR="+query, "JAEGER_QUERY_GRPC_ADDR="+grpc)
	run := proctest.Tool(t, "jaeger", cmd, 10*time.Second)
	j := &jaeger{OTLP: "http://" + otlp, Query: "http://" + query}
	deadline := time.Now().Add(flowDeadline)
	for {
		if exited, err := run.Exited(); exited {
			t.Fatalf("jaeger exited at start-up: %v\n%s", err, run.Output())
		}
		var services struct{ Data []string }
		if err := j.get("/api/services", &services); err == nil {
			return j
		} else if time.Now().After(deadline) {
			t.Fatalf("jaeger's query API did not answer within %s: %v", flowDeadline, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// get decodes the JSON answer of GET path into out; numbers stay as
// written (json.Number), so a tag value prints as Jaeger stored it.
func (j *jaeger) get(path string, out any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, j.Query+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	dec := json.NewDecoder(resp.Body)
	dec.UseNumber()
	return dec.Decode(out)
}

// The parts of Jaeger's query API answers the test reads.
type apiTraces struct {
	Data []apiTrace `json:"data"`
}

type apiTrace struct {
	TraceID   string                `json:"traceID"`
	Spans     []apiSpan             `json:"spans"`
	Processes map[string]apiProcess `json:"processes"`
}

type apiSpan struct {
	TraceID       string   `json:"traceID"`
	SpanID        string   `json:"spanID"`
	OperationName string   `json:"operationName"`
	References    []apiRef `json:"references"`
	Tags          []apiTag `json:"tags"`
	ProcessID     string   `json:"processID"`
}

type apiRef struct {
	RefType string `json:"refType"`
	TraceID string `json:"traceID"`
	SpanID  string `json:"spanID"`
}

type apiTag struct {
	Key   string `json:"key"`
	Value any    `json:"value"`
}

type apiProcess struct {
	ServiceName string `json:"serviceName"`
}

// span is one span of a trace as the test checks it.
type span struct {
	Service, Name, ID, Parent string
	Tags                      map[string]string
}

func (s span) String() string {
	return fmt.Sprintf("%s %q span=%s parent=%s %v", s.Service, s.Name, s.ID, s.Parent, s.Tags)
}

// spans flattens a trace: each span with its service, its CHILD_OF parent
// and its tags as strings.
func (tr apiTrace) spans() []span {
	out := make([]span, 0, len(tr.Spans))
	for _, s := range tr.Spans {
		sp := span{Service: tr.Processes[s.ProcessID].ServiceName, Name: s.OperationName, ID: s.SpanID, Tags: map[string]string{}}
		for _, r := range s.References {
			if r.RefType == "CHILD_OF" {
				sp.Parent = r.SpanID
			}
		}
		for _, tag := range s.Tags {
			sp.Tags[tag.Key] = fmt.Sprint(tag.Value)
		}
		out = append(out, sp)
	}
	return out
}

// trace returns the trace id's spans, or none while Jaeger has none.
func (j *jaeger) trace(id string) ([]span, error) {
	var got apiTraces
	if err := j.get("/api/traces/"+id, &got); err != nil {
		if strings.Contains(err.Error(), "404") {
			return nil, nil
		}
		return nil, err
	}
	if len(got.Data) != 1 {
		return nil, fmt.Errorf("GET /api/traces/%s: %d traces", id, len(got.Data))
	}
	return got.Data[0].spans(), nil
}

// search returns the ids of the traces Jaeger finds for service in the last
// hour: what a search in the UI by service lists.
func (j *jaeger) search(service string) ([]string, error) {
	var got apiTraces
	q := url.Values{"service": {service}, "lookback": {"1h"}, "limit": {"100"}}
	if err := j.get("/api/traces?"+q.Encode(), &got); err != nil {
		return nil, err
	}
	ids := make([]string, len(got.Data))
	for i, tr := range got.Data {
		ids[i] = tr.TraceID
	}
	return ids, nil
}
