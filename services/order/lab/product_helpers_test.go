package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/problem"
	"github.com/oncemall/oncemall/pkg/variant"
)

// startRig starts a catalog rig for the test, closed at its end.
func startRig(t *testing.T, mode variant.Mode, workers, chunk int) *ProductRig {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rig, err := StartProductRig(ctx, labEnv(t), "p", ProductRigConfig{Mode: mode, Workers: workers, ChunkSize: chunk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rig.Close)
	return rig
}

// call sends a request with a raw body, as the operator (AdminToken), and
// decodes a JSON answer.
func call(t *testing.T, method, url, body string) (int, map[string]any) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+AdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 400 && resp.Header.Get("Content-Type") != problem.ContentType {
		t.Errorf("%s %s: %d answered with Content-Type %q, want %s", method, url, resp.StatusCode, resp.Header.Get("Content-Type"), problem.ContentType)
	}
	out := map[string]any{}
	if len(bytes.TrimSpace(b)) > 0 {
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatalf("%s %s: %d, body %q is not JSON: %v", method, url, resp.StatusCode, b, err)
		}
	}
	return resp.StatusCode, out
}

// count runs a COUNT(*) query on the rig's database.
func count(t *testing.T, rig *ProductRig, q string, args ...any) int {
	t.Helper()
	var n int
	if err := rig.DB.Raw(q, args...).Scan(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

func jsonBody(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func num(v any) uint64 {
	f, _ := v.(float64)
	return uint64(f)
}
