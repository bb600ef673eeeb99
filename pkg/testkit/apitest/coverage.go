package apitest

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

// Uncovered checks the exercised operations against the document: it
// returns a line for each operation no exchange reached and except does not
// list, and for each entry of except that names no operation of the
// document or whose operation was exercised after all (an exception that no
// longer applies). except maps an operation key ("POST /admin/outbox/redrive")
// to the reason it is not exercised here.
func (s *Spec) Uncovered(except map[string]string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ops := s.Operations()
	var out []string
	for _, op := range ops {
		_, excused := except[op]
		switch {
		case s.hit[op] == 0 && !excused:
			out = append(out, fmt.Sprintf("%s: %s is never exercised by this package's tests", s.name, op))
		case s.hit[op] > 0 && excused:
			out = append(out, fmt.Sprintf("%s: %s is exercised; drop its exception (%q)", s.name, op, except[op]))
		}
	}
	for op := range except {
		if !slices.Contains(ops, op) {
			out = append(out, fmt.Sprintf("%s: the exception %s names no operation of the document", s.name, op))
		}
	}
	slices.Sort(out)
	return out
}

// OnlyRefused returns the exercised operations that never answered 2xx:
// covered, but only by their refusals (a 401 without the token, say).
func (s *Spec) OnlyRefused() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for op, n := range s.hit {
		if n > 0 && s.ok[op] == 0 {
			out = append(out, op)
		}
	}
	slices.Sort(out)
	return out
}

// Main is a package's TestMain: it runs the tests and then, if they passed
// and the run left none out (no -run, -skip or -list), fails the package
// when Uncovered reports anything. With -v it also names the operations
// that OnlyRefused reports. Exchanges checked against other
// documents in the same package are not counted: each document's coverage
// belongs to one package.
//
//	var spec = apitest.MustLoad("coupon.yaml")
//
//	func TestMain(m *testing.M) { apitest.Main(m, spec, nil) }
func Main(m *testing.M, spec *Spec, except map[string]string) {
	code := m.Run()
	if code == 0 && fullRun() {
		if missing := spec.Uncovered(except); len(missing) > 0 {
			fmt.Fprintln(os.Stderr, "apitest: the tests do not cover the document:\n  "+strings.Join(missing, "\n  "))
			code = 1
		}
		if refused := spec.OnlyRefused(); testing.Verbose() && len(refused) > 0 {
			fmt.Println("apitest: exercised only by refusals (no 2xx answer):\n  " + strings.Join(refused, "\n  "))
		}
	}
	os.Exit(code)
}

// fullRun reports whether every test of the package ran.
func fullRun() bool {
	for _, name := range []string{"test.run", "test.skip", "test.list"} {
		if f := flag.Lookup(name); f != nil && f.Value.String() != "" {
			return false
		}
	}
	return true
}
