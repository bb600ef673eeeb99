package faultproxy

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

// These tests put a scripted upstream behind the proxy to reach the cases a
// real server does not produce on demand: a COMMIT answered with ERR, a reply
// that never comes, a reply trickling in byte by byte, a TLS client.

// scriptedUpstream accepts one connection, reads the handshake response and
// one command, then calls answer with the connection.
func scriptedUpstream(t *testing.T, answer func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	testenv.Must(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		for range 2 {
			if _, err := readPacket(c); err != nil {
				return
			}
		}
		answer(c)
	}()
	return ln.Addr().String()
}

func readPacket(r io.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	p := make([]byte, int(hdr[0])|int(hdr[1])<<8|int(hdr[2])<<16)
	_, err := io.ReadFull(r, p)
	return p, err
}

func newTestProxy(t *testing.T, upstream string) (*Proxy, string) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Addr, cfg.Upstream, cfg.ReplyTimeout = "127.0.0.1:0", upstream, 300*time.Millisecond
	p, err := New(cfg, testenv.Logger(t), prometheus.NewRegistry())
	testenv.Must(t, err)
	addr, err := p.Listen()
	testenv.Must(t, err)
	t.Cleanup(func() { _ = p.Close() })
	return p, addr.String()
}

// sendCommit connects through the proxy as a client with caps, sends a
// handshake response and a COMMIT, and returns what the client then reads
// until the connection ends.
func sendCommit(t *testing.T, addr string, caps uint32) []byte {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	testenv.Must(t, err)
	defer c.Close()
	_, err = c.Write(append(handshake(caps), query("COMMIT")...))
	testenv.Must(t, err)
	testenv.Must(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("client read: %v (a cut connection must end with EOF, not hang)", err)
	}
	return got
}

var (
	okPacket  = []byte{7, 0, 0, 1, 0x00, 0, 0, 2, 0, 0, 0}
	errPacket = []byte{9, 0, 0, 1, 0xff, 0x25, 0x05, '#', 'H', 'Y', '0', '0', '0'}
)

func TestDroppedReplyArrivingInPieces(t *testing.T) {
	upstream := scriptedUpstream(t, func(c net.Conn) {
		for _, b := range okPacket {
			c.Write([]byte{b})
			time.Sleep(2 * time.Millisecond)
		}
		time.Sleep(time.Second) // the proxy must cut, not wait for the server to close
	})
	p, addr := newTestProxy(t, upstream)
	p.Arm(1)
	if got := sendCommit(t, addr, plainCaps); len(got) != 0 {
		t.Fatalf("client received %x, want nothing", got)
	}
	if st := p.Stats(); st.AcksDropped != 1 || st.CommitsSeen != 1 {
		t.Fatalf("stats = %+v, want 1 ack dropped", st)
	}
}

func TestDroppedErrorReplyIsCountedApart(t *testing.T) {
	upstream := scriptedUpstream(t, func(c net.Conn) {
		c.Write(errPacket)
		time.Sleep(time.Second)
	})
	p, addr := newTestProxy(t, upstream)
	p.Arm(1)
	if got := sendCommit(t, addr, plainCaps); len(got) != 0 {
		t.Fatalf("client received %x, want nothing", got)
	}
	if st := p.Stats(); st.ErrorRepliesDropped != 1 || st.AcksDropped != 0 {
		t.Fatalf("stats = %+v, want 1 error reply dropped and no ack", st)
	}
}

func TestArmedCommitWithoutReplyIsCutAfterTheTimeout(t *testing.T) {
	upstream := scriptedUpstream(t, func(c net.Conn) {
		time.Sleep(3 * time.Second)
	})
	p, addr := newTestProxy(t, upstream)
	p.Arm(1)
	start := time.Now()
	sendCommit(t, addr, plainCaps)
	if waited := time.Since(start); waited > 2500*time.Millisecond {
		t.Fatalf("client waited %v: the reply timeout did not cut the connection", waited)
	}
	if st := p.Stats(); st.ReplyTimeouts != 1 || st.AcksDropped != 0 {
		t.Fatalf("stats = %+v, want 1 reply timeout", st)
	}
}

func TestUnarmedReplyIsForwardedByteForByte(t *testing.T) {
	upstream := scriptedUpstream(t, func(c net.Conn) { c.Write(okPacket) })
	p, addr := newTestProxy(t, upstream)
	if got := sendCommit(t, addr, plainCaps); !bytes.Equal(got, okPacket) {
		t.Fatalf("client received %x, want %x", got, okPacket)
	}
	// As above, the reply may overtake the proxy's count of the COMMIT.
	if st := settledStats(p, func(st Stats) bool { return st.CommitsSeen > 0 }); st.CommitsSeen != 1 || st.AcksDropped != 0 {
		t.Fatalf("stats = %+v", st)
	}
}

// settledStats polls the proxy's stats until ready says they are complete
// or two seconds pass, and returns the last reading.
func settledStats(p *Proxy, ready func(Stats) bool) Stats {
	deadline := time.Now().Add(2 * time.Second)
	st := p.Stats()
	for !ready(st) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
		st = p.Stats()
	}
	return st
}

func TestTLSClientPassesThroughUnseen(t *testing.T) {
	upstream := scriptedUpstream(t, func(c net.Conn) { c.Write(okPacket) })
	p, addr := newTestProxy(t, upstream)
	p.Arm(1)
	if got := sendCommit(t, addr, plainCaps|capClientSSL); !bytes.Equal(got, okPacket) {
		t.Fatalf("client received %x, want the reply forwarded untouched", got)
	}
	// The scripted server answers without waiting for the client, so the
	// reply can reach the client before the proxy has read the client's
	// handshake and counted the connection as opaque: wait for the count.
	st := settledStats(p, func(st Stats) bool { return st.OpaqueConnections > 0 })
	if st.OpaqueConnections != 1 || st.CommitsSeen != 0 || st.Armed != 1 {
		t.Fatalf("stats = %+v, want 1 opaque connection, nothing seen, still armed", st)
	}
}
