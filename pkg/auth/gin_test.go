package auth_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/oncemall/oncemall/pkg/auth"
	"github.com/oncemall/oncemall/pkg/problem"
	"github.com/oncemall/oncemall/pkg/testkit/authtest"
)

// shop is a service behind the middleware over HTTP: GET /me answers the
// verified user id and the X-User-ID header the handler saw; POST /admin
// needs the operator role. served counts the requests a handler ran for.
type shop struct {
	url    string
	served atomic.Int64
}

func newShop(t *testing.T, v *auth.Verifier) *shop {
	t.Helper()
	gin.SetMode(gin.TestMode)
	s := &shop{}
	e := gin.New()
	authed := e.Group("/", v.Middleware(slog.New(slog.DiscardHandler)))
	authed.GET("/me", func(c *gin.Context) {
		s.served.Add(1)
		p, _ := auth.User(c)
		c.JSON(http.StatusOK, gin.H{"user_id": p.UserID, "header": c.GetHeader(auth.UserIDHeader)})
	})
	authed.POST("/admin", auth.RequireRole(auth.RoleOperator), func(c *gin.Context) {
		s.served.Add(1)
		c.Status(http.StatusNoContent)
	})
	// A route that forgot the middleware still refuses in RequireRole.
	e.POST("/unguarded", auth.RequireRole(auth.RoleOperator), func(c *gin.Context) { s.served.Add(1) })
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	s.url = srv.URL
	return s
}

func call(t *testing.T, method, url string, headers map[string]string) (*http.Response, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	out := map[string]any{}
	if len(body) > 0 {
		if err := json.Unmarshal(body, &out); err != nil {
			t.Fatalf("%s %s: %d %q is not JSON", method, url, resp.StatusCode, body)
		}
	}
	return resp, out
}

// TestMiddlewareRefusesWithoutAValidToken: a missing, forged, expired,
// other-audience token, or an X-User-ID header alone, is 401 problem+json
// with a Bearer challenge, and no handler runs.
func TestMiddlewareRefusesWithoutAValidToken(t *testing.T) {
	iss := authtest.New(t)
	s := newShop(t, newVerifier(t, iss, nil))
	for name, headers := range map[string]map[string]string{
		"nothing":            {},
		"X-User-ID only":     {auth.UserIDHeader: "7"},
		"basic credentials":  {"Authorization": "Basic YWxpY2U6cGFzcw=="},
		"empty bearer":       {"Authorization": "Bearer "},
		"forged":             {"Authorization": "Bearer " + iss.Forged(t, 7)},
		"expired":            {"Authorization": "Bearer " + iss.Expired(t, 7)},
		"other audience":     {"Authorization": "Bearer " + iss.ForAudience(t, "elsewhere", 7)},
		"alg none":           {"Authorization": "Bearer " + iss.Unsigned(t, 7)},
		"forged + X-User-ID": {"Authorization": "Bearer " + iss.Tampered(t, 7), auth.UserIDHeader: "7"},
	} {
		t.Run(name, func(t *testing.T) {
			resp, body := call(t, http.MethodGet, s.url+"/me", headers)
			if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("Content-Type") != problem.ContentType ||
				body["status"] != float64(401) || body["title"] != "Unauthorized" {
				t.Fatalf("%d %s %v, want 401 problem+json", resp.StatusCode, resp.Header.Get("Content-Type"), body)
			}
			if ch := resp.Header.Get("WWW-Authenticate"); !strings.HasPrefix(ch, `Bearer realm="oncemall"`) {
				t.Fatalf("WWW-Authenticate %q", ch)
			}
		})
	}
	if n := s.served.Load(); n != 0 {
		t.Fatalf("%d handlers ran for refused requests", n)
	}
}

// TestMiddlewarePassesTheVerifiedUser: the handler sees the token's user,
// and not the X-User-ID the client sent beside it; the scheme's case does
// not matter.
func TestMiddlewarePassesTheVerifiedUser(t *testing.T) {
	iss := authtest.New(t)
	s := newShop(t, newVerifier(t, iss, nil))
	resp, body := call(t, http.MethodGet, s.url+"/me", map[string]string{
		"Authorization": "bearer " + iss.Token(t, 42, auth.RoleCustomer), auth.UserIDHeader: "7"})
	if resp.StatusCode != http.StatusOK || body["user_id"] != float64(42) || body["header"] != "" {
		t.Fatalf("%d %v, want user 42 and no X-User-ID", resp.StatusCode, body)
	}
}

