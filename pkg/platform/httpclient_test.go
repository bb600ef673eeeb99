package platform_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/platform"
)

// TestHTTPClientReusesItsConnections: 32 calls at a time to one peer, ten
// times over, open about 32 connections in all, not one per call beyond the
// two net/http keeps by default. A service calls its peers many requests at
// a time, and a new connection per call was most of a loopback call's cost.
func TestHTTPClientReusesItsConnections(t *testing.T) {
	const inFlight, rounds = 32, 10
	var opened atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(2 * time.Millisecond) // keep the calls of a round in flight together
		w.WriteHeader(http.StatusNoContent)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)

	client := (&platform.Wiring{}).HTTPClient(5 * time.Second)
	for range rounds {
		var wg sync.WaitGroup
		for range inFlight {
			wg.Go(func() {
				resp, err := client.Get(srv.URL)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
			})
		}
		wg.Wait()
	}
	if n := opened.Load(); n > 2*inFlight {
		t.Fatalf("%d connections for %d calls, %d at a time: the client does not keep its connections", n, inFlight*rounds, inFlight)
	}
}
