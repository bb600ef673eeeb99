package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"

	_ "github.com/go-sql-driver/mysql" // the MariaDB/MySQL version query

	"github.com/oncemall/oncemall/pkg/config"
	"github.com/oncemall/oncemall/pkg/database"
	"github.com/oncemall/oncemall/pkg/lab/dupproof"
	"github.com/oncemall/oncemall/pkg/natsjs"
	"github.com/oncemall/oncemall/pkg/redisclient"
)

// Machine is what the figures were measured on.
type Machine struct {
	CPUs                  int
	CPUModel              string
	Memory                string
	GoVersion             string
	MySQL, NATS, Redis    string
	LoadStart, LoadEnd    string
	MySQLAddr, NATSURL    string
	RedisAddr, KernelArch string
}

// deps are the infrastructure addresses, read like the services read them.
type deps struct {
	MySQL database.Config
	NATS  natsjs.Config
	Redis redisclient.Config
}

func loadDeps() deps {
	var d deps
	_ = config.Load(&d) // a bad variable shows up as an unreachable server below
	return d
}

func describeMachine(ctx context.Context, root string) Machine {
	d := loadDeps()
	m := Machine{
		CPUs:       runtime.NumCPU(),
		CPUModel:   procField("/proc/cpuinfo", "model name", "unknown CPU"),
		Memory:     memTotal(),
		LoadStart:  loadAverage(),
		MySQLAddr:  d.MySQL.Addr,
		NATSURL:    d.NATS.URL,
		RedisAddr:  d.Redis.Addr,
		KernelArch: runtime.GOOS + "/" + runtime.GOARCH,
	}
	if out, err := exec.CommandContext(ctx, goBinary(), "version").Output(); err == nil {
		m.GoVersion = strings.TrimPrefix(strings.TrimSpace(string(out)), "go version ")
	} else {
		m.GoVersion = runtime.Version()
	}
	m.MySQL = mysqlVersion(ctx, d.MySQL)
	m.NATS = natsVersion(ctx, d.NATS)
	m.Redis = redisVersion(ctx, d.Redis)
	return m
}

func procField(path, field, fallback string) string {
	f, err := os.Open(path)
	if err != nil {
		return fallback
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == field {
			return strings.TrimSpace(v)
		}
	}
	return fallback
}

func memTotal() string {
	v := procField("/proc/meminfo", "MemTotal", "")
	kb, err := strconv.ParseFloat(strings.TrimSuffix(v, " kB"), 64)
	if err != nil {
		return "unknown"
	}
	return fmt.Sprintf("%.1f GiB", kb/1024/1024)
}

// loadAverage returns the 1, 5 and 15 minute load averages.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// loadOne returns the 1-minute load average of a loadAverage string.
func loadOne(s string) (float64, bool) {
	f := strings.Fields(s)
	if len(f) == 0 {
		return 0, false
	}
	v, err := strconv.ParseFloat(f[0], 64)
	return v, err == nil
}

func mysqlVersion(ctx context.Context, cfg database.Config) string {
	db, err := sql.Open("mysql", cfg.DSN(""))
	if err != nil {
		return "unreachable: " + err.Error()
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	var v string
	if err := db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&v); err != nil {
		return "unreachable: " + err.Error()
	}
	return v
}

func natsVersion(ctx context.Context, cfg natsjs.Config) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := natsjs.Connect(ctx, cfg, "bench", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		return "unreachable: " + err.Error()
	}
	defer conn.NC.Close()
	return conn.NC.ConnectedServerVersion()
}

func redisVersion(ctx context.Context, cfg redisclient.Config) string {
	rdb := redisclient.New(cfg)
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return "unreachable: " + err.Error()
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return v
		}
	}
	return "unknown"
}

// runDupproof measures the Redis guard table of incident 4 in process, on keys under a
// random prefix that it deletes.
func runDupproof(ctx context.Context) ([]dupproof.Row, error) {
	rdb := redisclient.New(loadDeps().Redis)
	defer rdb.Close()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return dupproof.Run(ctx, rdb, "bench_"+hex.EncodeToString(b[:])+":")
}
