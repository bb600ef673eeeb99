package main

import (
	"cmp"
	"maps"
	"slices"
	"strings"
)

// Cost is what the completed purchases of a window cost: each group of
// processes' CPU and the servers' work, every figure with the idle
// window's rate × the window's length subtracted, over the purchases
// completed within the window.
type Cost struct {
	Seconds     float64 `json:"window_s"`
	IdleSeconds float64 `json:"idle_window_s"`
	Completed   int     `json:"completed"`
	CPUs        int     `json:"cpus"`
	// BusyPct is the whole machine's CPU during the window (everyone's:
	// the machine may be shared); IdleBusyPct the same in the idle window.
	BusyPct     float64       `json:"machine_busy_pct"`
	IdleBusyPct float64       `json:"machine_busy_pct_idle"`
	CPU         []ProcessCost `json:"cpu"`
	// CPUMsPerPurchase sums the counted groups' CPU, idle subtracted, in
	// milliseconds per completed purchase; CPUMsPerPurchaseIdleIn is the
	// same with the idle CPU left in.
	CPUMsPerPurchase       float64 `json:"cpu_ms_per_purchase"`
	CPUMsPerPurchaseIdleIn float64 `json:"cpu_ms_per_purchase_idle_included"`
	Work                   []Work  `json:"work"`
	// Unread names the sources that could not be read, and why: their
	// figures are missing, not zero.
	Unread map[string]string `json:"unread,omitempty"`
}

// ProcessCost is one group of processes' CPU over the window.
type ProcessCost struct {
	Group string `json:"group"`
	Procs int    `json:"processes"`
	// CPUSeconds is user + system time during the window; IdleCPUSeconds
	// the idle window's rate over as long.
	CPUSeconds     float64 `json:"cpu_s"`
	IdleCPUSeconds float64 `json:"idle_cpu_s"`
	Cores          float64 `json:"cores"`
	MsPerPurchase  float64 `json:"ms_per_purchase"`
	// Counted tells whether the group is in CPUMsPerPurchase: every one
	// but the load generator and the fault proxy (a lab tool, in the path
	// only of the runs that need it: chaos and database outages).
	Counted bool      `json:"counted"`
	RSSMiB  []float64 `json:"rss_mib_after,omitempty"`
}

// Work is one counter of the servers' work over the window.
type Work struct {
	Key         string  `json:"key"`
	What        string  `json:"what"`
	Count       float64 `json:"count"`
	Idle        float64 `json:"idle"`
	PerPurchase float64 `json:"per_purchase"`
}

// uncounted are the groups left out of the CPU per purchase.
var uncounted = map[string]bool{"loadgen": true, "faultproxy": true}

// workItems are the fixed rows of Cost.Work: its key, what it counts, and
// how it is summed from a usage's counters.
var workItems = []struct {
	key, what string
	sum       func(n map[string]float64) (float64, bool)
}{
	{"sql_statements", "SQL statements (Com_*: every statement the clients sent, pings and prepared-statement protocol commands left out)", sqlStatements},
	{"transactions", "explicit transactions (Com_begin: START TRANSACTION)", one("mysql:Com_begin")},
	{"commits", "COMMITs (Com_commit)", one("mysql:Com_commit")},
	{"rollbacks", "ROLLBACKs (Com_rollback)", one("mysql:Com_rollback")},
	{"handler_commits", "InnoDB commits (Handler_commit: one per statement outside a transaction and per statement and COMMIT inside one)", one("mysql:Handler_commit")},
	{"fsyncs", "fsyncs (Innodb_data_fsyncs: data files and redo log; one per committed write, fewer when group commit merges them)", one("mysql:Innodb_data_fsyncs")},
	{"log_writes", "redo log writes (Innodb_log_writes)", one("mysql:Innodb_log_writes")},
	{"http_served", "HTTP requests the services served (http_requests_total; probes and scrapes left out)", one("http:served")},
	{"client_tries", "HTTP tries the clients sent", one("client:tries")},
	{"nats_in", "NATS messages in (varz in_msgs: publishes, acks, pull requests)", one("nats:in_msgs")},
	{"nats_out", "NATS messages out (varz out_msgs)", one("nats:out_msgs")},
	{"js_stored", "events stored in JetStream (streams' last sequence)", one("js:stored")},
	{"js_delivered", "JetStream deliveries (consumers' delivered sequence, redeliveries included)", one("js:delivered")},
	{"redis_commands", "Redis commands (INFO commandstats)", prefixed("redis:")},
}

func one(key string) func(map[string]float64) (float64, bool) {
	return func(n map[string]float64) (float64, bool) {
		v, ok := n[key]
		return v, ok
	}
}

