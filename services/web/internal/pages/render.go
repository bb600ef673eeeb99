package pages

import (
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"path"
	"sort"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/oncemall/oncemall/pkg/auth"
	"github.com/oncemall/oncemall/services/web/internal/upstream"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// views are the parsed pages, each the layout with its own content.
type views struct {
	pages map[string]*template.Template
}

var funcs = template.FuncMap{
	// money formats cents as units with two decimals.
	"money": func(cents int64) string {
		sign := ""
		if cents < 0 {
			sign, cents = "-", -cents
		}
		return fmt.Sprintf("%s%d.%02d", sign, cents/100, cents%100)
	},
	"lower": strings.ToLower,
	// dict makes a map of its key, value arguments: the data of a
	// template called with more than one value.
	"dict": func(kv ...any) (map[string]any, error) {
		if len(kv)%2 != 0 {
			return nil, errors.New("dict: an odd number of arguments")
		}
		m := make(map[string]any, len(kv)/2)
		for i := 0; i < len(kv); i += 2 {
			k, ok := kv[i].(string)
			if !ok {
				return nil, fmt.Errorf("dict: key %v is not a string", kv[i])
			}
			m[k] = kv[i+1]
		}
		return m, nil
	},
}

func parseViews() (*views, error) {
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	v := &views{pages: map[string]*template.Template{}}
	for _, n := range names {
		name := strings.TrimSuffix(path.Base(n), ".html")
		if name == "layout" {
			continue
		}
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", n)
		if err != nil {
			return nil, fmt.Errorf("pages: template %s: %w", name, err)
		}
		v.pages[name] = t
	}
	return v, nil
}

// add parses the pages of fsys ("*.html") as the storefront's own, each
// with the layout.
func (v *views) add(fsys fs.FS) error {
	names, err := fs.Glob(fsys, "*.html")
	if err != nil {
		return err
	}
	for _, n := range names {
		name := strings.TrimSuffix(n, ".html")
		if _, dup := v.pages[name]; dup {
			return fmt.Errorf("template %s: the storefront has a page of that name", name)
		}
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html")
		if err == nil {
			t, err = t.ParseFS(fsys, n)
		}
		if err != nil {
			return fmt.Errorf("template %s: %w", name, err)
		}
		v.pages[name] = t
	}
	return nil
}

// render writes page name with data and what every page shows: the user,
// the CSRF token of the forms.
func (p *Pages) render(c *gin.Context, status int, name string, data map[string]any) {
	t, ok := p.views.pages[name]
	if !ok {
		panic("pages: no template " + name)
	}
	if data == nil {
		data = map[string]any{}
	}
	s, _ := p.user(c)
	if s != nil {
		data["User"] = s.name
		if s.operator && p.operator != nil {
			data["Menu"] = p.menu()
		}
	}
	data["CSRF"] = p.cookies.csrfToken(c.Writer, c.Request)
	data["Cart"] = len(readCart(c.Request))
	data["Page"] = name
	c.Header("Content-Type", "text/html; charset=utf-8")
	c.Header("Cache-Control", "no-store")
	// The pages use their own scripts and styles only.
	c.Header("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'; form-action 'self'")
	c.Header("X-Content-Type-Options", "nosniff")
	c.Status(status)
	if err := t.Execute(c.Writer, data); err != nil {
		p.log.ErrorContext(c.Request.Context(), "page not rendered", "page", name, "err", err)
	}
}

// problem renders the error page: what happened, in words, and for a form
// a "Try again" button that sends the same form again (same key).
func (p *Pages) problem(c *gin.Context, status int, title, detail string) {
	if isAPI(c) {
		c.Header("Content-Type", "application/problem+json")
		c.JSON(status, gin.H{"type": "about:blank", "title": http.StatusText(status), "status": status, "detail": detail})
		return
	}
	data := map[string]any{"Status": status, "Title": title, "Detail": detail}
	// Not for the sign-in form, whose password is never written back into
	// a page.
	if c.Request.Method == http.MethodPost && status != http.StatusForbidden && c.FullPath() != "/signin" {
		data["Retry"] = retryForm(c.Request)
	}
	p.render(c, status, "error", data)
}

// retry is a form that posts the same fields to the same URL again.
type retry struct {
	Action string
	Fields []field
}

type field struct{ Name, Value string }

func retryForm(r *http.Request) *retry {
	out := &retry{Action: r.URL.RequestURI()}
	names := make([]string, 0, len(r.PostForm))
	for n := range r.PostForm {
		if n != "csrf" {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		for _, v := range r.PostForm[n] {
			out.Fields = append(out.Fields, field{n, v})
		}
	}
	return out
}

// fail renders the error page for err, a refusal or a failure of a call
// to a service, and logs what happened.
func (p *Pages) fail(c *gin.Context, err error) {
	ctx := c.Request.Context()
	var s *session
	if v, ok := c.Get("session"); ok {
		s = v.(*session)
	}
	var uid uint64
	if s != nil {
		uid = s.caller.UserID
	}
	if errors.Is(err, auth.ErrKeysUnavailable) {
		p.log.ErrorContext(ctx, "session not checked: the identity service's keys are out of reach", "err", err)
		p.problem(c, http.StatusServiceUnavailable, "Sign-in is unavailable",
			"The identity service does not answer, so the session cannot be checked. Nothing was done; try again in a moment.")
		return
	}
	var e *upstream.Error
	if !errors.As(err, &e) {
		p.log.ErrorContext(ctx, "page failed", "path", c.FullPath(), "user_id", uid, "err", err)
		p.problem(c, http.StatusInternalServerError, "Something went wrong", "The storefront failed; this is logged.")
		return
	}
	attrs := []any{"service", e.Service, "method", e.Method, "path", e.Path, "status", e.Status, "user_id", uid, "page", c.FullPath()}
	if e.Unreachable() {
		p.log.ErrorContext(ctx, "service call failed", append(attrs, "err", err)...)
		title := fmt.Sprintf("The %s service did not answer", e.Service)
		if e.Status != 0 {
			title = fmt.Sprintf("The %s service cannot take this now", e.Service)
		}
		p.problem(c, http.StatusBadGateway, title,
			"Nothing was lost. Try again in a moment: the same request is sent again with the same key, so it cannot order or pay twice.")
		return
	}
	p.log.InfoContext(ctx, "service refused the request", append(attrs, "detail", e.Detail, "code", e.Code, "reason", e.Reason)...)
	switch {
	case e.Status == http.StatusUnauthorized:
		p.cookies.clear(c.Writer, cookieSession)
		p.problem(c, http.StatusUnauthorized, "Sign in again", "The "+e.Service+" service did not accept the session.")
	case e.Code == "out_of_stock":
		p.problem(c, http.StatusConflict, "Not enough stock", "One of the products has too few units left. Change the cart and order again.")
	case e.Code == "price_changed":
		p.problem(c, http.StatusConflict, "A price changed", "A price changed while the order was placed. Try again.")
	case e.Reason != "":
		p.problem(c, e.Status, "The coupon was refused", "The coupon cannot be used for this order: "+strings.ReplaceAll(e.Reason, "_", " ")+".")
	case e.Status == http.StatusNotFound:
		p.problem(c, http.StatusNotFound, "Not found", "The "+e.Service+" service has no such thing for you: "+e.Detail)
	default:
		p.problem(c, e.Status, "The "+e.Service+" service refused", e.Detail)
	}
}

// static serves the embedded scripts and styles.
func (p *Pages) static(c *gin.Context) {
	name := strings.TrimPrefix(c.Param("file"), "/")
	b, err := staticFS.ReadFile("static/" + path.Clean(name))
	if err != nil {
		c.Status(http.StatusNotFound)
		return
	}
	ct := "application/octet-stream"
	switch path.Ext(name) {
	case ".js":
		ct = "text/javascript; charset=utf-8"
	case ".css":
		ct = "text/css; charset=utf-8"
	case ".svg":
		ct = "image/svg+xml"
	}
	c.Header("Cache-Control", "public, max-age=300")
	c.Data(http.StatusOK, ct, b)
}
