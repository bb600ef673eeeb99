package testenv

import (
	"net"
	"os"
	"os/exec"
	"testing"
	"time"
)

// NATSServer is a nats-server of the test's own, for what the shared server
// must not be put through: stopped and started again (an outage), or run
// with settings of the test's (required credentials, say).
type NATSServer struct {
	t    testing.TB
	bin  string
	addr string
	args []string
	cmd  *exec.Cmd
}

// NewNATSServer starts nats-server on a free 127.0.0.1 port with args after
// the address flags (e.g. "-js", "-sd", t.TempDir()), waits until it
// accepts connections, and kills it when the test ends. The binary is
// nats-server from PATH, else /usr/sbin/nats-server, where the Debian
// package puts it.
func NewNATSServer(t testing.TB, args ...string) *NATSServer {
	t.Helper()
	bin, err := exec.LookPath("nats-server")
	if err != nil {
		bin = "/usr/sbin/nats-server"
	}
	s := &NATSServer{t: t, bin: bin, addr: FreeAddr(t), args: args}
	t.Cleanup(s.Stop)
	s.Start()
	return s
}

// Addr is the server's host:port.
func (s *NATSServer) Addr() string { return s.addr }

// URL is the server's nats:// URL, without credentials.
func (s *NATSServer) URL() string { return "nats://" + s.addr }

// Start starts the server again after Stop, on the same address and with
// the same arguments (so the same JetStream store, if args name one), and
// waits until it accepts connections. It does nothing while the server runs.
func (s *NATSServer) Start() {
	s.t.Helper()
	if s.cmd != nil {
		return
	}
	host, port, _ := net.SplitHostPort(s.addr)
	cmd := exec.Command(s.bin, append([]string{"-a", host, "-p", port}, s.args...)...)
	if testing.Verbose() {
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	}
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("testenv: start %s: %v", s.bin, err)
	}
	s.cmd = cmd
	WaitFor(s.t, 10*time.Second, "nats-server of the test to answer at "+s.addr, func() bool {
		c, err := net.DialTimeout("tcp", s.addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

// Stop kills the server, as a crash or a lost host would end it: clients
// see their connections cut and new ones refused until Start.
func (s *NATSServer) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}
