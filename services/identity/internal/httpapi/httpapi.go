// Package httpapi is the identity service's HTTP interface: the token
// endpoint (the OAuth 2.0 password grant, RFC 6749 §4.3) and the issuer's
// well-known documents. Errors are problem+json, mapped in errors.go.
package httpapi

import (
	"log/slog"
	"mime"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/oncemall/oncemall/pkg/auth"
	"github.com/oncemall/oncemall/pkg/problem"
	"github.com/oncemall/oncemall/services/identity/internal/app"
)

// Options are what the routes need besides the use cases.
type Options struct {
	// Log receives the errors the API answers with 500 (logged once, here).
	Log *slog.Logger
	// LoginWindow is the login limit's window: a 429's Retry-After.
	LoginWindow time.Duration
}

// API serves the identity endpoints.
type API struct {
	app  *app.App
	opts Options
}

// New returns the API over a's use cases.
func New(a *app.App, opts Options) *API { return &API{app: a, opts: opts} }

// Register installs the routes on r, all open: a token is what they hand
// out.
func (h *API) Register(r gin.IRouter) {
	r.POST(auth.TokenPath, h.token)
	r.GET(auth.DiscoveryPath, h.discovery)
	r.GET(auth.JWKSPath, h.jwks)
}

// tokenResponse is RFC 6749 §5.1's answer.
type tokenResponse struct {
	AccessToken string `json:"access_token"`
	TokenType   string `json:"token_type"`
	ExpiresIn   int64  `json:"expires_in"`
}

// token is the password grant: a form with grant_type=password, username,
// password and optionally audience.
func (h *API) token(c *gin.Context) {
	if mt, _, _ := mime.ParseMediaType(c.GetHeader("Content-Type")); mt != "application/x-www-form-urlencoded" {
		problem.Write(c, problem.New(http.StatusUnsupportedMediaType,
			"the token endpoint accepts application/x-www-form-urlencoded only").With("error", "invalid_request"))
		return
	}
	if err := c.Request.ParseForm(); err != nil {
		problem.Write(c, problem.New(http.StatusBadRequest, "the form cannot be parsed").With("error", "invalid_request"))
		return
	}
	form := c.Request.PostForm
	if gt := form.Get("grant_type"); gt != "password" {
		problem.Write(c, problem.New(http.StatusBadRequest, "grant_type must be password").With("error", "unsupported_grant_type"))
		return
	}
	tok, err := h.app.Login(c.Request.Context(), app.Credentials{
		Username: form.Get("username"), Password: form.Get("password"), Audience: form.Get("audience"),
	})
	if err != nil {
		h.fail(c, err)
		return
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, tokenResponse{AccessToken: tok.AccessToken, TokenType: "Bearer", ExpiresIn: tok.ExpiresIn})
}

func (h *API) discovery(c *gin.Context) { c.JSON(http.StatusOK, h.app.Discovery()) }

// jwks serves the key set; verifiers cache it themselves, a few minutes.
func (h *API) jwks(c *gin.Context) {
	c.Header("Cache-Control", "public, max-age=300")
	c.JSON(http.StatusOK, h.app.JWKS())
}
