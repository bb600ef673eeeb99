package e2e_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oncemall/oncemall/pkg/testkit/composecheck"
)

// readmeSection is the section of readmePage (it was the README's once)
// whose shell blocks a newcomer runs after `make run`, and readmeUser the
// customer they name.
const (
	readmePage    = "docs/purchase-flow.md"
	readmeSection = "## Buy something"
	readmeUser    = 42
)

// The ports `make run` gives the programs (scripts/run.sh), as the README's
// commands reach them.
var makeRunHosts = map[string]string{"order": "localhost:8081", "coupon": "localhost:8082", "payment": "localhost:8083", "psp-sim": "localhost:8090",
	"identity": "localhost:8084"}

// section returns the lines of readmePage's section named heading, up to
// the next section.
func section(t *testing.T, heading string) []string {
	t.Helper()
	root, err := composecheck.Root()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, readmePage))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	in := false
	for _, line := range strings.Split(string(raw), "\n") {
		switch {
		case line == heading:
			in = true
		case in && strings.HasPrefix(line, "## "):
			return out
		case in:
			out = append(out, line)
		}
	}
	if !in {
		t.Fatalf("%s has no %q section", readmePage, heading)
	}
	return out
}

// fenced returns the bodies of the blocks fenced as lang in lines, in order.
func fenced(lines []string, lang string) []string {
	var blocks []string
	var cur []string
	in := false
	for _, line := range lines {
		switch {
		case !in && line == "```"+lang:
			in, cur = true, nil
		case in && line == "```":
			in = false
			blocks = append(blocks, strings.Join(cur, "\n")+"\n")
		case in:
			cur = append(cur, line)
		}
	}
	return blocks
}

// TestReadmeBuySomethingIsComplete checks the section's shape without
// processes (readmeBuySomething, in TestPurchaseFlow, runs it): shell
// blocks that stock, issue, order, pay and check, each followed by the
// output it printed, which shows the order PAID and the coupon USED; and
// every address one of `make run`'s.
func TestReadmeBuySomethingIsComplete(t *testing.T) {
	lines := section(t, readmeSection)
	sh, text := fenced(lines, "sh"), fenced(lines, "text")
	if len(sh) < 3 || len(text) != len(sh) {
		t.Fatalf("%d sh blocks and %d text blocks, want at least 3 sh blocks, each with its output", len(sh), len(text))
	}
	all := strings.Join(sh, "")
	for _, step := range []string{"/admin/products", "/stock", "/admin/coupon-templates", "/admin/coupons", "/orders", "/payments", "/token", "Authorization: Bearer $TOKEN"} {
		if !strings.Contains(all, step) {
			t.Errorf("the commands never use %s", step)
		}
	}
	out := text[len(text)-1]
	for _, s := range []string{`"status":"PAID"`, `"status":"USED"`} {
		if !strings.Contains(out, s) {
			t.Errorf("the last output does not show %s:\n%s", s, out)
		}
	}
	rest := all
	for _, host := range makeRunHosts {
		rest = strings.ReplaceAll(rest, host, "")
	}
	if strings.Contains(rest, "localhost") || strings.Contains(rest, "127.0.0.1") {
		t.Errorf("the commands reach an address `make run` does not serve:\n%s", all)
	}
}

