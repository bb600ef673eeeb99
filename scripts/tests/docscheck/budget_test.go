package docscheck

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/oncemall/oncemall/pkg/testkit/composecheck"
)

// budget is a word limit on some pages: on each page it matches, or on all
// of them together.
type budget struct {
	What  string
	Match func(page string) bool
	Words int
	Each  bool
}

// budgets are what a newcomer with twenty minutes can read: the front page,
// one incident's page, and docs/ as a whole (the services' READMEs are
// their own reference and not counted). Reference material stays complete
// in tables; prose that does not fit moves, it does not grow.
var budgets = []budget{
	{What: "README.md", Match: func(p string) bool { return p == "README.md" }, Words: 1500},
	{What: "each incident page", Match: incidentPage.MatchString, Words: 1200, Each: true},
	{What: "docs/ in all", Match: func(p string) bool { return strings.HasPrefix(p, "docs/") }, Words: 30000},
}

// incidentPage matches an incident's page, docs/incidents/N-name.md.
var incidentPage = regexp.MustCompile(`^docs/incidents/(\d+)-[a-z0-9-]+\.md$`)

// words counts as wc -w does: runs of characters between white space, code
// and tables included.
func words(text string) int { return len(strings.Fields(text)) }

// TestWordBudgets holds the pages to their budgets.
func TestWordBudgets(t *testing.T) {
	root := composecheck.RepoRoot(t)
	problems, counts := checkBudgets(root, markdownFiles(t, root), budgets)
	for _, p := range problems {
		t.Error(p)
	}
	t.Logf("words: %s", counts)
}

// checkBudgets returns a problem for each budget docs exceed, and the
// counts it found.
func checkBudgets(root string, docs []string, budgets []budget) (problems []string, counts string) {
	var summary []string
	for _, b := range budgets {
		total, pages := 0, 0
		for _, doc := range docs {
			if !b.Match(doc) {
				continue
			}
			body, err := os.ReadFile(filepath.Join(root, doc))
			if err != nil {
				problems = append(problems, err.Error())
				continue
			}
			n := words(string(body))
			total += n
			pages++
			if b.Each && n > b.Words {
				problems = append(problems, fmt.Sprintf("%s: %d words, over the %d of %s: move detail to a table or another page", doc, n, b.Words, b.What))
			}
		}
		if !b.Each && total > b.Words {
			problems = append(problems, fmt.Sprintf("%s: %d words in %d page(s), over the budget of %d: move detail to a table or another page", b.What, total, pages, b.Words))
		}
		summary = append(summary, fmt.Sprintf("%s %d in %d page(s)", b.What, total, pages))
	}
	return problems, strings.Join(summary, "; ")
}

// TestCheckBudgetsFailsOverBudget: a page over its own budget, and pages
// over their budget together, are each one problem; the same pages within
// larger budgets are none.
func TestCheckBudgetsFailsOverBudget(t *testing.T) {
	root := writeFiles(t, map[string]string{
		"README.md":                "one two three four five six",
		"docs/incidents/1-a.md":    "one two three",
		"docs/incidents/2-b.md":    "one two three four five",
		"docs/notes.md":            "one two three four",
		"services/x/README.md":     strings.Repeat("uncounted ", 100),
		"docs/incidents/README.md": "not an incident page, counted in docs/ only",
	})
	docs := []string{"README.md", "docs/incidents/1-a.md", "docs/incidents/2-b.md", "docs/notes.md", "services/x/README.md", "docs/incidents/README.md"}
	limits := func(readme, incident, docsTotal int) []budget {
		b := append([]budget(nil), budgets...)
		b[0].Words, b[1].Words, b[2].Words = readme, incident, docsTotal
		return b
	}
	problems, _ := checkBudgets(root, docs, limits(6, 5, 20))
	wantProblems(t, problems)
	problems, counts := checkBudgets(root, docs, limits(5, 4, 19))
	wantProblems(t, problems,
		"README.md: 6 words in 1 page(s), over the budget of 5",
		"docs/incidents/2-b.md: 5 words, over the 4 of each incident page",
		"docs/ in all: 20 words in 4 page(s), over the budget of 19")
	if want := "README.md 6 in 1 page(s); each incident page 8 in 2 page(s); docs/ in all 20 in 4 page(s)"; counts != want {
		t.Errorf("counts %q, want %q", counts, want)
	}
}
