package browser_test

import (
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestConsoleCopyWorkers: incident 3 from the console. The operator has
// the order service copy 50 new products sent twice at once, its chunks
// created by the broken check-then-insert with 4 workers, then by the
// fixed dedup table with 4, then broken with 1: the console shows the
// duplicates written (50), then none and every copy's product absorbed,
// then none again (one worker), as the order database counts them.
func TestConsoleCopyWorkers(t *testing.T) {
	r := startRig(t)
	t.Cleanup(func() { // before the rig stops: where a stuck run stood
		if !t.Failed() {
			return
		}
		for _, q := range []string{
			"SELECT CONCAT(job_id, '/', seq, ' ', status, ' created ', created, ' skipped ', skipped) FROM product_copy_chunks",
			"SELECT CONCAT(message_no, ' ', status, ' retries ', retry_count, ' ', COALESCE(last_error, '')) FROM local_message WHERE topic LIKE '%product%'",
			"SELECT CONCAT(id, ' ', command, ' ', time, 's ', COALESCE(state, ''), ' ', COALESCE(LEFT(info, 120), '')) FROM information_schema.processlist WHERE db = DATABASE()",
		} {
			rows, err := r.order.db.Query(q)
			if err != nil {
				t.Logf("%s: %v", q, err)
				continue
			}
			for rows.Next() {
				var line string
				_ = rows.Scan(&line)
				t.Logf("order database: %s", line)
			}
			rows.Close()
		}
	})
	b := newBrowser(t, r.web.URL(""))
	b.run(t, "sign in as operator", b.signIn("operator", "operator-dev-password"),
		chromedp.WaitVisible(`#nav-console`, chromedp.ByQuery))
	for _, c := range []struct {
		variant                 string
		workers                 int
		created, skipped, extra int
		shot                    string
	}{
		{"broken", 4, 100, 0, 50, "console-lab-copy-broken"},
		{"fixed", 4, 50, 50, 0, "console-lab-copy"},
		{"broken", 1, 50, 50, 0, ""},
	} {
		what := fmt.Sprintf("%s with %d worker(s)", c.variant, c.workers)
		b.run(t, "run "+what, chromedp.Navigate(b.base+"/console/lab"),
			chromedp.SetValue(`#copy select[name=variant]`, c.variant, chromedp.ByQuery),
			chromedp.SetValue(`#copy input[name=workers]`, fmt.Sprint(c.workers), chromedp.ByQuery),
			clickUntilDone(`#run-copy`, "Run "+what))
		now := func(key string) string {
			return `document.querySelector('[data-count="` + key + `"] [data-field="now"]').textContent`
		}
		b.run(t, "the counts of "+what, chromedp.Poll(fmt.Sprintf(`%s === "0" && %s === "%d" && %s === "%d" && %s === "%d" && %s === "%d"`,
			now("copy_chunks_left"), now("copy_workers"), c.workers, now("copy_run_created"), c.created,
			now("copy_run_skipped"), c.skipped, now("copy_duplicates"), c.extra), nil))
		var brand string
		var live, extra int
		if err := r.order.db.QueryRow(`SELECT brand, COUNT(*), COUNT(*) - COUNT(DISTINCT name, model) FROM products
			WHERE deleted = 0 AND brand LIKE 'lab3-%' GROUP BY brand ORDER BY MAX(id) DESC LIMIT 1`).Scan(&brand, &live, &extra); err != nil {
			t.Fatal(err)
		}
		if live != c.created || extra != c.extra {
			t.Errorf("%s: brand %s holds %d live products, %d beyond one per name and model; want %d and %d", what, brand, live, extra, c.created, c.extra)
		}
		if c.shot != "" {
			b.elementShot(t, c.shot, "#copy")
		}
	}
}
