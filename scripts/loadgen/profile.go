package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// profileServices takes a CPU profile of the first replica of each service
// while the load runs: after a third of the load (the pools are warm), for
// up to 8 seconds (the services' request deadline is 10 s), written to
// dir/<service>.pprof. Read one with `go tool pprof -top dir/order.pprof`.
func profileServices(ctx context.Context, t Targets, load time.Duration, dir string, log io.Writer) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintf(log, "loadgen: profiles: %v\n", err)
		return
	}
	select {
	case <-ctx.Done():
		return
	case <-time.After(load / 3):
	}
	secs := max(1, min(8, int(load.Seconds()/2)))
	var wg sync.WaitGroup
	for name, urls := range map[string][]string{"order": t.Order, "coupon": t.Coupon, "payment": t.Payment} {
		wg.Go(func() {
			if err := fetchProfile(ctx, urls[0], t.AdminToken, secs, filepath.Join(dir, name+".pprof")); err != nil {
				fmt.Fprintf(log, "loadgen: profile of %s: %v\n", name, err)
			}
		})
	}
	wg.Wait()
	fmt.Fprintf(log, "loadgen: %d s CPU profiles of each service in %s\n", secs, dir)
}

func fetchProfile(ctx context.Context, base, token string, secs int, path string) error {
	req, err := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", base, secs), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s", resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
