package apitest_test

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/oncemall/oncemall/pkg/testkit/apitest"
	"github.com/oncemall/oncemall/pkg/testkit/composecheck"
)

// exchange is one request and the answer a handler gives it.
type exchange struct {
	method, path, body string
	header             map[string]string
	status             int
	contentType        string
	answer             string
}

func (e exchange) check(s *apitest.Spec) error {
	req := httptest.NewRequest(e.method, e.path, strings.NewReader(e.body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range e.header {
		req.Header.Set(k, v)
	}
	h := http.Header{}
	if e.contentType != "" {
		h.Set("Content-Type", e.contentType)
	}
	return s.Check(req, []byte(e.body), e.status, h, []byte(e.answer))
}

// TestCheckCatchesEachKindOfDrift holds exchanges to testdata/pets.yaml:
// the ones the document allows pass, and each kind of drift is caught.
func TestCheckCatchesEachKindOfDrift(t *testing.T) {
	s, err := apitest.LoadFile("testdata/pets.yaml")
	if err != nil {
		t.Fatal(err)
	}
	user := map[string]string{"X-User-ID": "7"}
	admin := map[string]string{"Authorization": "Bearer x"}
	const pet, problem = "application/json; charset=utf-8", "application/problem+json"
	for _, tt := range []struct {
		name  string
		e     exchange
		drift bool
	}{
		{"documented", exchange{"GET", "/pets/1", "", user, 200, pet, `{"name":"rex"}`}, false},
		{"refused as documented", exchange{"GET", "/pets/1", "", nil, 400, problem, `{"status":400}`}, false},
		{"no content", exchange{"POST", "/pets", `{"name":"rex"}`, admin, 204, "", ""}, false},
		{"no token, refused", exchange{"POST", "/pets", `{}`, nil, 401, problem, `{}`}, false},
		{"undocumented path", exchange{"GET", "/cats/1", "", user, 200, pet, `{"name":"tom"}`}, true},
		{"undocumented method", exchange{"DELETE", "/pets/1", "", user, 204, "", ""}, true},
		{"undocumented and not served", exchange{"DELETE", "/pets/1", "", user, 405, problem, `{}`}, false},
		{"undocumented path, not served", exchange{"GET", "/cats/1", "", user, 404, problem, `{}`}, false},
		{"undocumented status", exchange{"GET", "/pets/1", "", user, 404, problem, `{"status":404}`}, true},
		{"wrong content type", exchange{"GET", "/pets/1", "", user, 200, "text/plain", `rex`}, true},
		{"undocumented field", exchange{"GET", "/pets/1", "", user, 200, pet, `{"name":"rex","age":3}`}, true},
		{"missing field", exchange{"GET", "/pets/1", "", user, 200, pet, `{}`}, true},
		{"error not a problem document", exchange{"GET", "/pets/1", "", nil, 400, pet, `{"status":400}`}, true},
		{"no X-User-ID, accepted", exchange{"GET", "/pets/1", "", nil, 200, pet, `{"name":"rex"}`}, true},
		{"no token, accepted", exchange{"POST", "/pets", `{}`, nil, 204, "", ""}, true},
		{"unknown request field, accepted", exchange{"POST", "/pets", `{"colour":"red"}`, admin, 204, "", ""}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.e.check(s)
			if tt.drift && err == nil {
				t.Fatal("drift not caught")
			}
			if !tt.drift && err != nil {
				t.Fatalf("documented exchange refused: %v", err)
			}
		})
	}
	got := s.Uncovered(map[string]string{"GET /dogs": "no such operation"})
	want := []string{
		"pets.yaml: the exception GET /dogs names no operation of the document",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("Uncovered after every operation ran:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestUncoveredNamesTheOperationsNeverExercised: an operation no exchange
// reached is reported unless excused, and an excuse for an exercised one is
// reported as stale.
func TestUncoveredNamesTheOperationsNeverExercised(t *testing.T) {
	s, err := apitest.LoadFile("testdata/pets.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := (exchange{"GET", "/pets/1", "", map[string]string{"X-User-ID": "7"}, 200, "application/json", `{"name":"rex"}`}).check(s); err != nil {
		t.Fatal(err)
	}
	got := s.Uncovered(nil)
	if len(got) != 1 || !strings.Contains(got[0], "POST /pets is never exercised") {
		t.Fatalf("Uncovered(nil) = %q", got)
	}
	if err := (exchange{"POST", "/pets", `{}`, nil, 401, "application/problem+json", `{}`}).check(s); err != nil {
		t.Fatal(err)
	}
	if got := s.OnlyRefused(); len(got) != 1 || got[0] != "POST /pets" {
		t.Fatalf("OnlyRefused = %q, want POST /pets", got)
	}
	got = s.Uncovered(map[string]string{"POST /pets": "tested elsewhere", "GET /pets/{id}": "tested elsewhere"})
	if len(got) != 2 || !strings.Contains(got[0], "GET /pets/{id} is exercised; drop its exception") {
		t.Fatalf("Uncovered with a stale exception = %q", got)
	}
}

// TestHandlerChecksWhatPassesThrough: the wrapped handler's answer reaches
// the client unchanged, and a drift fails the test that sent the request.
func TestHandlerChecksWhatPassesThrough(t *testing.T) {
	s, err := apitest.LoadFile("testdata/pets.yaml")
	if err != nil {
		t.Fatal(err)
	}
	drifting := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Extra", "kept")
		_, _ = w.Write([]byte(`{"name":"rex","age":3}`))
	})
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/pets/1", nil)
	req.Header.Set("X-User-ID", "7")
	ft := &fakeT{TB: t}
	s.Handler(ft, drifting).ServeHTTP(rec, req)
	if rec.Code != 200 || rec.Body.String() != `{"name":"rex","age":3}` || rec.Header().Get("X-Extra") != "kept" {
		t.Fatalf("answer changed on the way: %d %v %s", rec.Code, rec.Header(), rec.Body)
	}
	if len(ft.errors) != 1 || !strings.Contains(ft.errors[0], "age") {
		t.Fatalf("errors reported: %q, want one naming the undocumented field", ft.errors)
	}
}

// fakeT records the errors a Spec reports instead of failing the test.
type fakeT struct {
	testing.TB
	errors []string
}

func (f *fakeT) Error(args ...any) {
	for _, a := range args {
		if err, ok := a.(error); ok {
			f.errors = append(f.errors, err.Error())
		}
	}
}

func (f *fakeT) Errorf(format string, args ...any) { f.errors = append(f.errors, format) }

// TestEveryDocumentLoads: each document in docs/api is a valid OpenAPI
// document that the checker can route.
func TestEveryDocumentLoads(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join(composecheck.RepoRoot(t), "docs", "api", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatalf("no documents in docs/api")
	}
	for _, p := range paths {
		if _, err := apitest.LoadFile(p); err != nil {
			t.Error(err)
		}
	}
}

// TestClientChecksWhatItSends: a header set under a non-canonical key, as
// http.Header{"X-User-ID": …} does, is read as the server reads it.
func TestClientChecksWhatItSends(t *testing.T) {
	s, err := apitest.LoadFile("testdata/pets.yaml")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-User-ID") == "" {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"status":400}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"name":"rex"}`))
	}))
	defer srv.Close()
	ft := &fakeT{TB: t}
	req, err := http.NewRequest("GET", srv.URL+"/pets/1", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header = http.Header{"X-User-ID": {"7"}}
	resp, err := s.Client(ft).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(ft.errors) != 0 {
		t.Fatalf("%d, errors %q", resp.StatusCode, ft.errors)
	}
	req, _ = http.NewRequest("GET", srv.URL+"/pets/1", nil)
	resp, err = s.Client(ft).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || len(ft.errors) != 0 {
		t.Fatalf("without X-User-ID: %d, errors %q", resp.StatusCode, ft.errors)
	}
}

// TestCheckIsSafeForConcurrentUse: handler tests race goroutines through
// one Spec (run with -race to see it hold); every exchange is counted.
func TestCheckIsSafeForConcurrentUse(t *testing.T) {
	s, err := apitest.LoadFile("testdata/pets.yaml")
	if err != nil {
		t.Fatal(err)
	}
	pet := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"name":"rex"}`))
	})
	h := s.Handler(t, pet)
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			req := httptest.NewRequest("GET", "/pets/1", nil)
			req.Header.Set("X-User-ID", "7")
			h.ServeHTTP(httptest.NewRecorder(), req)
		})
	}
	wg.Wait()
	if got := s.Uncovered(map[string]string{"POST /pets": "not sent here"}); len(got) != 0 {
		t.Fatalf("Uncovered: %q", got)
	}
}
