package faultproxy

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Stats counts what the proxy saw and did since it started.
type Stats struct {
	// Connections is the number of client connections accepted.
	Connections int64 `json:"connections"`
	// ActiveConnections is the number of client connections open now.
	ActiveConnections int64 `json:"active_connections"`
	// OpaqueConnections counts connections that negotiated TLS or
	// compression, whose COMMITs the proxy cannot see.
	OpaqueConnections int64 `json:"opaque_connections"`
	// CommitsSeen is the number of COMMIT statements forwarded to the server.
	CommitsSeen int64 `json:"commits_seen"`
	// AcksDropped is the number of COMMITs the server acknowledged with OK
	// whose acknowledgement the client never got.
	AcksDropped int64 `json:"acks_dropped"`
	// ErrorRepliesDropped is the number of armed COMMITs the server refused
	// (an ERR reply), dropped all the same.
	ErrorRepliesDropped int64 `json:"error_replies_dropped"`
	// ReplyTimeouts is the number of armed COMMITs whose reply did not come
	// within the reply timeout; the connection was cut anyway.
	ReplyTimeouts int64 `json:"reply_timeouts"`
	// Armed is the number of upcoming COMMITs whose acknowledgement will be
	// dropped.
	Armed int64 `json:"armed"`
	// Match is the statement text an armed drop waits for ("" for any
	// COMMIT).
	Match string `json:"match,omitempty"`
	// Outage is the cut in force (Refuse or Blackhole), empty when the
	// database is reachable through the proxy.
	Outage Outage `json:"outage,omitempty"`
	// Cuts is the number of times Cut was called.
	Cuts int64 `json:"cuts"`
	// SessionsCut is the number of open sessions a Cut closed.
	SessionsCut int64 `json:"sessions_cut"`
	// RefusedConnections is the number of client connections closed at
	// once because a Refuse cut was in force.
	RefusedConnections int64 `json:"refused_connections"`
	// BlackholedConnections is the number of client connections held
	// unanswered because a Blackhole cut was in force.
	BlackholedConnections int64 `json:"blackholed_connections"`
}

// Outage is how a cut database looks to its clients.
type Outage string

// The outages of Cut.
const (
	// Refuse closes every new client connection as soon as it is accepted,
	// before a byte is read: a server that is down. Clients fail at once.
	Refuse Outage = "refuse"
	// Blackhole accepts new client connections and never answers on them,
	// not even the server's greeting: a network that lost its route.
	// Clients wait until their own timeouts.
	Blackhole Outage = "blackhole"
)

// Valid reports whether o is one of the outages.
func (o Outage) Valid() bool { return o == Refuse || o == Blackhole }

// Proxy is a MySQL-protocol-aware TCP proxy that can drop the server's
// acknowledgement of a COMMIT. See the package documentation.
type Proxy struct {
	cfg Config
	log *slog.Logger

	// armMu guards armed and match together; pattern mirrors match for the
	// scanners, which read it on every command without the lock.
	armMu   sync.Mutex
	armed   int64
	match   string
	pattern atomic.Pointer[[]byte]
	armedG  atomic.Int64 // armed, for the metric

	conns       atomic.Int64
	active      atomic.Int64
	opaque      atomic.Int64
	commits     atomic.Int64
	acksDropped atomic.Int64
	errDropped  atomic.Int64
	timeouts    atomic.Int64

	cuts        atomic.Int64
	sessionsCut atomic.Int64
	refused     atomic.Int64
	blackholed  atomic.Int64
	outageG     atomic.Int64 // 1 while a cut is in force, for the metric

	mu       sync.Mutex
	closed   bool
	outage   Outage // the cut in force, "" for none
	ln       net.Listener
	open     map[net.Conn]struct{} // client and upstream connections, for Close and Cut
	sessions map[net.Conn]net.Conn // a proxied session's client connection → its upstream one
	held     map[net.Conn]struct{} // client connections a Blackhole cut holds
	wg       sync.WaitGroup
	served   chan struct{} // closed when the accept loop ends
}

