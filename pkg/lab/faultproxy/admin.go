package faultproxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/oncemall/oncemall/pkg/httpserver"
	"github.com/oncemall/oncemall/pkg/problem"
)

// maxArm bounds one arming, so a typo cannot leave the proxy dropping
// acknowledgements for the rest of the day.
const maxArm = 1000

// ArmRequest is the body of POST /arm.
type ArmRequest struct {
	// DropCommitAcks is how many upcoming COMMITs lose their acknowledgement
	// (1 to 1000). It replaces any earlier arming.
	DropCommitAcks *int `json:"drop_commit_acks"`
	// Match, when set, restricts the drops to COMMITs of transactions that
	// sent a statement containing this text (a table name, say). See
	// Proxy.ArmMatching.
	Match string `json:"match,omitempty"`
}

// CutRequest is the body of POST /cut.
type CutRequest struct {
	// Mode is the outage: "refuse" (the default) or "blackhole". See
	// Proxy.Cut.
	Mode Outage `json:"mode,omitempty"`
}

// NewAdminServer returns the admin HTTP server on cfg.AdminAddr: the standard
// /healthz, /readyz (the upstream server accepts TCP connections) and
// /metrics, and the token-guarded POST /arm, POST /disarm, POST /cut,
// POST /heal and GET /stats.
func NewAdminServer(cfg Config, p *Proxy, log *slog.Logger, reg *prometheus.Registry) (*httpserver.Server, error) {
	srv, err := httpserver.New(httpserver.Options{
		Addr:     cfg.AdminAddr,
		Config:   cfg.HTTP,
		Logger:   log,
		Registry: reg,
		Checks: map[string]httpserver.Check{
			"upstream": func(ctx context.Context) error {
				var d net.Dialer
				c, err := d.DialContext(ctx, "tcp", cfg.Upstream)
				if err != nil {
					return err
				}
				return c.Close()
			},
		},
	})
	if err != nil {
		return nil, err
	}
	p.AdminRoutes(srv.Engine(), cfg.AdminToken)
	return srv, nil
}

// AdminRoutes installs POST /arm, POST /disarm, POST /cut, POST /heal and
// GET /stats on r, behind the bearer token.
func (p *Proxy) AdminRoutes(r gin.IRouter, token string) {
	g := r.Group("", httpserver.AdminAuth(token))
	g.POST("/arm", p.handleArm)
	g.POST("/disarm", func(c *gin.Context) {
		p.Disarm()
		c.JSON(http.StatusOK, p.Stats())
	})
	g.POST("/cut", p.handleCut)
	g.POST("/heal", func(c *gin.Context) {
		p.Heal()
		c.JSON(http.StatusOK, p.Stats())
	})
	g.GET("/stats", func(c *gin.Context) {
		c.JSON(http.StatusOK, p.Stats())
	})
}

func (p *Proxy) handleArm(c *gin.Context) {
	var req ArmRequest
	if !decodeBody(c, &req, `{"drop_commit_acks": 1}`) {
		return
	}
	if err := req.validate(); err != nil {
		problem.Abort(c, http.StatusBadRequest, err.Error())
		return
	}
	p.ArmMatching(*req.DropCommitAcks, req.Match)
	c.JSON(http.StatusOK, p.Stats())
}

func (p *Proxy) handleCut(c *gin.Context) {
	var req CutRequest
	if c.Request.ContentLength != 0 && !decodeBody(c, &req, `{"mode": "refuse"}`) {
		return
	}
	if req.Mode == "" {
		req.Mode = Refuse
	}
	if err := p.Cut(req.Mode); err != nil {
		problem.Abort(c, http.StatusBadRequest, fmt.Sprintf("mode must be %q or %q", Refuse, Blackhole))
		return
	}
	c.JSON(http.StatusOK, p.Stats())
}

// decodeBody decodes the request's one JSON object into v, strictly, or
// answers 400 (413 for a body over the limit) naming example, and reports
// whether it did.
func decodeBody(c *gin.Context, v any, example string) bool {
	dec := json.NewDecoder(c.Request.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if httpserver.IsBodyTooLarge(err) {
			problem.Abort(c, http.StatusRequestEntityTooLarge, "request body too large")
			return false
		}
		problem.Abort(c, http.StatusBadRequest, fmt.Sprintf("body must be a JSON object like %s: %v", example, err))
		return false
	}
	if dec.More() {
		problem.Abort(c, http.StatusBadRequest, "body must hold one JSON object")
		return false
	}
	return true
}

func (r ArmRequest) validate() error {
	switch {
	case r.DropCommitAcks == nil:
		return errors.New("drop_commit_acks is required")
	case *r.DropCommitAcks < 1 || *r.DropCommitAcks > maxArm:
		return fmt.Errorf("drop_commit_acks must be from 1 to %d (use POST /disarm to disarm)", maxArm)
	case len(r.Match) > 256:
		return errors.New("match must be at most 256 bytes")
	}
	return nil
}