func prefixed(prefix string) func(map[string]float64) (float64, bool) {
	return func(n map[string]float64) (float64, bool) {
		var sum float64
		found := false
		for k, v := range n {
			if strings.HasPrefix(k, prefix) {
				sum += v
				found = true
			}
		}
		return sum, found
	}
}

// notStatements are the Com_* counters that are not a statement of the
// workload: protocol commands (the statement they carry is counted under
// its own kind), pings, and the meter's own SHOW GLOBAL STATUS.
func notStatement(com string) bool {
	return strings.HasPrefix(com, "Com_stmt_") || com == "Com_admin_commands" || com == "Com_show_status"
}

func sqlStatements(n map[string]float64) (float64, bool) {
	var sum float64
	found := false
	for k, v := range n {
		com, ok := strings.CutPrefix(k, "mysql:")
		if ok && strings.HasPrefix(com, "Com_") && !notStatement(com) {
			sum += v
			found = true
		}
	}
	return sum, found
}

// statementKind names a Com_ counter as the statement it counts.
func statementKind(com string) string {
	switch k := strings.TrimPrefix(com, "Com_"); k {
	case "begin":
		return "START"
	case "set_option":
		return "SET"
	case "insert_select":
		return "INSERT…SELECT"
	default:
		return strings.ToUpper(k)
	}
}

// newCost computes the cost of the load usage over completed purchases,
// with idle's rates subtracted; rss is each group's resident memory after.
func newCost(load, idle usage, completed int, rss map[string][]float64) *Cost {
	c := &Cost{Seconds: load.seconds, IdleSeconds: idle.seconds, Completed: completed, CPUs: load.cpus, BusyPct: load.busyPct, IdleBusyPct: idle.busyPct, Unread: map[string]string{}}
	for src, why := range load.unread {
		c.Unread[src] = why
	}
	for src, why := range idle.unread {
		c.Unread[src] = why
	}
	per := func(v float64) float64 {
		if completed == 0 {
			return 0
		}
		return v / float64(completed)
	}
	scale := 0.0
	if idle.seconds > 0 {
		scale = load.seconds / idle.seconds
	}
	var counted, countedIdleIn float64
	for _, g := range slices.Sorted(maps.Keys(load.cpu)) {
		p := ProcessCost{Group: g, Procs: load.procs[g], CPUSeconds: load.cpu[g], IdleCPUSeconds: idle.cpu[g] * scale, Counted: !uncounted[g], RSSMiB: rss[g]}
		if load.seconds > 0 {
			p.Cores = p.CPUSeconds / load.seconds
		}
		p.MsPerPurchase = per(1000 * (p.CPUSeconds - p.IdleCPUSeconds))
		if p.Counted {
			counted += p.CPUSeconds - p.IdleCPUSeconds
			countedIdleIn += p.CPUSeconds
		}
		c.CPU = append(c.CPU, p)
	}
	slices.SortStableFunc(c.CPU, func(a, b ProcessCost) int { return cmp.Compare(b.CPUSeconds, a.CPUSeconds) })
	c.CPUMsPerPurchase, c.CPUMsPerPurchaseIdleIn = per(1000*counted), per(1000*countedIdleIn)

	add := func(key, what string, v, idleV float64) {
		c.Work = append(c.Work, Work{Key: key, What: what, Count: v, Idle: idleV * scale, PerPurchase: per(v - idleV*scale)})
	}
	for _, w := range workItems {
		v, ok := w.sum(load.n)
		iv, iok := w.sum(idle.n)
		if ok && iok {
			add(w.key, w.what, v, iv)
		}
	}
	// Statements by kind and Redis commands by name, each that happened.
	var kinds []string
	for k := range load.n {
		com, isSQL := strings.CutPrefix(k, "mysql:")
		if (isSQL && strings.HasPrefix(com, "Com_") && !notStatement(com)) || strings.HasPrefix(k, "redis:") {
			kinds = append(kinds, k)
		}
	}
	slices.Sort(kinds)
	for _, k := range kinds {
		src, _, _ := strings.Cut(k, ":")
		if _, unread := idle.unread[src]; unread || load.n[k] == 0 {
			continue
		}
		if com, ok := strings.CutPrefix(k, "mysql:"); ok {
			add("sql:"+statementKind(com), statementKind(com), load.n[k], idle.n[k])
		} else {
			add(k, strings.ToUpper(strings.TrimPrefix(k, "redis:")), load.n[k], idle.n[k])
		}
	}
	return c
}

// work returns the per-purchase figure of key, and whether it was read.
func (c *Cost) work(key string) (float64, bool) {
	for _, w := range c.Work {
		if w.Key == key {
			return w.PerPurchase, true
		}
	}
	return 0, false
}