// New returns a proxy forwarding to cfg.Upstream. Its counters are exported
// as Prometheus metrics on reg. cfg is used as given (the program validates
// it first); only Upstream is required.
func New(cfg Config, log *slog.Logger, reg prometheus.Registerer) (*Proxy, error) {
	if cfg.Upstream == "" {
		return nil, errors.New("faultproxy: no upstream address")
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	if cfg.ReplyTimeout <= 0 {
		cfg.ReplyTimeout = 30 * time.Second
	}
	p := &Proxy{cfg: cfg, log: log, open: map[net.Conn]struct{}{}, sessions: map[net.Conn]net.Conn{}, held: map[net.Conn]struct{}{}}
	if err := p.registerMetrics(reg); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *Proxy) registerMetrics(reg prometheus.Registerer) error {
	counter := func(name, help string, v *atomic.Int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(v.Load()) })
	}
	gauge := func(name, help string, v *atomic.Int64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return float64(v.Load()) })
	}
	for _, c := range []prometheus.Collector{
		counter("faultproxy_connections_total", "Client connections accepted.", &p.conns),
		gauge("faultproxy_connections_active", "Client connections open now.", &p.active),
		counter("faultproxy_opaque_connections_total", "Connections using TLS or compression, whose COMMITs cannot be seen.", &p.opaque),
		counter("faultproxy_commits_seen_total", "COMMIT statements forwarded to the server.", &p.commits),
		counter("faultproxy_commit_acks_dropped_total", "Committed transactions whose OK reply was dropped and client connection cut.", &p.acksDropped),
		counter("faultproxy_commit_error_replies_dropped_total", "Armed COMMITs refused by the server, whose ERR reply was dropped.", &p.errDropped),
		counter("faultproxy_commit_reply_timeouts_total", "Armed COMMITs whose reply did not arrive in time.", &p.timeouts),
		gauge("faultproxy_armed", "COMMIT acknowledgements still to drop.", &p.armedG),
		gauge("faultproxy_outage", "1 while the database is cut (refused or black-holed), else 0.", &p.outageG),
		counter("faultproxy_cuts_total", "Cuts of the database.", &p.cuts),
		counter("faultproxy_sessions_cut_total", "Open sessions closed by a cut.", &p.sessionsCut),
		counter("faultproxy_refused_connections_total", "Client connections closed at once during a refusing cut.", &p.refused),
		counter("faultproxy_blackholed_connections_total", "Client connections held unanswered during a black-holing cut.", &p.blackholed),
	} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("faultproxy: register metrics: %w", err)
		}
	}
	return nil
}

// Arm makes the proxy drop the acknowledgement of the next n COMMITs, across
// all connections, replacing any earlier arming. n <= 0 disarms.
func (p *Proxy) Arm(n int) {
	p.ArmMatching(n, "")
}

// ArmMatching is Arm restricted to COMMITs of transactions that sent a
// statement containing match (case-sensitive, in its first 4 KiB), such as a
// table name; other COMMITs pass and do not use up the arming. A statement
// counts when it is sent after the arming, on the same connection, since that
// connection's last COMMIT or ROLLBACK. It keeps a scenario deterministic when
// background work commits through the proxy too.
func (p *Proxy) ArmMatching(n int, match string) {
	p.armMu.Lock()
	defer p.armMu.Unlock()
	p.setArming(max(int64(n), 0), match)
	p.log.Info("faultproxy armed", "drop_commit_acks", p.armed, "match", p.match)
}

// Disarm cancels the drops still armed.
func (p *Proxy) Disarm() {
	p.armMu.Lock()
	defer p.armMu.Unlock()
	p.setArming(0, "")
	p.log.Info("faultproxy disarmed")
}

// setArming updates the arming; armMu must be held.
func (p *Proxy) setArming(n int64, match string) {
	if n == 0 {
		match = ""
	}
	p.armed, p.match = n, match
	p.armedG.Store(n)
	if match == "" {
		p.pattern.Store(nil)
	} else {
		b := []byte(match)
		p.pattern.Store(&b)
	}
}

// currentPattern returns the statement text armed drops wait for, or nil.
func (p *Proxy) currentPattern() []byte {
	if b := p.pattern.Load(); b != nil {
		return *b
	}
	return nil
}

// Cut makes the database unreachable through the proxy until Heal: every
// open session is closed, both ways, and new client connections are
// refused or held unanswered, as outage says. The driver of a pooled
// connection sees it end on its next use; a statement that was waiting for
// its reply gets an error, as when the server dies (its outcome on the
// server is not known to the client). Cutting again changes the outage.
func (p *Proxy) Cut(outage Outage) error {
	if !outage.Valid() {
		return fmt.Errorf("faultproxy: unknown outage %q (want %q or %q)", outage, Refuse, Blackhole)
	}
	p.mu.Lock()
	p.outage = outage
	p.outageG.Store(1)
	n := len(p.sessions)
	for client, server := range p.sessions {
		client.Close()
		server.Close()
	}
	// A held connection of an earlier Blackhole cut is let go: under
	// Refuse its client must see the connection end.
	if outage == Refuse {
		for c := range p.held {
			c.Close()
		}
	}
	p.mu.Unlock()
	p.cuts.Add(1)
	p.sessionsCut.Add(int64(n))
	p.log.Info("faultproxy: database cut", "outage", string(outage), "sessions_cut", n)
	return nil
}

