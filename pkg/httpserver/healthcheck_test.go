package httpserver_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/oncemall/oncemall/pkg/httpserver"
)

// TestHealthcheck: the container healthcheck command passes on a 2xx
// answer only; a 503 /readyz, a closed port, a bad URL and a missing
// argument each fail, naming what went wrong.
func TestHealthcheck(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/readyz" {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"mysql":"down"}`))
			return
		}
		_, _ = w.Write([]byte("ok"))
	}))
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String() + "/readyz"
	ln.Close()

	if err := httpserver.Healthcheck(context.Background(), []string{srv.URL + "/healthz"}); err != nil {
		t.Errorf("200: %v", err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{srv.URL + "/readyz"}, "503"},
		{[]string{closed}, "refused"},
		{[]string{"127.0.0.1:8081/readyz"}, "not an http URL"},
		{nil, "usage"},
		{[]string{srv.URL, srv.URL}, "usage"},
	} {
		err := httpserver.Healthcheck(context.Background(), c.args)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("healthcheck %q: %v, want an error with %q", c.args, err, c.want)
		}
	}
}
