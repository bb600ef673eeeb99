// Package apitest holds handler tests to the OpenAPI documents in docs/api:
// every request a test sends through Spec.Handler (or Spec.Client) and the
// answer it gets are checked against the document, so a handler and its
// document cannot drift apart without a test failing.
//
// The rules a Spec checks, for each exchange:
//
//   - the route is in the document: an undocumented path or method fails,
//     unless the handler agrees that it does not exist (404 or 405: a test
//     that checks a route is gone);
//   - the answer's status is one the operation lists, with the listed
//     Content-Type, headers and body schema;
//   - a request the document accepts is judged by the answer alone; a request
//     the document refuses (no X-User-ID, an unknown field, no bearer token)
//     must be refused too, with a documented 4xx: a handler that accepts it
//     has drifted from the document.
//
// Main adds the last check, after a package's tests: every operation of the
// document was exercised at least once, or is listed as an exception with
// its reason. docs/api/README.md tells the story.
package apitest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/oncemall/oncemall/pkg/testkit/composecheck"
)

// Spec is one OpenAPI document, loaded and validated once, with the
// operations the tests have exercised so far. It is safe for concurrent use.
type Spec struct {
	name   string
	doc    *openapi3.T
	router routers.Router

	mu  sync.Mutex
	hit map[string]int // by operation key, "GET /orders/{no}"
	ok  map[string]int // the exchanges of hit answered 2xx
}

// Load reads docs/api/<name> from the repository around the working
// directory, checks that it is a valid OpenAPI document and prepares its
// router.
func Load(name string) (*Spec, error) {
	root, err := composecheck.Root()
	if err != nil {
		return nil, err
	}
	return LoadFile(filepath.Join(root, "docs", "api", name))
}

// LoadFile is Load for a document at any path.
func LoadFile(path string) (*Spec, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile(path)
	if err != nil {
		return nil, fmt.Errorf("apitest: load %s: %w", path, err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		return nil, fmt.Errorf("apitest: %s is not a valid OpenAPI document: %w", path, err)
	}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("apitest: route %s: %w", path, err)
	}
	return &Spec{name: filepath.Base(path), doc: doc, router: router, hit: map[string]int{}, ok: map[string]int{}}, nil
}

// MustLoad is Load for a package-level variable: it panics when the
// document cannot be loaded, which fails the package's tests at once.
func MustLoad(name string) *Spec {
	s, err := Load(name)
	if err != nil {
		panic(err)
	}
	return s
}

// Operations returns the key of every operation in the document,
// "METHOD /path" as the document spells the path, sorted.
func (s *Spec) Operations() []string {
	var out []string
	for path, item := range s.doc.Paths.Map() {
		for method := range item.Operations() {
			out = append(out, method+" "+path)
		}
	}
	slices.Sort(out)
	return out
}

// Handler returns h with every exchange checked against the document; a
// mismatch fails t (t.Error, so h may run on any goroutine).
func (s *Spec) Handler(t testing.TB, h http.Handler) http.Handler {
	return checked{spec: s, t: t, next: h}
}

type checked struct {
	spec *Spec
	t    testing.TB
	next http.Handler
}

// ServeHTTP is a test helper, so that a mismatch is reported at the line of
// the test (or of its helper) that sent the request.
func (c checked) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.t.Helper()
	body, err := readAll(&r.Body)
	if err != nil {
		c.t.Errorf("apitest: read the request body of %s %s: %v", r.Method, r.URL.Path, err)
	}
	rec := &recorder{ResponseWriter: w}
	c.next.ServeHTTP(rec, r)
	if err := c.spec.Check(r, body, rec.code(), rec.header, rec.body.Bytes()); err != nil {
		c.t.Error(err)
	}
}

// Client returns an HTTP client whose exchanges are checked against the
// document, for tests that call a real server.
func (s *Spec) Client(t testing.TB) *http.Client {
	return &http.Client{Transport: transport{spec: s, t: t, next: http.DefaultTransport}}
}

type transport struct {
	spec *Spec
	t    testing.TB
	next http.RoundTripper
}