// Heal ends a cut: new client connections are proxied again, and the ones
// a Blackhole cut held are closed, so that their clients connect again
// instead of waiting on a connection nothing will ever answer.
func (p *Proxy) Heal() {
	p.mu.Lock()
	was := p.outage
	p.outage = ""
	p.outageG.Store(0)
	for c := range p.held {
		c.Close()
	}
	p.mu.Unlock()
	if was != "" {
		p.log.Info("faultproxy: database healed", "outage", string(was))
	}
}

// Stats returns the counters.
func (p *Proxy) Stats() Stats {
	p.armMu.Lock()
	armed, match := p.armed, p.match
	p.armMu.Unlock()
	p.mu.Lock()
	outage := p.outage
	p.mu.Unlock()
	return Stats{
		Outage:                outage,
		Cuts:                  p.cuts.Load(),
		SessionsCut:           p.sessionsCut.Load(),
		RefusedConnections:    p.refused.Load(),
		BlackholedConnections: p.blackholed.Load(),
		Connections:           p.conns.Load(),
		ActiveConnections:     p.active.Load(),
		OpaqueConnections:     p.opaque.Load(),
		CommitsSeen:           p.commits.Load(),
		AcksDropped:           p.acksDropped.Load(),
		ErrorRepliesDropped:   p.errDropped.Load(),
		ReplyTimeouts:         p.timeouts.Load(),
		Armed:                 armed,
		Match:                 match,
	}
}

// takeDrop consumes one armed drop for a COMMIT, if any is left and the
// COMMIT qualifies (matched tells whether its transaction sent the armed
// statement text).
func (p *Proxy) takeDrop(matched bool) bool {
	p.armMu.Lock()
	defer p.armMu.Unlock()
	if p.armed <= 0 || (p.match != "" && !matched) {
		return false
	}
	p.setArming(p.armed-1, p.match)
	return true
}

// Listen binds cfg.Addr and serves clients in the background until Close.
// It returns the bound address, useful when cfg.Addr has port 0.
func (p *Proxy) Listen() (net.Addr, error) {
	ln, err := net.Listen("tcp", p.cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen %s: %w", p.cfg.Addr, err)
	}
	p.mu.Lock()
	if p.closed || p.ln != nil {
		p.mu.Unlock()
		ln.Close()
		return nil, errors.New("faultproxy: already listening or closed")
	}
	p.ln = ln
	p.served = make(chan struct{})
	p.mu.Unlock()
	p.log.Info("faultproxy listening", "addr", ln.Addr().String(), "upstream", p.cfg.Upstream)
	go func() {
		defer close(p.served)
		p.serve(ln)
	}()
	return ln.Addr(), nil
}

// Close stops accepting clients, cuts every open connection and waits for
// their goroutines to end. There is no gentler shutdown: database clients keep
// pooled connections open indefinitely, so waiting for them to leave would
// only delay the same cut.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	ln := p.ln
	for c := range p.open {
		c.Close()
	}
	p.mu.Unlock()
	if ln != nil {
		ln.Close()
		<-p.served
	}
	p.wg.Wait()
	return nil
}

func (p *Proxy) serve(ln net.Listener) {
	for {
		client, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Anything else (out of file descriptors, say) passes; keep
			// serving after a pause, as net/http does.
			p.log.Warn("faultproxy: accept failed; retrying", "err", err)
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if !p.track(client) {
			client.Close()
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.handle(client)
		}()
	}
}

// track registers c for Close; it reports false once the proxy is closed.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.open[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.open, c)
	delete(p.sessions, c)
	delete(p.held, c)
	p.mu.Unlock()
	c.Close()
}

// admit returns the cut in force for a new client connection; under
// Blackhole it records the connection as held, for Heal to close.
func (p *Proxy) admit(client net.Conn) Outage {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.outage == Blackhole {
		p.held[client] = struct{}{}
	}
	return p.outage
}

// startSession records server as client's upstream connection. It reports
// false, and the session must not start, when the proxy is closed or a cut
// came while the upstream was being dialled: a session either exists
// before a Cut, which closes it, or is refused by it.
func (p *Proxy) startSession(client, server net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.outage != "" {
		return false
	}
	p.open[server] = struct{}{}
	p.sessions[client] = server
	return true
}

// handle proxies one client connection.
func (p *Proxy) handle(client net.Conn) {
	p.conns.Add(1)
	p.active.Add(1)
	defer p.active.Add(-1)
	defer p.untrack(client)
	log := p.log.With("client", client.RemoteAddr().String())

	switch p.admit(client) {
	case Refuse:
		p.refused.Add(1)
		return
	case Blackhole:
		// Nothing is answered and nothing read is kept, until Heal or
		// Close closes the connection or the client gives up.
		p.blackholed.Add(1)
		_, _ = io.Copy(io.Discard, client)
		return
	}

	d := net.Dialer{Timeout: p.cfg.DialTimeout}
	server, err := d.Dial("tcp", p.cfg.Upstream)
	if err != nil {
		// Closing the client without a word is what a dead server looks like.
		log.Warn("faultproxy: upstream unreachable", "upstream", p.cfg.Upstream, "err", err)
		return
	}
	if !p.startSession(client, server) {
		server.Close()
		return
	}
	defer p.untrack(server)

	c := &session{p: p, client: client, server: server, log: log}
	c.run()
}

