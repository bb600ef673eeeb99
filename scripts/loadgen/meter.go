package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// meter reads what the purchases cost: every process's CPU (/proc), the
// MySQL server's statement, commit and fsync counters (SHOW GLOBAL
// STATUS), the Redis server's commands (INFO commandstats), the NATS
// server's messages (its monitoring endpoint, /varz and /jsz), the HTTP
// requests each service served (its http_requests_total) and the
// customers' tries. Two readings make a usage; each source that could not
// be read in either is named, not guessed.
type meter struct {
	groups   func() map[string][]int
	db       *sql.DB
	rdb      *redis.Client // nil: Redis is not read
	natsMon  string        // base URL of the NATS monitoring endpoint; empty: not read
	services map[string][]string
	http     *http.Client
	st       *stats
}

// The sources of a reading besides the CPU.
const (
	srcMySQL = "mysql"
	srcRedis = "redis"
	srcNATS  = "nats"
	srcHTTP  = "http"
)

// reading is one moment's counters.
type reading struct {
	at          time.Time
	groups      map[string][]int
	cpu         map[int]float64 // pid → user + system seconds
	busy, total float64         // the machine's jiffies
	cpus        int
	n           map[string]float64 // "mysql:Com_select", "redis:get", "nats:in_msgs", "js:stored", "http:served", "client:tries", …
	unread      map[string]string  // source → why it could not be read
	natsStart   time.Time          // when the NATS server started: a restarted one counts from zero
}

// read takes a reading now.
func (m *meter) read(ctx context.Context) reading {
	r := reading{at: time.Now(), groups: m.groups(), cpu: map[int]float64{}, n: map[string]float64{}, unread: map[string]string{}}
	for _, pids := range r.groups {
		for _, p := range pids {
			r.cpu[p] = cpuOf(p)
		}
	}
	r.busy, r.total, r.cpus = machineTicks()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := m.readMySQL(ctx, r.n); err != nil {
		r.unread[srcMySQL] = err.Error()
	}
	if m.rdb == nil {
		r.unread[srcRedis] = "no Redis address"
	} else if info, err := m.rdb.Info(ctx, "commandstats").Result(); err != nil {
		r.unread[srcRedis] = err.Error()
	} else {
		for cmd, calls := range parseCommandStats(info) {
			r.n["redis:"+cmd] = calls
		}
	}
	if m.natsMon == "" {
		r.unread[srcNATS] = "no NATS monitoring endpoint (--nats-monitor)"
	} else if err := m.readNATS(ctx, &r); err != nil {
		r.unread[srcNATS] = err.Error()
	}
	if err := m.readHTTP(ctx, r.n); err != nil {
		r.unread[srcHTTP] = err.Error()
	}
	r.n["client:tries"] = m.st.clientTries()
	return r
}

// mysqlCounters are the SHOW GLOBAL STATUS counters kept besides Com_*.
var mysqlCounters = map[string]bool{"Questions": true, "Handler_commit": true, "Handler_rollback": true, "Innodb_data_fsyncs": true, "Innodb_log_writes": true}

func (m *meter) readMySQL(ctx context.Context, n map[string]float64) error {
	rows, err := m.db.QueryContext(ctx, "SHOW GLOBAL STATUS")
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var name, value string
		if err := rows.Scan(&name, &value); err != nil {
			return err
		}
		if !strings.HasPrefix(name, "Com_") && !mysqlCounters[name] {
			continue
		}
		if v, err := strconv.ParseFloat(value, 64); err == nil {
			n["mysql:"+name] = v
		}
	}
	return rows.Err()
}

func (m *meter) get(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := m.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return io.ReadAll(io.LimitReader(resp.Body, 32<<20))
}

func (m *meter) readNATS(ctx context.Context, r *reading) error {
	b, err := m.get(ctx, m.natsMon+"/varz")
	if err != nil {
		return err
	}
	v, err := parseVarz(b)
	if err != nil {
		return err
	}
	if r.natsStart, err = time.Parse(time.RFC3339Nano, v.Start); err != nil {
		return fmt.Errorf("varz start %q: %w", v.Start, err)
	}
	r.n["nats:in_msgs"], r.n["nats:out_msgs"] = v.InMsgs, v.OutMsgs
	if b, err = m.get(ctx, m.natsMon+"/jsz?accounts=true&streams=true&consumers=true"); err != nil {
		return err
	}
	stored, delivered, err := parseJsz(b)
	if err != nil {
		return err
	}
	r.n["js:stored"], r.n["js:delivered"] = stored, delivered
	return nil
}

// readHTTP sums every replica's http_requests_total, the probes and the
// meters' own scrapes left out.
func (m *meter) readHTTP(ctx context.Context, n map[string]float64) error {
	var total float64
	for _, urls := range m.services {
		for _, u := range urls {
			b, err := m.get(ctx, u+"/metrics")
			if err != nil {
				return err
			}
			total += servedRequests(b)
		}
	}
	n["http:served"] = total
	return nil
}

