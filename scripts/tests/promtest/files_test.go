package promtest_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/oncemall/oncemall/pkg/testkit/composecheck"
)

// root returns the repository root.
func root(t *testing.T) string {
	t.Helper()
	dir, err := composecheck.Root()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// binary returns the path of name (promtool, prometheus), or fails saying
// how to install it: .ci/run installs the Debian package when it is
// missing.
func binary(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is not installed: apt-get install prometheus (the Debian package has both prometheus and promtool; .ci/run installs it)", name)
	}
	return p
}

// TestPromtool runs promtool on the files of deploy/prometheus: both
// configurations and the rules they load are valid, and every alert unit
// test passes.
func TestPromtool(t *testing.T) {
	promtool := binary(t, "promtool")
	dir := filepath.Join(root(t), "deploy", "prometheus")
	for _, args := range [][]string{
		{"check", "config", "compose.yml", "local.yml"},
		{"check", "rules", "alerts.yml"},
		{"test", "rules", "alerts_test.yml"},
	} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert  string            `yaml:"alert"`
			Expr   string            `yaml:"expr"`
			Labels map[string]string `yaml:"labels"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

type ruleTests struct {
	Tests []struct {
		AlertRuleTest []struct {
			Alertname string `yaml:"alertname"`
			ExpAlerts []any  `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// alertRules reads deploy/prometheus/alerts.yml.
func alertRules(t *testing.T) ruleFile {
	t.Helper()
	var rules ruleFile
	readYAML(t, filepath.Join(root(t), "deploy", "prometheus", "alerts.yml"), &rules)
	return rules
}

// TestEveryAlertIsTestedFiringAndNot: promtool passes a rule with no test,
// so this checks that alerts_test.yml has, for every alert of alerts.yml,
// an evaluation where it fires and one where it does not; and that every
// alert has a severity.
func TestEveryAlertIsTestedFiringAndNot(t *testing.T) {
	var tests ruleTests
	readYAML(t, filepath.Join(root(t), "deploy", "prometheus", "alerts_test.yml"), &tests)
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, e := range tc.AlertRuleTest {
			if len(e.ExpAlerts) > 0 {
				fires[e.Alertname] = true
			} else {
				quiet[e.Alertname] = true
			}
		}
	}
	n := 0
	for _, g := range alertRules(t).Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			n++
			if !fires[r.Alert] || !quiet[r.Alert] {
				t.Errorf("alert %s: tested firing %v, not firing %v; alerts_test.yml needs both", r.Alert, fires[r.Alert], quiet[r.Alert])
			}
			if s := r.Labels["severity"]; s != "critical" && s != "warning" {
				t.Errorf("alert %s: severity %q, want critical or warning", r.Alert, s)
			}
		}
	}
	if n == 0 {
		t.Fatal("no alert rules in alerts.yml")
	}
}

type panel struct {
	Type       string     `json:"type"`
	Title      string     `json:"title"`
	Datasource datasource `json:"datasource"`
	Targets    []struct {
		Expr       string     `json:"expr"`
		Datasource datasource `json:"datasource"`
	} `json:"targets"`
	Panels []panel `json:"panels"`
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// dashboardPanels returns the panels of deploy/grafana/dashboards/oncemall.json
// that query, rows flattened.
func dashboardPanels(t *testing.T) []panel {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root(t), "deploy", "grafana", "dashboards", "oncemall.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID    string  `json:"uid"`
		Panels []panel `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("oncemall.json: %v", err)
	}
	if d.UID == "" {
		t.Fatal("oncemall.json has no uid: provisioning would give it a new one on every start")
	}
	var out []panel
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			if p.Type == "row" {
				walk(p.Panels)
				continue
			}
			out = append(out, p)
		}
	}
	walk(d.Panels)
	return out
}

// dashboardExprs returns every query of the dashboard, with Grafana's
// $__rate_interval replaced by a window Prometheus accepts.
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, p := range dashboardPanels(t) {
		for _, tg := range p.Targets {
			out = append(out, strings.ReplaceAll(tg.Expr, "$__rate_interval", "1m"))
		}
	}
	return out
}

// TestGrafanaProvisioning: every panel queries the provisioned Prometheus
// data source (by its uid), every query parses, and the dashboard provider
// reads the folder the dashboard is in.
func TestGrafanaProvisioning(t *testing.T) {
	dir := filepath.Join(root(t), "deploy", "grafana")
	var ds struct {
		Datasources []struct {
			UID  string `yaml:"uid"`
			Type string `yaml:"type"`
			URL  string `yaml:"url"`
		} `yaml:"datasources"`
	}
	readYAML(t, filepath.Join(dir, "provisioning", "datasources", "prometheus.yml"), &ds)
	if len(ds.Datasources) != 1 || ds.Datasources[0].Type != "prometheus" || ds.Datasources[0].UID == "" {
		t.Fatalf("datasources %+v, want one prometheus data source with a uid", ds.Datasources)
	}
	uid := ds.Datasources[0].UID
	var prov struct {
		Providers []struct {
			Type    string `yaml:"type"`
			Options struct {
				Path string `yaml:"path"`
			} `yaml:"options"`
		} `yaml:"providers"`
	}
	readYAML(t, filepath.Join(dir, "provisioning", "dashboards", "oncemall.yml"), &prov)
	if len(prov.Providers) != 1 || prov.Providers[0].Type != "file" || prov.Providers[0].Options.Path == "" {
		t.Fatalf("dashboard providers %+v, want one file provider with a path", prov.Providers)
	}

	panels := dashboardPanels(t)
	if len(panels) == 0 {
		t.Fatal("the dashboard has no panels")
	}
	var titles []string
	for _, p := range panels {
		titles = append(titles, p.Title)
		if p.Datasource.UID != uid || len(p.Targets) == 0 {
			t.Errorf("panel %q: data source %+v and %d queries, want the provisioned %s and at least one", p.Title, p.Datasource, len(p.Targets), uid)
		}
		for _, tg := range p.Targets {
			if tg.Datasource.UID != uid {
				t.Errorf("panel %q: a query on data source %+v, want %s", p.Title, tg.Datasource, uid)
			}
			if sels, _, err := parseExpr(tg.Expr); err != nil || len(sels) == 0 {
				t.Errorf("panel %q: query %q: %v, %d metrics", p.Title, tg.Expr, err, len(sels))
			}
		}
	}
	slices.Sort(titles)
	if dup := slices.Compact(slices.Clone(titles)); len(dup) != len(titles) {
		t.Errorf("panel titles repeat: %q", titles)
	}
}
