// Command dupproof races goroutines for one key against the local Redis and
// prints how many each guard lets through: a check-then-set lets many through,
// SET NX exactly one, the sliding window exactly its limit.
//
//	go run ./scripts/tools/dupproof
//
// REDIS_ADDR, REDIS_PASSWORD and REDIS_DB select the server (default
// 127.0.0.1:6379). Keys are named under a random prefix and deleted.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/oncemall/oncemall/pkg/config"
	"github.com/oncemall/oncemall/pkg/lab/dupproof"
	"github.com/oncemall/oncemall/pkg/redisclient"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "dupproof:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, stdout io.Writer) error {
	var cfg redisclient.Config
	if err := config.Load(&cfg); err != nil {
		return err
	}
	rdb := redisclient.New(cfg)
	defer rdb.Close()
	pingCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := rdb.Ping(pingCtx).Err(); err != nil {
		return fmt.Errorf("redis at %s: %w", cfg.Addr, err)
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	rows, err := dupproof.Run(ctx, rdb, "dupproof_"+hex.EncodeToString(b[:])+":")
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Goroutines released together race for one key on Redis %s (check-then-set gap %v).\n\n", cfg.Addr, dupproof.Gap)
	return dupproof.Print(stdout, rows)
}