// varz is what the cost report reads of NATS's /varz.
type varz struct {
	Start   string  `json:"start"`
	InMsgs  float64 `json:"in_msgs"`
	OutMsgs float64 `json:"out_msgs"`
}

func parseVarz(b []byte) (varz, error) {
	var v varz
	if err := json.Unmarshal(b, &v); err != nil {
		return v, fmt.Errorf("varz: %w", err)
	}
	if v.Start == "" {
		return v, fmt.Errorf("varz: no start time in %.100s", b)
	}
	return v, nil
}

// parseJsz sums, over every account's streams, the messages stored (each
// stream's last sequence: what was ever published to it) and the
// deliveries of its consumers (their delivered consumer sequence, which
// counts redeliveries too).
func parseJsz(b []byte) (stored, delivered float64, err error) {
	var j struct {
		Accounts []struct {
			Streams []struct {
				State struct {
					LastSeq float64 `json:"last_seq"`
				} `json:"state"`
				Consumers []struct {
					Delivered struct {
						ConsumerSeq float64 `json:"consumer_seq"`
					} `json:"delivered"`
				} `json:"consumer_detail"`
			} `json:"stream_detail"`
		} `json:"account_details"`
	}
	if err := json.Unmarshal(b, &j); err != nil {
		return 0, 0, fmt.Errorf("jsz: %w", err)
	}
	for _, a := range j.Accounts {
		for _, s := range a.Streams {
			stored += s.State.LastSeq
			for _, c := range s.Consumers {
				delivered += c.Delivered.ConsumerSeq
			}
		}
	}
	return stored, delivered, nil
}

// parseCommandStats reads INFO commandstats into command → calls, the
// loadgen's own commands (its readings, its watch of the job claims) left
// out. A subcommand counts under its command ("config|set" is "config").
func parseCommandStats(info string) map[string]float64 {
	out := map[string]float64{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		cmd, isCmd := strings.CutPrefix(name, "cmdstat_")
		if !ok || !isCmd {
			continue
		}
		cmd, _, _ = strings.Cut(cmd, "|")
		if ownRedisCommands[cmd] {
			continue
		}
		for _, kv := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(kv, "calls="); ok {
				if n, err := strconv.ParseFloat(v, 64); err == nil {
					out[cmd] += n
				}
			}
		}
	}
	return out
}

// ownRedisCommands are the ones the loadgen sends itself.
var ownRedisCommands = map[string]bool{"info": true, "config": true, "psubscribe": true, "punsubscribe": true, "scan": true}

// servedRequests sums the http_requests_total series of a /metrics page,
// leaving out the probes and scrapes (/healthz, /readyz, /metrics,
// /debug/pprof), which are the operator's, not the purchases'.
func servedRequests(metrics []byte) float64 {
	var total float64
	sc := bufio.NewScanner(strings.NewReader(string(metrics)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "http_requests_total{") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		switch route := label(line[:i], "route"); {
		case route == "/healthz", route == "/readyz", route == "/metrics", strings.HasPrefix(route, "/debug/"):
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			total += v
		}
	}
	return total
}

// usage is what happened between two readings.
type usage struct {
	seconds float64
	cpu     map[string]float64 // group → CPU seconds
	procs   map[string]int
	n       map[string]float64
	unread  map[string]string
	busyPct float64
	cpus    int
}

// between returns the usage from a to b. A counter that went down belongs
// to a server that restarted, and all of its value is new. NATS says when
// it started: one that was down at a and started after it counts from its
// start; one that restarted between two readings of it lost what it
// counted before, and its figures are left out. A process that ended
// between a and b is missing its CPU since a; one that started counts from
// its start.
func between(a, b reading) usage {
	u := usage{seconds: b.at.Sub(a.at).Seconds(), cpu: map[string]float64{}, procs: map[string]int{}, n: map[string]float64{}, unread: map[string]string{}, cpus: b.cpus}
	if t := b.total - a.total; t > 0 {
		u.busyPct = 100 * (b.busy - a.busy) / t
	}
	for g, pids := range b.groups {
		u.procs[g] = len(pids)
		for _, p := range pids {
			u.cpu[g] += max(0, b.cpu[p]-a.cpu[p])
		}
	}
	_, downAtA := a.unread[srcNATS]
	_, downAtB := b.unread[srcNATS]
	freshNATS := downAtA && !downAtB && b.natsStart.After(a.at)
	for src, why := range a.unread {
		if src != srcNATS || !freshNATS {
			u.unread[src] = why
		}
	}
	for src, why := range b.unread {
		u.unread[src] = why
	}
	if _, bad := u.unread[srcNATS]; !bad && !freshNATS && !a.natsStart.Equal(b.natsStart) {
		u.unread[srcNATS] = "the NATS server restarted within the window: what it counted before is gone"
	}
	for k, vb := range b.n {
		src, _, _ := strings.Cut(k, ":")
		if src == "js" || src == "nats" {
			src = srcNATS
		}
		if _, bad := u.unread[src]; bad {
			continue
		}
		d := vb - a.n[k]
		if d < 0 || (src == srcNATS && freshNATS) {
			d = vb
		}
		u.n[k] = d
	}
	return u
}
