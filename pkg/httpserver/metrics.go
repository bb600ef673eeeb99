package httpserver

import (
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	pkgmetrics "github.com/oncemall/oncemall/pkg/metrics"
)

type metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// newMetrics declares the request metrics on reg; servers built on one
// registry share them.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	s := pkgmetrics.NewSet(reg)
	m := &metrics{
		requests: s.Counters("http_requests_total", "HTTP requests served, by method, route and status code.",
			"method", "route", "status"),
		duration: s.Histograms("http_request_duration_seconds", "HTTP request latency, by method and route.",
			[]float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}, "method", "route"),
	}
	return m, s.Err()
}

func (m *metrics) middleware() gin.HandlerFunc {
	return func(c *gin.Context) {
		start := time.Now()
		c.Next()
		route := c.FullPath()
		if route == "" {
			route = "unmatched" // keeps label cardinality bounded for 404 scans
		}
		m.requests.WithLabelValues(c.Request.Method, route, strconv.Itoa(c.Writer.Status())).Inc()
		m.duration.WithLabelValues(c.Request.Method, route).Observe(time.Since(start).Seconds())
	}
}
