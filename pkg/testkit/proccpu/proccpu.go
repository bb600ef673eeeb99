// Package proccpu reads the CPU time a benchmark's process and the local
// MariaDB and Redis servers have used, so a benchmark can report where its
// work spent the machine's CPU, per process.
package proccpu

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Times is the CPU time (user + system) used so far by this test process
// and by the local MariaDB and Redis servers. On a machine where all three
// share the cores, the difference of two readings tells where a stretch of
// benchmark work spent the machine's CPU, per process. A server that does
// not run on this machine (in another container's namespace, on another
// host) reads zero.
type Times struct {
	Self, MariaDB, Redis time.Duration
}

// Read takes a reading.
func Read() Times {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return Times{
		Self:    time.Duration(ru.Utime.Nano() + ru.Stime.Nano()),
		MariaDB: Process("mariadbd", "mysqld"),
		Redis:   Process("redis-server"),
	}
}

// Sub is c − d: what was used between reading d and reading c.
func (c Times) Sub(d Times) Times {
	return Times{Self: c.Self - d.Self, MariaDB: c.MariaDB - d.MariaDB, Redis: c.Redis - d.Redis}
}

// Add is c + d.
func (c Times) Add(d Times) Times {
	return Times{Self: c.Self + d.Self, MariaDB: c.MariaDB + d.MariaDB, Redis: c.Redis + d.Redis}
}

// clockTick is the unit of the CPU times in /proc/<pid>/stat (USER_HZ, 100
// on every Linux this runs on).
const clockTick = 10 * time.Millisecond

// Process sums the CPU time of the processes whose command name is one
// of names, from /proc (zero where there is no /proc).
func Process(names ...string) time.Duration {
	comms, _ := filepath.Glob("/proc/[0-9]*/comm")
	var ticks int64
	for _, comm := range comms {
		name, err := os.ReadFile(comm)
		if err != nil || !slices.Contains(names, strings.TrimSpace(string(name))) {
			continue
		}
		stat, err := os.ReadFile(filepath.Join(filepath.Dir(comm), "stat"))
		if err != nil {
			continue
		}
		// Fields after the parenthesised command name: state is the
		// first, utime the 12th and stime the 13th.
		s := string(stat)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) < 13 {
			continue
		}
		utime, _ := strconv.ParseInt(fields[11], 10, 64)
		stime, _ := strconv.ParseInt(fields[12], 10, 64)
		ticks += utime + stime
	}
	return time.Duration(ticks) * clockTick
}
