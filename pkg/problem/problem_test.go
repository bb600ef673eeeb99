package problem_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/oncemall/oncemall/pkg/problem"
)

func TestWriteFlattensExtensionsAndAborts(t *testing.T) {
	gin.SetMode(gin.TestMode)
	e := gin.New()
	reached := false
	e.GET("/x", func(c *gin.Context) {
		base := problem.New(http.StatusConflict, "already paid")
		problem.Write(c, base.With("order_no", "A1").With("title", "ignored"))
		if len(base.Extensions) != 0 {
			t.Error("With modified the original problem")
		}
	}, func(*gin.Context) { reached = true })
	w := httptest.NewRecorder()
	e.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/x", nil))
	if w.Code != http.StatusConflict || w.Header().Get("Content-Type") != problem.ContentType {
		t.Fatalf("status %d content type %q", w.Code, w.Header().Get("Content-Type"))
	}
	if reached {
		t.Fatal("the chain continued after Write")
	}
	var got map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"title": "Conflict", "status": float64(409), "detail": "already paid", "instance": "/x", "order_no": "A1"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
}
