package testenv

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// Send sends a request to url with body (as application/json when it is
// not empty) and each header whose value is not empty, and returns the
// answer's status, Content-Type and body. A request that cannot be sent
// fails t.
func Send(t testing.TB, method, url string, headers map[string]string, body string) (status int, contentType, answer string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	Must(t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	Must(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	Must(t, err)
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}