// readmeBuySomething runs the shell blocks of readmePage's "Buy something"
// section with bash against r's processes, the addresses changed to r's,
// as a newcomer runs them against `make run` (r has make run's tokens).
// All but the last block run once, in order, in one shell with set -eu;
// the last one, the check, runs until it shows the order PAID and the
// coupon USED (the README says "a moment later"). Then the databases must
// show one order of readmeUser, PAID, with the coupon's discount, its
// coupon USED by it, one payment, and two units gone from the stock.
func readmeBuySomething(t *testing.T, r *rig) {
	sh := fenced(section(t, readmeSection), "sh")
	if len(sh) < 2 {
		t.Fatalf("%d sh blocks in the README's %q, want the steps and a check", len(sh), readmeSection)
	}
	hosts := []string{}
	for name, host := range makeRunHosts {
		var p string
		switch name {
		case "order":
			p = r.order.Addr
		case "coupon":
			p = r.coupon.Addr
		case "payment":
			p = r.payment.Addr
		case "psp-sim":
			p = r.psp.Addr
		case "identity":
			p = r.identity.Addr
		}
		hosts = append(hosts, host, p)
	}
	rewrite := strings.NewReplacer(hosts...)
	steps := rewrite.Replace(strings.Join(sh[:len(sh)-1], ""))
	checkBlock := rewrite.Replace(sh[len(sh)-1])

	script := "set -eu -o pipefail\n" + steps + fmt.Sprintf(`
for try in $(seq 1 100); do
  out=$(
%s
  )
  case $out in *'"status":"PAID"'*'"status":"USED"'*) break ;; esac
  sleep 0.3
done
echo '@@check'
printf '%%s\n' "$out"
`, checkBlock)

	ctx, cancel := context.WithTimeout(context.Background(), 2*flowDeadline)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// The payment is charged without a simulator plan: keep the other
	// flows' plans from being filed in between.
	r.payMu.Lock()
	err := cmd.Run()
	r.payMu.Unlock()
	t.Logf("README commands:\n%s\nstdout:\n%s\nstderr:\n%s", script, &stdout, &stderr)
	if err != nil {
		t.Fatalf("README commands: %v", err)
	}
	_, last, ok := strings.Cut(stdout.String(), "@@check\n")
	if !ok {
		t.Fatal("the check block did not run")
	}
	for _, s := range []string{`"status":"PAID"`, `"status":"USED"`, `"available":8`} {
		if !strings.Contains(last, s) {
			t.Errorf("the check block printed no %s:\n%s", s, last)
		}
	}

	var orderNo string
	var total, discount, pay int64
	err = r.order.db.QueryRow("SELECT order_no, total_amount, discount_amount, pay_amount FROM orders WHERE user_id = ? AND status = 'PAID'", readmeUser).
		Scan(&orderNo, &total, &discount, &pay)
	if err != nil {
		t.Fatalf("the README's paid order: %v", err)
	}
	if total != 3000 || discount != 500 || pay != 2500 {
		t.Errorf("the README's order: total %d, discount %d, pay %d; want 3000 - 500 = 2500", total, discount, pay)
	}
	counts(t,
		check{"the README user's orders", r.order.db, "SELECT COUNT(*) FROM orders WHERE user_id = ?", []any{readmeUser}, 1},
		check{"reservations CONFIRMED", r.order.db, "SELECT COUNT(*) FROM stock_reservation WHERE order_no = ? AND status = 'CONFIRMED'", []any{orderNo}, 1},
		check{"payments PAID", r.payment.db, "SELECT COUNT(*) FROM payments WHERE order_no = ? AND status = 'PAID' AND amount = 2500", []any{orderNo}, 1},
		check{"payment records", r.payment.db, "SELECT COUNT(*) FROM payment_transaction t JOIN payments p ON p.out_trade_no = t.out_trade_no WHERE p.order_no = ?", []any{orderNo}, 1},
		check{"the README user's coupons USED by the order", r.coupon.db, "SELECT COUNT(*) FROM coupons WHERE user_id = ? AND status = 'USED' AND used_order_no = ?", []any{readmeUser, orderNo}, 1},
		check{"coupon deductions", r.coupon.db, "SELECT COUNT(*) FROM coupon_deduction WHERE order_no = ?", []any{orderNo}, 1},
	)
	var left int
	if err := r.order.db.QueryRow("SELECT s.available FROM product_stock s JOIN stock_reservation v ON v.product_id = s.product_id WHERE v.order_no = ?", orderNo).Scan(&left); err != nil || left != 8 {
		t.Errorf("units left of the README's product: %d (%v), want 10 - 2", left, err)
	}
}
