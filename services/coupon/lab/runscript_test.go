package lab_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/oncemall/oncemall/pkg/testkit/composecheck"
)

// TestRunScriptRoutesCouponThroughTheFaultProxy: scripts/run.sh (`make
// run`, no Docker) starts the coupon service on the lab's fault proxy, as
// docker-compose.yml does (cmd/coupon's TestComposeDockerfileAndDocsMatch).
// It runs the script's programs function and reads the environment it
// gives the coupon service and the proxy.
func TestRunScriptRoutesCouponThroughTheFaultProxy(t *testing.T) {
	root := composecheck.RepoRoot(t)
	script, err := os.ReadFile(filepath.Join(root, "scripts", "run.sh"))
	if err != nil {
		t.Fatal(err)
	}
	// programs() runs to the first line that is a lone "}"; the rest of
	// the script would start the programs.
	body := string(script)
	start := strings.Index(body, "\nprograms() {\n")
	end := strings.Index(body[max(start, 0):], "\n}\n")
	if start < 0 || end < 0 {
		t.Fatal("scripts/run.sh has no programs() function")
	}
	cmd := exec.Command("bash", "-c", body[start:start+end+3]+"programs\n")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("run.sh programs: %v", err)
	}
	env := map[string][]string{} // program name → its extra environment
	for line := range strings.Lines(string(out)) {
		fields := strings.Split(strings.TrimSpace(line), "|")
		if len(fields) == 4 {
			env[fields[0]] = strings.Fields(fields[3])
		}
	}
	if !slices.Contains(env["coupon"], "MYSQL_ADDR=127.0.0.1:3307") {
		t.Errorf("run.sh starts coupon with %q, want MYSQL_ADDR=127.0.0.1:3307 (through the fault proxy)", env["coupon"])
	}
	if !slices.Contains(env["faultproxy"], "FAULTPROXY_ADDR=:3307") {
		t.Errorf("run.sh starts the fault proxy with %q, want FAULTPROXY_ADDR=:3307", env["faultproxy"])
	}
}