func (tr transport) RoundTrip(r *http.Request) (*http.Response, error) {
	// A RoundTripper must not change the caller's request: the body is read
	// from a clone, which is sent.
	r = r.Clone(r.Context())
	body, err := readAll(&r.Body)
	if err != nil {
		return nil, err
	}
	resp, err := tr.next.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	respBody, err := readAll(&resp.Body)
	if err != nil {
		return nil, err
	}
	if err := tr.spec.Check(r, body, resp.StatusCode, resp.Header, respBody); err != nil {
		tr.t.Error(err)
	}
	return resp, nil
}

// readAll reads *body and puts an unread copy back.
func readAll(body *io.ReadCloser) ([]byte, error) {
	if *body == nil || *body == http.NoBody {
		return nil, nil
	}
	b, err := io.ReadAll(*body)
	_ = (*body).Close()
	*body = io.NopCloser(bytes.NewReader(b))
	return b, err
}

// Check holds one exchange to the document: the request r with its body,
// and the answer's status, headers and body. It records the operation as
// exercised, and returns what does not match.
func (s *Spec) Check(r *http.Request, reqBody []byte, status int, header http.Header, body []byte) error {
	what := fmt.Sprintf("%s: %s %s answered %d", s.name, r.Method, r.URL.RequestURI(), status)
	req := r.Clone(context.Background())
	req.Body = io.NopCloser(bytes.NewReader(reqBody))
	// A client may set a header under a key Go would not write
	// (http.Header{"X-User-ID": …}); the server reads it canonical, and so
	// does the check.
	req.Header = http.Header{}
	for k, vs := range r.Header {
		req.Header[http.CanonicalHeaderKey(k)] = append(req.Header[http.CanonicalHeaderKey(k)], vs...)
	}
	route, params, err := s.router.FindRoute(req)
	if err != nil {
		if status == http.StatusNotFound || status == http.StatusMethodNotAllowed {
			return nil // not documented, and not served either
		}
		return fmt.Errorf("%s: the route is not documented: %v", what, err)
	}
	s.mu.Lock()
	s.hit[route.Method+" "+route.Path]++
	if status/100 == 2 {
		s.ok[route.Method+" "+route.Path]++
	}
	s.mu.Unlock()

	opts := &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true, AuthenticationFunc: bearer}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: opts}
	reqErr := openapi3filter.ValidateRequest(context.Background(), in)
	if reqErr != nil && (status < 400 || status >= 500) {
		return fmt.Errorf("%s, but the document refuses the request: %v", what, reqErr)
	}
	err = openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: status, Header: header, Body: io.NopCloser(bytes.NewReader(body)), Options: opts,
	})
	if err != nil {
		return fmt.Errorf("%s, which the document does not allow: %v\nbody: %.500s", what, err, body)
	}
	return nil
}

// bearer is the documents' security check: a bearer scheme needs an
// "Authorization: Bearer <token>" header. Which token is right is the
// handler's business, and a 401 is a documented answer.
func bearer(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	sc := in.SecurityScheme
	if sc.Type != "http" || !strings.EqualFold(sc.Scheme, "bearer") {
		return fmt.Errorf("apitest: security scheme %s (%s %s) is not supported", in.SecuritySchemeName, sc.Type, sc.Scheme)
	}
	auth := in.RequestValidationInput.Request.Header.Get("Authorization")
	if token, ok := strings.CutPrefix(auth, "Bearer "); !ok || token == "" {
		return errors.New("no bearer token")
	}
	return nil
}

// recorder passes an answer through and keeps a copy of it.
type recorder struct {
	http.ResponseWriter
	status int
	header http.Header // as it was when the status was written
	body   bytes.Buffer
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
		r.header = r.ResponseWriter.Header().Clone()
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
	r.body.Write(b)
	return r.ResponseWriter.Write(b)
}

// code is the status the handler answered with: 200 when it wrote nothing.
func (r *recorder) code() int {
	if r.status == 0 {
		r.header = r.ResponseWriter.Header().Clone()
		return http.StatusOK
	}
	return r.status
}

// Flush passes a flush on, so a streaming handler still streams.
func (r *recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the real writer.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
