package svctest_test

import (
	"io"
	"net/http"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/oncemall/oncemall/pkg/platform"
	"github.com/oncemall/oncemall/pkg/testkit/svctest"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

type pingConfig struct {
	platform.Config
	Answer string `env:"PING_ANSWER" default:"pong" usage:"what GET /ping answers"`
}

// TestStartServesWhatTheAssemblyDeclared: the service runs on the test's own
// database and address, with the variables the test set, and the assembly's
// result comes back to the test.
func TestStartServesWhatTheAssemblyDeclared(t *testing.T) {
	svc := platform.Service[pingConfig]{Name: "ping", Port: 18098}
	cfg := svctest.Config(t, svc, map[string]string{"PING_ANSWER": "here"})
	assembled, base := svctest.Start(t, svc, cfg, func(w *platform.Wiring, cfg pingConfig) (string, error) {
		w.Routes(func(r gin.IRouter) { r.GET("/ping", func(c *gin.Context) { c.String(http.StatusOK, cfg.Answer) }) })
		return "assembled on " + cfg.Database, nil
	})
	if assembled != "assembled on "+cfg.Database {
		t.Fatalf("the assembly returned %q", assembled)
	}
	resp, err := http.Get(base + "/ping")
	testenv.Must(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || string(b) != "here" {
		t.Fatalf("GET /ping: %d %q, want 200 here", resp.StatusCode, b)
	}
}
