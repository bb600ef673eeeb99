package testenv

import (
	"errors"
	"net"
	"sync"
	"testing"
	"time"
)

// Forwarder is a TCP forwarder to a dependency that a test can take down and
// bring back on the same address: the dependency becomes unreachable for
// the code under test while the shared server, which other tests use, keeps
// running.
type Forwarder struct {
	t        testing.TB
	upstream string
	addr     string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
	// flowing is closed while bytes are forwarded; Stall replaces it with
	// an open channel that the copies wait on until Resume closes it.
	flowing chan struct{}
	wg      sync.WaitGroup
}

// NewForwarder listens on a free 127.0.0.1 port and forwards each connection
// to upstream. It is closed when the test ends.
func NewForwarder(t testing.TB, upstream string) *Forwarder {
	t.Helper()
	f := &Forwarder{t: t, upstream: upstream, addr: "127.0.0.1:0", conns: map[net.Conn]struct{}{}, flowing: make(chan struct{})}
	close(f.flowing)
	f.Reopen()
	t.Cleanup(func() {
		f.Close()
		f.wg.Wait()
	})
	return f
}

// Addr is the host:port to point the code under test at.
func (f *Forwarder) Addr() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.addr
}

// Close stops listening and cuts every open connection, as a stopped server
// would: connections in use fail, and new ones are refused until Reopen.
// It ends a Stall.
func (f *Forwarder) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.resumeLocked()
	if f.ln != nil {
		f.ln.Close()
		f.ln = nil
	}
	for c := range f.conns {
		c.Close()
	}
}

// Stall stops forwarding without closing anything, as a hung server or a
// network partition would: what either side sends waits, so statements in
// flight hang, and new connections are accepted but get no answer, until
// Resume (or Close).
func (f *Forwarder) Stall() {
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-f.flowing:
		f.flowing = make(chan struct{})
	default: // stalled already
	}
}

// Resume forwards again, first what Stall held back.
func (f *Forwarder) Resume() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.resumeLocked()
}

func (f *Forwarder) resumeLocked() {
	select {
	case <-f.flowing:
	default:
		close(f.flowing)
	}
}

// flow returns a channel that is closed while bytes may be forwarded.
func (f *Forwarder) flow() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.flowing
}

// Reopen listens again on the same address after Close.
func (f *Forwarder) Reopen() {
	f.t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ln != nil {
		return
	}
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		f.t.Fatalf("testenv: forwarder to %s: %v", f.upstream, err)
	}
	f.ln, f.addr = ln, ln.Addr().String()
	f.wg.Go(func() { f.accept(ln) })
}

func (f *Forwarder) accept(ln net.Listener) {
	for {
		client, err := ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue
		}
		f.wg.Go(func() { f.forward(client) })
	}
}

// forward copies both ways until either side ends, then closes both.
func (f *Forwarder) forward(client net.Conn) {
	server, err := net.DialTimeout("tcp", f.upstream, 2*time.Second)
	if err != nil {
		client.Close()
		return
	}
	if !f.track(client, server) {
		return
	}
	defer f.untrack(client, server)
	done := make(chan struct{}, 2)
	go func() { f.copy(server, client); done <- struct{}{} }()
	go func() { f.copy(client, server); done <- struct{}{} }()
	<-done
	client.Close()
	server.Close()
	<-done
}

// copy copies src to dst until either fails, holding each read back while
// the forwarder is stalled.
func (f *Forwarder) copy(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			<-f.flow()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// track records the pair, or closes it if the forwarder was closed while the
// upstream was being dialled.
func (f *Forwarder) track(conns ...net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ln == nil {
		for _, c := range conns {
			c.Close()
		}
		return false
	}
	for _, c := range conns {
		f.conns[c] = struct{}{}
	}
	return true
}

func (f *Forwarder) untrack(conns ...net.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range conns {
		delete(f.conns, c)
	}
}
