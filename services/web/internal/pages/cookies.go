package pages

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The storefront's cookies. Every one is HttpOnly and SameSite=Strict: no
// script reads them, and no other site's page sends them along.
const (
	// cookieSession is the access token identity issued at sign-in, as it
	// is: the storefront verifies it on every request and forwards it.
	cookieSession = "oncemall_session"
	// cookieUser is the name the user signed in with, for display only:
	// who the user is comes from the verified token alone.
	cookieUser = "oncemall_user"
	// cookieCSRF is a random value per browser; the forms carry its HMAC.
	cookieCSRF = "oncemall_csrf"
	// cookieCart is the cart: product ids and quantities, nothing priced
	// (the order service prices an order when it is placed).
	cookieCart = "oncemall_cart"
)

// maxCartLines bounds the cart cookie's size.
const (
	maxCartLines = 20
	maxQuantity  = 999
)

// cookies sets and reads the storefront's cookies.
type cookies struct {
	key    []byte // signs the CSRF tokens
	secure bool
}

func (k cookies) set(w http.ResponseWriter, name, value string, maxAge time.Duration) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: "/", MaxAge: int(maxAge.Seconds()),
		HttpOnly: true, Secure: k.secure, SameSite: http.SameSiteStrictMode})
}

func (k cookies) clear(w http.ResponseWriter, name string) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: k.secure, SameSite: http.SameSiteStrictMode})
}

func value(r *http.Request, name string) string {
	c, err := r.Cookie(name)
	if err != nil {
		return ""
	}
	return c.Value
}

// csrfToken returns the token the forms of r's page carry, setting the
// browser's CSRF cookie first if it has none. The token is the cookie's
// HMAC under the storefront's key (a signed double-submit cookie): a page
// of another site can neither read the cookie nor make the token.
func (k cookies) csrfToken(w http.ResponseWriter, r *http.Request) string {
	v := value(r, cookieCSRF)
	if !validCSRFCookie(v) {
		v = randomHex(16)
		k.set(w, cookieCSRF, v, 30*24*time.Hour)
		// The cookie is read back by later handlers of this request.
		r.AddCookie(&http.Cookie{Name: cookieCSRF, Value: v})
	}
	return k.sign(v)
}

func (k cookies) sign(v string) string {
	m := hmac.New(sha256.New, k.key)
	m.Write([]byte("csrf\x00" + v))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// checkCSRF reports whether r's form carries the token of r's CSRF cookie.
func (k cookies) checkCSRF(r *http.Request) bool {
	v := value(r, cookieCSRF)
	if !validCSRFCookie(v) {
		return false
	}
	return hmac.Equal([]byte(r.PostFormValue("csrf")), []byte(k.sign(v)))
}

func validCSRFCookie(v string) bool {
	if len(v) != 32 {
		return false
	}
	_, err := hex.DecodeString(v)
	return err == nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b)
}

// line is one product in the cart.
type line struct {
	ProductID uint64
	Quantity  int
}

// readCart parses the cart cookie; a malformed one is an empty cart.
func readCart(r *http.Request) []line {
	v := value(r, cookieCart)
	if v == "" {
		return nil
	}
	var out []line
	for part := range strings.SplitSeq(v, ".") {
		id, qty, ok := strings.Cut(part, "-")
		pid, err1 := strconv.ParseUint(id, 10, 64)
		q, err2 := strconv.Atoi(qty)
		if !ok || err1 != nil || err2 != nil || pid == 0 || q < 1 || q > maxQuantity || len(out) == maxCartLines {
			return nil
		}
		out = append(out, line{pid, q})
	}
	return out
}

func (k cookies) writeCart(w http.ResponseWriter, lines []line) {
	if len(lines) == 0 {
		k.clear(w, cookieCart)
		return
	}
	parts := make([]string, len(lines))
	for i, l := range lines {
		parts[i] = strconv.FormatUint(l.ProductID, 10) + "-" + strconv.Itoa(l.Quantity)
	}
	k.set(w, cookieCart, strings.Join(parts, "."), 7*24*time.Hour)
}

// addToCart adds qty of product to lines, at most maxQuantity of one
// product and maxCartLines products.
func addToCart(lines []line, product uint64, qty int) []line {
	for i := range lines {
		if lines[i].ProductID == product {
			lines[i].Quantity = min(lines[i].Quantity+qty, maxQuantity)
			return lines
		}
	}
	if len(lines) == maxCartLines {
		return lines
	}
	return append(lines, line{product, min(qty, maxQuantity)})
}

func removeFromCart(lines []line, product uint64) []line {
	return slices.DeleteFunc(lines, func(l line) bool { return l.ProductID == product })
}

// validOrderNo is an order number as the order service makes them: a
// letter and digits and hex, nothing a cookie or a URL would mangle.
func validOrderNo(no string) bool {
	if no == "" || len(no) > 64 {
		return false
	}
	for _, r := range no {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}
