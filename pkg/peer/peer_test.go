package peer_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/oncemall/oncemall/pkg/peer"
	"github.com/oncemall/oncemall/pkg/problem"
)

// TestPostSendsJSONWithTheTokenAndReadsTheAnswer: the body is the JSON of
// the value, the token its bearer, and the answer comes back with its
// status, headers and body, cut at MaxAnswer.
func TestPostSendsJSONWithTheTokenAndReadsTheAnswer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct{ N int }
		if r.Method != http.MethodPost || r.URL.Path != "/internal/x" || r.Header.Get("Authorization") != "Bearer tok" ||
			r.Header.Get("Content-Type") != "application/json" || json.NewDecoder(r.Body).Decode(&in) != nil || in.N != 7 {
			http.Error(w, "bad request", http.StatusTeapot)
			return
		}
		w.Header().Set("Content-Type", problem.ContentType)
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(strings.Repeat("a", peer.MaxAnswer+10)))
	}))
	defer srv.Close()
	a, err := peer.New(srv.URL+"/", "tok", srv.Client()).Post(context.Background(), "/internal/x", struct{ N int }{7})
	if err != nil || a.Status != http.StatusNotFound || !a.IsProblem() || len(a.Body) != peer.MaxAnswer || len(a.Excerpt()) > 260 {
		t.Fatalf("answer %d (problem %v), %d bytes, %v", a.Status, a.IsProblem(), len(a.Body), err)
	}
}

// TestGetWithoutATokenSendsNone, and a plain 404 is not the peer's problem
// document.
func TestGetWithoutATokenSendsNone(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.Header.Get("Authorization") != "" || r.Header.Get("Content-Type") != "" {
			w.WriteHeader(http.StatusTeapot)
			return
		}
		http.NotFound(w, r)
	}))
	a, err := peer.New(srv.URL, "", srv.Client()).Get(context.Background(), "/internal/y")
	if err != nil || a.Status != http.StatusNotFound || a.IsProblem() {
		t.Fatalf("answer %d (problem %v), %v; want a plain 404", a.Status, a.IsProblem(), err)
	}
	srv.Close()
	if _, err := peer.New(srv.URL, "", srv.Client()).Get(context.Background(), "/internal/y"); err == nil {
		t.Fatal("a call to a closed server returned an answer")
	}
}
