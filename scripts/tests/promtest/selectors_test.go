package promtest_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// selector is one vector selector of a PromQL expression: a metric name
// and its label matchers.
type selector struct {
	Metric   string
	Matchers []matcher
}

type matcher struct {
	Label, Op, Value string
}

// String is the selector as PromQL writes it.
func (s selector) String() string {
	return s.Metric + matchersString(s.Matchers)
}

// equalities is the selector with only its = matchers: the series it names
// must exist, whatever the regular expressions and negations around them.
func (s selector) equalities() string {
	var eq []matcher
	for _, m := range s.Matchers {
		if m.Op == "=" {
			eq = append(eq, m)
		}
	}
	return s.Metric + matchersString(eq)
}

func matchersString(ms []matcher) string {
	if len(ms) == 0 {
		return ""
	}
	parts := make([]string, len(ms))
	for i, m := range ms {
		parts[i] = fmt.Sprintf("%s%s%q", m.Label, m.Op, m.Value)
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// grouping lists the keywords followed by a list of label names.
var grouping = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}

// keywords are the words of PromQL that are not metric names where no
// parenthesis follows them: operators, and the aggregations, which may be
// followed by their by or without clause first.
var keywords = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true, "atan2": true, "inf": true, "nan": true,
	"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true, "count": true,
	"count_values": true, "bottomk": true, "topk": true, "quantile": true}

// parseExpr returns the vector selectors of a PromQL expression and the
// label names it groups or matches on (by, without, on, ignoring,
// group_left, group_right). It is a scanner, not a parser: enough for the
// expressions of this repository, and it refuses what it does not know (a
// selector without a metric name) rather than guess.
func parseExpr(expr string) (sels []selector, labels []string, err error) {
	i, n := 0, len(expr)
	isIdentStart := func(c byte) bool { return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
	isIdent := func(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }
	skipSpace := func() {
		for i < n && (expr[i] == ' ' || expr[i] == '\t' || expr[i] == '\n' || expr[i] == '\r') {
			i++
		}
	}
	readString := func() (string, error) {
		q := expr[i]
		i++
		var b strings.Builder
		for i < n && expr[i] != q {
			if expr[i] == '\\' && q != '`' && i+1 < n {
				i++
			}
			b.WriteByte(expr[i])
			i++
		}
		if i >= n {
			return "", fmt.Errorf("unterminated string in %q", expr)
		}
		i++
		return b.String(), nil
	}
	for i < n {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			if _, err := readString(); err != nil {
				return nil, nil, err
			}
		case c == '{':
			return nil, nil, fmt.Errorf("a selector without a metric name in %q", expr)
		case c == '[':
			for i < n && expr[i] != ']' {
				i++
			}
			i++
		case c >= '0' && c <= '9' || c == '.':
			for i < n && (isIdent(expr[i]) || expr[i] == '.') {
				i++
			}
		case isIdentStart(c):
			start := i
			for i < n && isIdent(expr[i]) {
				i++
			}
			word := expr[start:i]
			skipSpace()
			switch {
			case grouping[strings.ToLower(word)]:
				if i < n && expr[i] == '(' {
					end := strings.IndexByte(expr[i:], ')')
					if end < 0 {
						return nil, nil, fmt.Errorf("unclosed %s list in %q", word, expr)
					}
					for _, l := range strings.Split(expr[i+1:i+end], ",") {
						if l = strings.TrimSpace(l); l != "" {
							labels = append(labels, l)
						}
					}
					i += end + 1
				}
			case keywords[strings.ToLower(word)]:
			case i < n && expr[i] == '(':
				// A function or an aggregation.
			default:
				s := selector{Metric: word}
				if i < n && expr[i] == '{' {
					i++
					for {
						skipSpace()
						if i < n && expr[i] == ',' {
							i++
							skipSpace()
						}
						if i >= n {
							return nil, nil, fmt.Errorf("unclosed matchers in %q", expr)
						}
						if expr[i] == '}' {
							i++
							break
						}
						ls := i
						for i < n && isIdent(expr[i]) {
							i++
						}
						label := expr[ls:i]
						skipSpace()
						os := i
						for i < n && strings.IndexByte("=!~", expr[i]) >= 0 {
							i++
						}
						op := expr[os:i]
						skipSpace()
						if label == "" || op == "" || i >= n || strings.IndexByte("\"'`", expr[i]) < 0 {
							return nil, nil, fmt.Errorf("cannot read the matchers of %s in %q", word, expr)
						}
						v, err := readString()
						if err != nil {
							return nil, nil, err
						}
						s.Matchers = append(s.Matchers, matcher{label, op, v})
					}
				}
				sels = append(sels, s)
			}
		default:
			i++
		}
	}
	return sels, labels, nil
}

func TestParseExpr(t *testing.T) {
	for _, tc := range []struct {
		expr   string
		sels   []string
		labels []string
	}{
		{`up`, []string{`up`}, nil},
		{`sum by (job, status) (rate(http_requests_total{route!~"/metrics|/healthz"}[$__rate_interval]))`,
			[]string{`http_requests_total{route!~"/metrics|/healthz"}`}, []string{"job", "status"}},
		{`histogram_quantile(0.95, sum by (le) (rate(x_bucket[5m]))) > 1e3`, []string{`x_bucket`}, []string{"le"}},
		{"max by (job, kind) (\n  a_findings\n  and on (job, instance)\n  (increase(job_runs_total{exported_job=\"a-reconcile\", outcome=~\"ok|unlocked\"}[10m]) > 0)\n) > 0",
			[]string{`a_findings`, `job_runs_total{exported_job="a-reconcile", outcome=~"ok|unlocked"}`}, []string{"job", "kind", "job", "instance"}},
		{`sum(rate(a_total[1m] offset 5m)) without (instance) / ignoring (x) group_left b unless bool c`,
			[]string{"a_total", "b", "c"}, []string{"instance", "x"}},
	} {
		sels, labels, err := parseExpr(tc.expr)
		if err != nil {
			t.Fatalf("%s: %v", tc.expr, err)
		}
		var got []string
		for _, s := range sels {
			got = append(got, s.String())
		}
		if !reflect.DeepEqual(got, tc.sels) || !reflect.DeepEqual(labels, tc.labels) {
			t.Errorf("%s:\n got %q %q\nwant %q %q", tc.expr, got, labels, tc.sels, tc.labels)
		}
	}
	for _, bad := range []string{`{__name__="up"}`, `x{a="b"`, `x{a}`} {
		if _, _, err := parseExpr(bad); err == nil {
			t.Errorf("%s: parsed, want an error", bad)
		}
	}
}
