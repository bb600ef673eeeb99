package main

import (
	"errors"
	"fmt"
	"go/token"
	"go/types"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/oncemall/oncemall/pkg/testkit/composecheck"
)

// maxNameLen keeps every name derived from the service's within its
// limits: the event ids "<name>-item-created-<id>" fit the outbox's 64
// characters, and the database name oncemall_<name> MySQL's 64.
const maxNameLen = 24

var validName = regexp.MustCompile(`^[a-z][a-z0-9]*$`)

// checkName reports why name cannot be a service's name, taken alone: its
// form, and the Go names it would shadow as the domain package's name.
func checkName(name string) error {
	switch {
	case name == "":
		return errors.New("NAME is required (make new-service NAME=inventory)")
	case !validName.MatchString(name):
		return fmt.Errorf("NAME %q: want lowercase letters and digits, starting with a letter", name)
	case len(name) > maxNameLen:
		return fmt.Errorf("NAME %q: longer than %d characters", name, maxNameLen)
	case token.IsKeyword(name):
		return fmt.Errorf("NAME %q is a Go keyword, and the domain package is named after the service", name)
	case types.Universe.Lookup(name) != nil:
		return fmt.Errorf("NAME %q is a predeclared Go identifier, which the domain package's name would shadow", name)
	}
	reserved, err := reservedNames()
	if err != nil {
		return fmt.Errorf("read the templates: %w", err)
	}
	if slices.Contains(reserved, name) {
		return fmt.Errorf("NAME %q is the name of a package the service's code imports or contains", name)
	}
	return nil
}

// checkNameFree reports a service, compose service or event file that
// already has name in the repository at root.
func checkNameFree(root, name string, compose *composecheck.File) error {
	for _, path := range []string{filepath.Join("services", name), filepath.Join("pkg", "events", name+".go")} {
		if _, err := os.Stat(filepath.Join(root, path)); err == nil {
			return fmt.Errorf("NAME %q: %s exists already", name, path)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	if _, ok := compose.Services[name]; ok {
		return fmt.Errorf("NAME %q: docker-compose.yml has a service of that name", name)
	}
	return nil
}

// reservedNames are the names the domain package must not take: the
// packages the templates import (a file importing two packages of one name
// does not compile), the packages of the service's shape, and main.
func reservedNames() ([]string, error) {
	names := []string{"main", "internal", "cmd", "migrations", "jobs", "lab"}
	imp := regexp.MustCompile(`(?m)^\s*(?:[A-Za-z_]\w*\s+)?"([^"]+)"$`)
	err := fs.WalkDir(templates, "template", func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir():
			if path.Base(path.Dir(p)) == "internal" && d.Name() != "NAME" {
				names = append(names, d.Name())
			}
			return nil
		}
		b, err := templates.ReadFile(p)
		for _, m := range imp.FindAllStringSubmatch(string(b), -1) {
			if !strings.Contains(m[1], "{{") {
				names = append(names, importName(m[1]))
			}
		}
		return err
	})
	return names, err
}

// importName is the name a package is imported under unless renamed: the
// last element of its path, or the one before a major-version suffix,
// without a "go-" prefix or ".go" suffix (redis for
// github.com/redis/go-redis/v9, nats for github.com/nats-io/nats.go).
func importName(importPath string) string {
	elems := strings.Split(importPath, "/")
	last := elems[len(elems)-1]
	if len(elems) > 1 && majorVersion.MatchString(last) {
		last = elems[len(elems)-2]
	}
	return strings.TrimSuffix(strings.TrimPrefix(last, "go-"), ".go")
}

var majorVersion = regexp.MustCompile(`^v[0-9]+$`)

// minPort is the port of the first generated service: order, coupon and
// payment have 8081 to 8083.
const minPort = 8084

var declaredPort = regexp.MustCompile(`(?m)^\s*Port:\s*([0-9]+),`)

// choosePort returns port when it is free, or with port 0 the next port
// after the highest one a service declares (minPort when none does) that
// docker-compose.yml does not publish.
func choosePort(root string, port int, compose *composecheck.File) (int, error) {
	declared, err := declaredPorts(root)
	if err != nil {
		return 0, err
	}
	taken := map[int]string{}
	for name, svc := range compose.Services {
		for _, spec := range svc.Ports {
			// "127.0.0.1:${ORDER_PORT:-8081}:8081": the host port by
			// default and the container's are both the service's.
			pp, err := composecheck.ParsePort(spec)
			if err != nil {
				return 0, fmt.Errorf("docker-compose.yml's %s: %w", name, err)
			}
			for _, n := range []string{pp.HostDefault, pp.Container} {
				if p, err := strconv.Atoi(n); err == nil {
					taken[p] = "docker-compose.yml's " + name
				}
			}
		}
	}
	for p, who := range declared {
		taken[p] = who
	}
	if port != 0 {
		if port < 1024 || port > 65535 {
			return 0, fmt.Errorf("PORT %d: want 1024 to 65535", port)
		}
		if who, ok := taken[port]; ok {
			return 0, fmt.Errorf("PORT %d is taken by %s", port, who)
		}
		return port, nil
	}
	next := minPort
	for p := range declared {
		next = max(next, p+1)
	}
	for ; next <= 65535; next++ {
		if _, ok := taken[next]; !ok {
			return next, nil
		}
	}
	return 0, errors.New("no free port above the declared ones")
}

// declaredPorts reads the Port of every service's declaration: in
// services/*/internal/assembly (the shape) or services/*/cmd/*/main.go.
func declaredPorts(root string) (map[int]string, error) {
	var files []string
	for _, pattern := range []string{"services/*/cmd/*/main.go", "services/*/internal/assembly/*.go"} {
		m, err := filepath.Glob(filepath.Join(root, filepath.FromSlash(pattern)))
		if err != nil {
			return nil, err
		}
		files = append(files, m...)
	}
	ports := map[int]string{}
	for _, path := range files {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		for _, m := range declaredPort.FindAllSubmatch(b, -1) {
			p, err := strconv.Atoi(string(m[1]))
			if err != nil {
				return nil, fmt.Errorf("%s: Port %s: %w", path, m[1], err)
			}
			rel, _ := filepath.Rel(root, path)
			ports[p] = rel
		}
	}
	return ports, nil
}
