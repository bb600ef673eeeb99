package lab

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cpuTimes is the CPU time (user + system) used so far by this test process
// and by the local MariaDB and Redis servers. On a machine where all three
// share the cores, the difference of two readings tells where a stretch of
// benchmark work spent the machine's CPU, per process. A server that does
// not run on this machine (in another container's namespace, on another
// host) reads zero.
type cpuTimes struct {
	self, mariadb, redis time.Duration
}

func readCPU() cpuTimes {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return cpuTimes{
		self:    time.Duration(ru.Utime.Nano() + ru.Stime.Nano()),
		mariadb: processCPU("mariadbd", "mysqld"),
		redis:   processCPU("redis-server"),
	}
}

func (c cpuTimes) sub(d cpuTimes) cpuTimes {
	return cpuTimes{self: c.self - d.self, mariadb: c.mariadb - d.mariadb, redis: c.redis - d.redis}
}

func (c cpuTimes) add(d cpuTimes) cpuTimes {
	return cpuTimes{self: c.self + d.self, mariadb: c.mariadb + d.mariadb, redis: c.redis + d.redis}
}

// clockTick is the unit of the CPU times in /proc/<pid>/stat (USER_HZ, 100
// on every Linux this runs on).
const clockTick = 10 * time.Millisecond

// processCPU sums the CPU time of the processes whose command name is one
// of names, from /proc (zero where there is no /proc).
func processCPU(names ...string) time.Duration {
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
