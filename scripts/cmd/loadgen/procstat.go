package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// clockTicks is the kernel's USER_HZ, the unit of /proc/<pid>/stat's CPU
// times: 100 on every Linux this runs on.
const clockTicks = 100

// Usage is one group of processes' share of the machine during the load.
type Usage struct {
	Group string `json:"group"`
	Procs int    `json:"processes"`
	// CPUSeconds is user + system time spent during the load.
	CPUSeconds float64 `json:"cpu_seconds"`
	// Cores is CPUSeconds over the load's wall time: 1.0 is one core busy.
	Cores float64 `json:"cores"`
	// RSSMB is each process's resident memory after the run, in MiB.
	RSSMB []float64 `json:"rss_mib_after"`
}

// Machine is the whole machine's CPU during the load, from /proc/stat: how
// busy it was, whoever used it (other work shares it).
type Machine struct {
	CPUs     int     `json:"cpus"`
	BusyPct  float64 `json:"busy_pct"`
	Measured float64 `json:"measured_cores"` // the groups' cores together
}

// cpuOf returns a process's user + system time in seconds (0 when gone).
func cpuOf(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name, which is in parentheses and may hold
	// spaces: state is field 3, utime 14, stime 15.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (u + st) / clockTicks
}

// rssOf returns a process's resident set in MiB.
func rssOf(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

// machineTicks returns the busy and total jiffies of /proc/stat's cpu line.
func machineTicks() (busy, total float64, cpus int) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if f[0] == "cpu" {
			for i, v := range f[1:] {
				n, _ := strconv.ParseFloat(v, 64)
				total += n
				if i != 3 && i != 4 { // idle, iowait
					busy += n
				}
			}
		} else if strings.HasPrefix(f[0], "cpu") {
			cpus++
		}
	}
	return busy, total, cpus
}

// findProcs scans /proc for processes whose command name is comm and whose
// command line contains every one of words.
func findProcs(comm string, words ...string) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		c, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if err != nil || strings.TrimSpace(string(c)) != comm {
			continue
		}
		cl, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		line := strings.ReplaceAll(string(cl), "\x00", " ")
		ok := true
		for _, w := range words {
			ok = ok && strings.Contains(line, w)
		}
		if ok {
			out = append(out, pid)
		}
	}
	return out
}

// pidFiles reads make run's .run/<name>.pid files into groups: order-1
// joins order.
func pidFiles(dir string) map[string][]int {
	out := map[string][]int{}
	files, _ := filepath.Glob(filepath.Join(dir, "*.pid"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			continue
		}
		name := strings.TrimSuffix(filepath.Base(f), ".pid")
		group, _, _ := strings.Cut(name, "-")
		if name == "psp-sim" {
			group = name
		}
		out[group] = append(out[group], pid)
	}
	return out
}

// cpuWatch measures the groups' CPU between start and stop.
type cpuWatch struct {
	groups     func() map[string][]int
	began      time.Time
	startCPU   map[int]float64
	busy, tot  float64
	wall       time.Duration
	endCPU     map[int]float64
	mBusy, mTo float64
	cpus       int
}

func (w *cpuWatch) start() {
	w.began = time.Now()
	w.startCPU = map[int]float64{}
	for _, pids := range w.groups() {
		for _, p := range pids {
			w.startCPU[p] = cpuOf(p)
		}
	}
	w.busy, w.tot, w.cpus = machineTicks()
}

func (w *cpuWatch) stop() {
	w.wall = time.Since(w.began)
	w.endCPU = map[int]float64{}
	for _, pids := range w.groups() {
		for _, p := range pids {
			w.endCPU[p] = cpuOf(p)
		}
	}
	b, t, _ := machineTicks()
	w.mBusy, w.mTo = b-w.busy, t-w.tot
}

// usage reports each group, with the RSS read now.
func (w *cpuWatch) usage() ([]Usage, Machine) {
	var out []Usage
	m := Machine{CPUs: w.cpus}
	if w.mTo > 0 {
		m.BusyPct = 100 * w.mBusy / w.mTo
	}
	for g, pids := range w.groups() {
		u := Usage{Group: g, Procs: len(pids)}
		for _, p := range pids {
			// A process restarted during the load counts from its start.
			u.CPUSeconds += w.endCPU[p] - w.startCPU[p]
			u.RSSMB = append(u.RSSMB, float64(int(rssOf(p)*10))/10)
		}
		if w.wall > 0 {
			u.Cores = u.CPUSeconds / w.wall.Seconds()
		}
		m.Measured += u.Cores
		out = append(out, u)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CPUSeconds > out[j].CPUSeconds })
	return out, m
}
