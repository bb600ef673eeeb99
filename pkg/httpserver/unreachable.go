package httpserver

import (
	"log/slog"

	"github.com/gin-gonic/gin"

	"github.com/oncemall/oncemall/pkg/database"
)

// Unreachable answers a request whose handler failed because the database
// could not be reached (database.IsUnavailable: refused, reset, gone away),
// and reports whether it did; error maps call it beside Ended, before their
// 500. Nothing was decided, and the same request may succeed once the
// database answers again, so the answer is 503 with a jittered
// Retry-After (Unavailable). The cause names the database's address, so it
// is logged, not sent; at warn, as an outage is worth an operator's look,
// while /readyz already reports it.
func Unreachable(c *gin.Context, log *slog.Logger, err error) bool {
	if !database.IsUnavailable(err) {
		return false
	}
	log.WarnContext(c.Request.Context(), "request failed: the database cannot be reached", "path", c.FullPath(), "err", err)
	Unavailable(c, "the database is unavailable; retry")
	return true
}
