package k8s

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"sigs.k8s.io/yaml"
)

// program is one of the repository's programs as the manifests run it.
type program struct {
	// image is its repository in the manifests, oncemall/order.
	image string
	// dir is its main package, the PROGRAM build argument.
	dir string
	// vars are the variables it reads.
	vars map[string]bool
	expectation
}

// expectation is what the manifests must do for a program, beyond what
// every program gets.
type expectation struct {
	replicas int32
	// readiness is its readiness probe's path.
	readiness string
	// shutdown is how long it takes to stop after SIGTERM when it has no
	// SHUTDOWN_TIMEOUT to read.
	shutdown time.Duration
	// memoryBudget is the RSS it may reach (0: none stated); its memory
	// limit must be above it.
	memoryBudget int64
	// compose names its service in docker-compose.yml when the program has
	// no --help to list its variables.
	compose string
}

// service is what every oncemall service gets: three replicas, readiness
// that checks its dependencies, and the 150 MB that issue 17 allows each
// at 200 purchases/s.
var service = expectation{replicas: 3, readiness: "/readyz", memoryBudget: 150_000_000}

// expectations are keyed by image. A program built here whose image has no
// entry fails the test, so a new one is decided on, not skipped.
var expectations = map[string]expectation{
	"oncemall/order":   service,
	"oncemall/coupon":  service,
	"oncemall/payment": service,
	// The simulator keeps its charges in memory, so one replica; it has no
	// dependencies, so /healthz is its readiness; it gives its HTTP server
	// 10s to stop (services/psp-sim/cmd/psp-sim/main.go); and serving is
	// all it does with any argument, --help included.
	"oncemall/psp-sim": {replicas: 1, readiness: "/healthz", shutdown: 10 * time.Second, compose: "psp-sim"},
}

// natsServers is the size of the JetStream cluster: three, the smallest
// that survives the loss of one server with a majority left.
const natsServers = 3

// runtimeVars are read by the Go runtime, not by the program's
// configuration, and may be set on any container.
var runtimeVars = map[string]bool{"GOMEMLIMIT": true, "GOMAXPROCS": true, "GOGC": true}

// loadPrograms returns the programs of the README's image table with the
// variables each reads. The first run after a change compiles the
// services, so it runs once per test binary.
var loadPrograms = sync.OnceValues(func() (map[string]*program, error) {
	c, err := readContract("README.md")
	if err != nil {
		return nil, err
	}
	root, err := repoRoot()
	if err != nil {
		return nil, err
	}
	progs := map[string]*program{}
	for image, dir := range c.images {
		x, ok := expectations[image]
		if !ok {
			return nil, fmt.Errorf("README.md names the image %s, which has no entry in expectations (programs_test.go)", image)
		}
		if _, err := os.Stat(filepath.Join(root, dir, "main.go")); err != nil {
			return nil, fmt.Errorf("README.md builds %s from %s, which has no main.go: %w", image, dir, err)
		}
		progs[image] = &program{image: image, dir: dir, expectation: x}
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		errs    []error
		compose *composeFile
	)
	for _, p := range progs {
		if p.compose == "" {
			// go run caches the executables it builds, so only the first
			// run after a change links; the services run at once.
			wg.Go(func() {
				vars, err := helpVars(root, p.dir)
				mu.Lock()
				defer mu.Unlock()
				p.vars = vars
				errs = append(errs, err)
			})
			continue
		}
		if compose == nil {
			if compose, err = readCompose(filepath.Join(root, "docker-compose.yml")); err != nil {
				return nil, err
			}
		}
		svc, ok := compose.Services[p.compose]
		if !ok {
			return nil, fmt.Errorf("docker-compose.yml has no service %s to list the variables of %s", p.compose, p.image)
		}
		p.vars = map[string]bool{}
		for name := range svc.Environment {
			p.vars[name] = true
		}
	}
	wg.Wait()
	return progs, errors.Join(errs...)
})

// helpVars runs the main package dir with --help from the repository
// root and returns the variables it lists under "Environment", one a line:
// two spaces, the name, its default, its meaning.
func helpVars(root, dir string) (map[string]bool, error) {
	// A program that ignored --help would serve until killed: bound it.
	// The first run on a cold build cache compiles, hence the margin.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "run", "./"+dir, "--help")
	cmd.Dir = root
	// The repository's workspace, whatever the test was run with: the main
	// packages are in other modules.
	cmd.Env = append(os.Environ(), "GOWORK="+filepath.Join(root, "go.work"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go run ./%s --help: %w\n%s", dir, err, stderr.String())
	}
	_, list, ok := strings.Cut(string(out), "\nEnvironment (variable, default, meaning):\n")
	if !ok {
		return nil, fmt.Errorf("%s --help prints no \"Environment (variable, default, meaning):\" section; has its format changed?\n%s", dir, out)
	}
	vars := map[string]bool{}
	for line := range strings.SplitSeq(list, "\n") {
		if !strings.HasPrefix(line, "  ") {
			break
		}
		name := strings.Fields(line)[0]
		if !envName.MatchString(name) {
			return nil, fmt.Errorf("%s --help: %q does not start with a variable name", dir, line)
		}
		vars[name] = true
	}
	if len(vars) == 0 {
		return nil, fmt.Errorf("%s --help lists no variables", dir)
	}
	return vars, nil
}

var envName = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)

// composeFile is the part of docker-compose.yml read here.
type composeFile struct {
	Services map[string]struct {
		Environment map[string]any `json:"environment"`
	} `json:"services"`
}

func readCompose(path string) (*composeFile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f composeFile
	if err := yaml.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &f, nil
}

// repoRoot is the nearest directory above this one that holds go.work.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.work above the working directory")
		}
		dir = parent
	}
}
