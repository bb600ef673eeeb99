// Package proctest runs the repository's programs as real processes in
// tests: it builds a main package once per test binary, starts it with
// environment overrides on a free port, polls its HTTP endpoints with a
// deadline, stops it with SIGTERM asserting exit status 0, and prints its
// output when the test fails. The smoke and end-to-end tests share it.
package proctest

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/oncemall/oncemall/pkg/testkit/composecheck"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

var (
	dirOnce sync.Once
	dir     string
	dirErr  error

	builds sync.Map // package dir → *build
)

type build struct {
	once sync.Once
	done atomic.Bool // set once path or err is
	path string
	err  error
}

// buildAllMu keeps BuildAll calls from compiling the same packages twice.
var buildAllMu sync.Mutex

// Main runs the tests and removes the built binaries; call it from TestMain.
// The programs it starts run in the lab environment (ONCEMALL_ENV=lab, the
// tests' own secrets and variants allowed) unless a test says otherwise.
func Main(m *testing.M) {
	if _, set := os.LookupEnv("ONCEMALL_ENV"); !set {
		os.Setenv("ONCEMALL_ENV", "lab")
	}
	code := m.Run()
	if dir != "" {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

// Build compiles the main package at pkgDir (relative to the repository
// root, e.g. "services/order/cmd/order") once per test binary and returns
// the executable's path.
func Build(t testing.TB, pkgDir string) string {
	t.Helper()
	binDir(t)
	v, _ := builds.LoadOrStore(pkgDir, &build{})
	b := v.(*build)
	b.once.Do(func() {
		defer b.done.Store(true)
		root, err := composecheck.Root()
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, strings.ReplaceAll(pkgDir, "/", "_"))
		cmd := exec.Command("go", "build", "-o", b.path, "./"+pkgDir)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build ./%s: %v\n%s", pkgDir, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// BuildAll compiles the main packages at pkgDirs (as Build names them; their
// last path elements must differ) that are not built yet, with one go
// command, which compiles their shared dependencies once and the packages in
// parallel, and returns their executables' paths in the order of pkgDirs.
// A later Build of any of them returns at once.
func BuildAll(t testing.TB, pkgDirs ...string) []string {
	t.Helper()
	binDir(t)
	buildAllMu.Lock()
	defer buildAllMu.Unlock()
	var todo []string
	for _, p := range pkgDirs {
		if v, ok := builds.Load(p); ok && v.(*build).done.Load() {
			continue
		}
		todo = append(todo, p)
	}
	if len(todo) > 0 {
		root, err := composecheck.Root()
		if err != nil {
			t.Fatal(err)
		}
		out, err := os.MkdirTemp(dir, "all-")
		if err != nil {
			t.Fatal(err)
		}
		args := []string{"build", "-o", out + string(filepath.Separator)}
		for _, p := range todo {
			args = append(args, "./"+p)
		}
		cmd := exec.Command("go", args...)
		cmd.Dir = root
		if msg, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, msg)
		}
		for _, p := range todo {
			v, _ := builds.LoadOrStore(p, &build{})
			b := v.(*build)
			b.once.Do(func() {
				b.path = filepath.Join(out, filepath.Base(p))
				b.done.Store(true)
			})
		}
	}
	paths := make([]string, len(pkgDirs))
	for i, p := range pkgDirs {
		paths[i] = Build(t, p)
	}
	return paths
}

// binDir makes the directory the binaries are built into, once.
func binDir(t testing.TB) {
	t.Helper()
	dirOnce.Do(func() { dir, dirErr = os.MkdirTemp("", "oncemall-proctest-") })
	if dirErr != nil {
		t.Fatal(dirErr)
	}
}

// Process is a started program.
type Process struct {
	// Name labels the process in messages and the dumped logs.
	Name string
	// Addr is the host:port it was told to listen on (may be empty).
	Addr string

	cmd            *exec.Cmd
	stdout, stderr *testenv.SyncBuffer
	done           chan error
}

// Start runs bin with env applied on top of the test's environment. addr is
// where it listens (recorded for the HTTP helpers; the caller puts it in
// env under the program's own variable). At cleanup a still running
// process is killed, and if the test failed its stdout and stderr are
// logged.
func Start(t testing.TB, name, bin, addr string, env ...string) *Process {
	t.Helper()
	p := &Process{Name: name, Addr: addr, stdout: &testenv.SyncBuffer{}, stderr: &testenv.SyncBuffer{}, done: make(chan error, 1)}
	p.cmd = exec.Command(bin)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		if !p.exited() {
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("%s stdout:\n%s\n%s stderr:\n%s", name, p.stdout, name, p.stderr)
		}
	})
	return p
}

// exited reports whether the process has ended (its Wait returned).
func (p *Process) exited() bool {
	select {
	case err := <-p.done:
		p.done <- err
		return true
	default:
		return false
	}
}

// Stdout returns everything the process wrote to stdout so far.
func (p *Process) Stdout() string { return p.stdout.String() }

// URL returns http://Addr + path.
func (p *Process) URL(path string) string { return "http://" + p.Addr + path }

// pollClient bounds each poll, so a hung endpoint is polled again.
var pollClient = &http.Client{Timeout: 5 * time.Second}

// WaitStatus polls GET path until it answers want, the process exits, or
// timeout passes; it returns the body of the matching answer.
func (p *Process) WaitStatus(t testing.TB, path string, want int, timeout time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		if p.exited() {
			err := <-p.done
			p.done <- err
			t.Fatalf("%s exited before %s answered %d: %v", p.Name, path, want, err)
		}
		resp, err := pollClient.Get(p.URL(path))
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
	t.Fatalf("%s: %s never answered %d within %s; last: %s", p.Name, path, want, timeout, last)
	return ""
}

// Stop sends SIGTERM and asserts exit status 0 within timeout.
func (p *Process) Stop(t testing.TB, timeout time.Duration) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("%s: SIGTERM: %v", p.Name, err)
	}
	select {
	case err := <-p.done:
		p.done <- err
		if err != nil {
			t.Fatalf("%s: exit after SIGTERM: %v, want status 0", p.Name, err)
		}
	case <-time.After(timeout):
		t.Fatalf("%s: no exit within %s of SIGTERM", p.Name, timeout)
	}
}

// ToolRun is an outside program Tool started.
type ToolRun struct {
	out  *testenv.SyncBuffer
	done chan error
}

// Exited reports whether the program has ended, and how.
func (r *ToolRun) Exited() (bool, error) {
	select {
	case err := <-r.done:
		r.done <- err
		return true, err
	default:
		return false, nil
	}
}

// Output returns what the program wrote so far, stdout and stderr.
func (r *ToolRun) Output() string { return r.out.String() }

// Tool starts cmd, an outside program the test needs (Prometheus,
// Jaeger), with its stdout and stderr captured. At cleanup it is asked to
// stop with SIGTERM and killed if it has not within grace; if the test
// failed, what it wrote is logged under name.
func Tool(t testing.TB, name string, cmd *exec.Cmd, grace time.Duration) *ToolRun {
	t.Helper()
	r := &ToolRun{out: &testenv.SyncBuffer{}, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = r.out, r.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { r.done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-r.done:
		case <-time.After(grace):
			_ = cmd.Process.Kill()
			<-r.done
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", name, r.out)
		}
	})
	return r
}