// session is one proxied client connection and its upstream connection.
type session struct {
	p      *Proxy
	client net.Conn
	server net.Conn
	log    *slog.Logger

	// dropping is set, before an armed COMMIT is forwarded, to tell the
	// server-to-client pump to swallow the reply and cut the connection.
	dropping atomic.Bool
}

func (s *session) run() {
	upDone := make(chan struct{})
	go func() {
		defer close(upDone)
		s.serverToClient()
		// The server side ended (the server closed the connection, or a
		// drop was completed): the client must see its connection end too,
		// or it would wait on it forever.
		s.client.Close()
	}()
	if !s.clientToServer() {
		// The client went away, or the server could not be written to:
		// closing the server side ends the other pump. After a drop, that
		// pump ends by itself once the reply came.
		s.server.Close()
	}
	<-upDone
}

// clientToServer forwards client bytes to the server, watching for COMMITs.
// It reports true when it stopped after forwarding a COMMIT whose reply is to
// be dropped; the other pump then finishes the job.
func (s *session) clientToServer() (dropped bool) {
	sc := newScanner(s.p.currentPattern)
	buf := make([]byte, 64<<10)
	countedOpaque := false
	for {
		nr, rerr := s.client.Read(buf)
		b := buf[:nr]
		for len(b) > 0 {
			n, commit := sc.next(b)
			if commit {
				s.p.commits.Add(1)
				if s.p.takeDrop(sc.commitMatched) {
					s.dropping.Store(true)
					// The reply wait is bounded, so a server that never
					// answers cannot hold the connection open forever.
					_ = s.server.SetReadDeadline(time.Now().Add(s.p.cfg.ReplyTimeout))
					if _, err := s.server.Write(b[:n]); err != nil {
						s.log.Warn("faultproxy: forwarding an armed COMMIT failed", "err", err)
						s.server.Close()
					} else {
						s.log.Info("faultproxy: COMMIT forwarded, its reply will be dropped")
					}
					// Anything the client sent after the COMMIT belongs to a
					// connection that is about to die; it is not forwarded.
					return true
				}
			}
			if _, err := s.server.Write(b[:n]); err != nil {
				return false
			}
			b = b[n:]
		}
		if sc.opaque && !countedOpaque {
			countedOpaque = true
			s.p.opaque.Add(1)
			s.log.Info("faultproxy: connection uses TLS or compression; its COMMITs cannot be seen")
		}
		if rerr != nil {
			return false
		}
	}
}

// serverToClient forwards server bytes to the client until the dropping flag
// is set; from then on it reads the COMMIT's reply, discards it, and cuts the
// client connection.
func (s *session) serverToClient() {
	buf := make([]byte, 64<<10)
	var reply []byte
	for {
		nr, rerr := s.server.Read(buf)
		if s.dropping.Load() {
			reply = append(reply, buf[:nr]...)
			if len(reply) >= 5 && len(reply) >= 4+payloadLen(reply) {
				// The server answered: the COMMIT's outcome is final. The
				// client must never learn it.
				if reply[4] == 0xff {
					s.p.errDropped.Add(1)
					s.log.Warn("faultproxy: armed COMMIT was refused by the server; its ERR reply was dropped")
				} else {
					s.p.acksDropped.Add(1)
					s.log.Info("faultproxy: COMMIT acknowledgement dropped, client connection cut")
				}
				s.cut()
				return
			}
			if rerr != nil {
				var ne net.Error
				if errors.As(rerr, &ne) && ne.Timeout() {
					s.p.timeouts.Add(1)
					s.log.Warn("faultproxy: no reply to an armed COMMIT in time; cutting the connection", "timeout", s.p.cfg.ReplyTimeout)
				}
				s.cut()
				return
			}
			continue
		}
		if nr > 0 {
			if _, err := s.client.Write(buf[:nr]); err != nil {
				return
			}
		}
		if rerr != nil {
			if !errors.Is(rerr, io.EOF) && !errors.Is(rerr, net.ErrClosed) {
				s.log.Debug("faultproxy: upstream read ended", "err", rerr)
			}
			return
		}
	}
}

// cut closes both connections, as a network failure would from the client's
// point of view: its next read sees the connection end.
func (s *session) cut() {
	s.client.Close()
	s.server.Close()
}

// payloadLen returns the payload length in the packet header at the start of b
// (at least 3 bytes).
func payloadLen(b []byte) int {
	return int(b[0]) | int(b[1])<<8 | int(b[2])<<16
}
