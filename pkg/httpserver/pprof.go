package httpserver

import (
	"net/http/pprof"

	"github.com/gin-gonic/gin"
)

// PprofPath is where MountPprof serves the runtime profiles.
const PprofPath = "/debug/pprof"

// MountPprof serves net/http/pprof under PprofPath behind auth (the admin
// token): CPU, heap, goroutine and the other runtime profiles, for an
// operator who must see where a service spends its time. A profile runs
// within the request deadline (HTTP_REQUEST_TIMEOUT), so ask for fewer
// seconds than that: `curl -H "Authorization: Bearer $ADMIN_TOKEN"
// :8081/debug/pprof/profile?seconds=8 > cpu.pprof`.
func MountPprof(r gin.IRouter, auth gin.HandlerFunc) {
	g := r.Group(PprofPath, auth)
	g.GET("/", gin.WrapF(pprof.Index))
	g.GET("/cmdline", gin.WrapF(pprof.Cmdline))
	g.GET("/profile", gin.WrapF(pprof.Profile))
	g.GET("/symbol", gin.WrapF(pprof.Symbol))
	g.POST("/symbol", gin.WrapF(pprof.Symbol))
	g.GET("/trace", gin.WrapF(pprof.Trace))
	g.GET("/:name", func(c *gin.Context) { pprof.Handler(c.Param("name")).ServeHTTP(c.Writer, c.Request) })
}