// TestRequireRole: an operator route is 403 for a customer's token, 401
// without one, and served for an operator's.
func TestRequireRole(t *testing.T) {
	iss := authtest.New(t)
	s := newShop(t, newVerifier(t, iss, nil))
	for _, c := range []struct {
		path   string
		token  string
		status int
	}{
		{"/admin", iss.Token(t, 7, auth.RoleCustomer), http.StatusForbidden},
		{"/admin", iss.Token(t, 7), http.StatusForbidden},
		{"/admin", "", http.StatusUnauthorized},
		{"/unguarded", iss.Token(t, 1, auth.RoleOperator), http.StatusUnauthorized},
		{"/admin", iss.Token(t, 1, auth.RoleOperator), http.StatusNoContent},
	} {
		headers := map[string]string{}
		if c.token != "" {
			headers["Authorization"] = "Bearer " + c.token
		}
		resp, body := call(t, http.MethodPost, s.url+c.path, headers)
		if resp.StatusCode != c.status {
			t.Fatalf("POST %s: %d %v, want %d", c.path, resp.StatusCode, body, c.status)
		}
		if c.status != http.StatusNoContent && (resp.Header.Get("Content-Type") != problem.ContentType || body["status"] != float64(c.status)) {
			t.Fatalf("POST %s: %s %v, want problem+json", c.path, resp.Header.Get("Content-Type"), body)
		}
	}
	if n := s.served.Load(); n != 1 {
		t.Fatalf("%d handlers ran, want 1 (the operator's)", n)
	}
}

// TestMiddlewareIssuerDown: a token that cannot be checked is 503 with
// Retry-After, not 401: the caller's token may be good.
func TestMiddlewareIssuerDown(t *testing.T) {
	iss := authtest.New(t)
	s := newShop(t, newVerifier(t, iss, nil))
	iss.SetDown(true)
	resp, body := call(t, http.MethodGet, s.url+"/me", map[string]string{"Authorization": "Bearer " + iss.Token(t, 7)})
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || body["status"] != float64(503) {
		t.Fatalf("%d %v, want 503 with Retry-After", resp.StatusCode, body)
	}
	if s.served.Load() != 0 {
		t.Fatal("a handler ran without a verified token")
	}
}

// TestOperator: an operator route serves an operator's token and the
// machine credential; a customer's token is 403; a forged or expired token
// is 401 even though a machine credential check would not have seen it,
// and so is a wrong machine credential. Only the allowed requests ran.
func TestOperator(t *testing.T) {
	iss := authtest.New(t)
	v := newVerifier(t, iss, nil)
	gin.SetMode(gin.TestMode)
	var served atomic.Int64
	machine := func(c *gin.Context) {
		if c.GetHeader("Authorization") != "Bearer machine-secret" {
			problem.Abort(c, http.StatusUnauthorized, "admin token missing or wrong")
			return
		}
		c.Next()
	}
	e := gin.New()
	e.POST("/admin", v.Operator(slog.New(slog.DiscardHandler), machine), func(c *gin.Context) {
		served.Add(1)
		c.Status(http.StatusNoContent)
	})
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	for _, c := range []struct {
		name   string
		bearer string
		status int
	}{
		{"operator token", iss.Token(t, 1, auth.RoleOperator), http.StatusNoContent},
		{"machine credential", "machine-secret", http.StatusNoContent},
		{"customer token", iss.Token(t, 42, auth.RoleCustomer), http.StatusForbidden},
		{"forged operator token", iss.Forged(t, 1, auth.RoleOperator), http.StatusUnauthorized},
		{"expired operator token", iss.Expired(t, 1, auth.RoleOperator), http.StatusUnauthorized},
		{"wrong machine credential", "guess", http.StatusUnauthorized},
		{"nothing", "", http.StatusUnauthorized},
	} {
		headers := map[string]string{}
		if c.bearer != "" {
			headers["Authorization"] = "Bearer " + c.bearer
		}
		resp, body := call(t, http.MethodPost, srv.URL+"/admin", headers)
		if resp.StatusCode != c.status {
			t.Fatalf("%s: %d %v, want %d", c.name, resp.StatusCode, body, c.status)
		}
		if c.status != http.StatusNoContent && resp.Header.Get("Content-Type") != problem.ContentType {
			t.Fatalf("%s: %s, want problem+json", c.name, resp.Header.Get("Content-Type"))
		}
	}
	if n := served.Load(); n != 2 {
		t.Fatalf("%d requests served, want 2 (the operator's and the machine's)", n)
	}
}
