package smoke_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/composecheck"
	"github.com/oncemall/oncemall/pkg/testenv"
)

var services = []string{"order", "coupon", "payment"}

var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "oncemall-smoke-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

var (
	buildOnce sync.Map // service name → *sync.Once
	buildErrs sync.Map // service name → error
)

// binary builds cmd/<svc> once per test run and returns its path.
func binary(t *testing.T, svc string) string {
	t.Helper()
	once, _ := buildOnce.LoadOrStore(svc, &sync.Once{})
	once.(*sync.Once).Do(func() {
		root, err := composecheck.Root()
		if err == nil {
			cmd := exec.Command("go", "build", "-o", filepath.Join(binDir, svc), "./services/"+svc+"/cmd/"+svc)
			cmd.Dir = root
			if out, berr := cmd.CombinedOutput(); berr != nil {
				err = fmt.Errorf("go build %s: %v\n%s", svc, berr, out)
			}
		}
		if err != nil {
			buildErrs.Store(svc, err)
		}
	})
	if err, ok := buildErrs.Load(svc); ok {
		t.Fatal(err)
	}
	return filepath.Join(binDir, svc)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// lockedBuffer collects a process's output while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

type process struct {
	cmd            *exec.Cmd
	addr           string
	stdout, stderr *lockedBuffer
	done           chan error
}

// start runs svc with its own throwaway database, a free port and env
// applied on top of the test's environment.
func start(t *testing.T, svc string, env ...string) *process {
	t.Helper()
	bin := binary(t, svc)
	_, db := testenv.NewDatabase(t)
	p := &process{addr: freeAddr(t), stdout: &lockedBuffer{}, stderr: &lockedBuffer{}, done: make(chan error, 1)}
	p.cmd = exec.Command(bin)
	p.cmd.Env = append(os.Environ(), append([]string{"HTTP_ADDR=" + p.addr, "MYSQL_DATABASE=" + db, "STARTUP_TIMEOUT=30s", "SHUTDOWN_TIMEOUT=10s"}, env...)...)
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("%s stdout:\n%s\nstderr:\n%s", svc, p.stdout, p.stderr)
		}
	})
	return p
}

// waitStatus polls path until it answers want, the process exits, or 60s pass.
func (p *process) waitStatus(t *testing.T, path string, want int) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("process exited before %s answered %d: %v", path, want, err)
		default:
		}
		resp, err := http.Get("http://" + p.addr + path)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == want {
				return string(body)
			}
			last = fmt.Sprintf("%d %s", resp.StatusCode, body)
		} else {
			last = err.Error()
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s never answered %d; last: %s", path, want, last)
	return ""
}

// stop sends SIGTERM and asserts a clean exit with the shutdown logged.
func (p *process) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v, want status 0", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no exit within 30s of SIGTERM")
	}
	if !strings.Contains(p.stdout.String(), `"msg":"shutdown complete"`) {
		t.Fatal(`no "shutdown complete" log line`)
	}
}

func TestServicesStartReadyAndStopCleanly(t *testing.T) {
	for _, svc := range services {
		t.Run(svc, func(t *testing.T) {
			t.Parallel()
			p := start(t, svc)
			p.waitStatus(t, "/readyz", http.StatusOK)
			p.waitStatus(t, "/healthz", http.StatusOK)
			p.stop(t)
		})
	}
}

func TestBadConfigExitsNamingTheVariable(t *testing.T) {
	for _, env := range []string{"HTTP_ADDR=:abc", "MYSQL_MAX_OPEN_CONNS=x", "SHUTDOWN_TIMEOUT=soon"} {
		name, _, _ := strings.Cut(env, "=")
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, binary(t, "order"))
			cmd.Env = append(os.Environ(), env)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() == 0 {
				t.Fatalf("%s: exit %v, want a non-zero status", env, err)
			}
			if !strings.Contains(stderr.String(), name) {
				t.Fatalf("%s: stderr does not name %s:\n%s", env, name, stderr.String())
			}
		})
	}
}

func TestDeadRedisMakesReadyzNameRedis(t *testing.T) {
	p := start(t, "coupon", "REDIS_ADDR="+freeAddr(t))
	body := p.waitStatus(t, "/readyz", http.StatusServiceUnavailable)
	if !strings.Contains(body, "redis") || strings.Contains(body, `"mysql"`) || strings.Contains(body, `"nats"`) {
		t.Fatalf("/readyz body %s, want redis (only) named", body)
	}
	p.waitStatus(t, "/healthz", http.StatusOK)
	p.stop(t)
}

func TestUnknownCommandFails(t *testing.T) {
	out, err := exec.Command(binary(t, "payment"), "frobnicate").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "frobnicate") {
		t.Fatalf("unknown command: %v %s", err, out)
	}
}

func TestMigrateCommand(t *testing.T) {
	_, db := testenv.NewDatabase(t)
	cmd := exec.Command(binary(t, "payment"), "migrate")
	cmd.Env = append(os.Environ(), "MYSQL_DATABASE="+db)
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "migrations applied") {
		t.Fatalf("payment migrate: %v\n%s", err, out)
	}
}
