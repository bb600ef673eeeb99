package docscheck

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/oncemall/oncemall/pkg/testkit/composecheck"
)

// incidentSections are an incident page's sections, in the one order every
// page keeps, so a reader who learnt one page can read any.
var incidentSections = []string{
	"What happened",                      // three sentences at most
	"What the lab shows",                 // the picture: the lab's broken and fixed timelines
	"The broken code and the fixed code", // side by side, with line links
	"Run it",                             // make lab INCIDENT=N and what to look at
	"Exercise",                           // one, its answer folded in <details>
}

// TestIncidentPagesHaveOneShape holds every docs/incidents/N-*.md page to
// that shape.
func TestIncidentPagesHaveOneShape(t *testing.T) {
	root := composecheck.RepoRoot(t)
	n := 0
	for _, doc := range markdownFiles(t, root) {
		if !incidentPage.MatchString(doc) {
			continue
		}
		n++
		for _, p := range checkIncidentShape(root, doc) {
			t.Error(p)
		}
	}
	if n == 0 {
		t.Fatal("no incident page found")
	}
}

var (
	codeSpan   = regexp.MustCompile("`[^`]*`")
	linkTarget = regexp.MustCompile(`\]\([^)]*\)`)
	sentence   = regexp.MustCompile(`[.!?]["')\]*_]*(\s|$)`)
)

// sentences counts the sentences of Markdown prose: the full stops, question
// and exclamation marks that end one, outside code spans and link targets.
func sentences(text string) int {
	text = linkTarget.ReplaceAllString(codeSpan.ReplaceAllString(text, "code"), "]")
	return len(sentence.FindAllString(text, -1))
}

// checkIncidentShape returns a problem for each way the incident page doc
// differs from the shape.
func checkIncidentShape(root, doc string) []string {
	p, err := readPage(root, doc)
	if err != nil {
		return []string{err.Error()}
	}
	number := incidentPage.FindStringSubmatch(doc)[1]
	var problems []string
	fail := func(format string, a ...any) {
		problems = append(problems, doc+": "+fmt.Sprintf(format, a...))
	}
	var titles []string
	secs := map[string]section{}
	for _, s := range p.sections() {
		titles = append(titles, s.Title)
		secs[s.Title] = s
	}
	if strings.Join(titles, "|") != strings.Join(incidentSections, "|") {
		fail("sections %q, want %q in this order", titles, incidentSections)
		return problems
	}
	if n := sentences(p.text(secs["What happened"])); n == 0 || n > 3 {
		fail("What happened has %d sentences, want three at most", n)
	}
	picture := regexp.MustCompile(`!\[[^\]]*\]\(\.\./img/incident-` + number + `\.png\)`)
	if !picture.MatchString(p.text(secs["What the lab shows"])) {
		fail("What the lab shows has no picture ![…](../img/incident-%s.png): draw it with make lab LAB_FLAGS=--pictures=docs/img", number)
	}
	code := 0
	for _, l := range p.goLinks() {
		if l.Line > secs["The broken code and the fixed code"].Start && l.Line <= secs["The broken code and the fixed code"].End {
			code++
		}
	}
	if code < 2 {
		fail("The broken code and the fixed code links %d line range(s) of Go code, want the broken and the fixed one at least", code)
	}
	if !strings.Contains(p.text(secs["Run it"]), "make lab INCIDENT="+number) {
		fail("Run it does not show make lab INCIDENT=%s", number)
	}
	exercise := p.text(secs["Exercise"])
	if !strings.Contains(exercise, "<details>") || !strings.Contains(exercise, "<summary>") || !strings.Contains(exercise, "</details>") {
		fail("Exercise has no answer folded in <details><summary>…</summary>…</details>")
	}
	return problems
}

// TestCheckIncidentShapeFailsOnAnotherShape: a page in the shape is no
// problem; sections out of order, a long story, no picture, no linked code,
// no command and an unfolded answer are each one.
func TestCheckIncidentShapeFailsOnAnotherShape(t *testing.T) {
	code := "package x\n\nfunc Broken() {}\n\nfunc Fixed() {}\n"
	good := "# Incident 3: x\n\n## What happened\n\nOne `a.b`. Two [c](d.md). Three!\n\n## What the lab shows\n\n![t](../img/incident-3.png)\n\n" +
		"## The broken code and the fixed code\n\n[`Broken`](../../code.go#L3) [`Fixed`](../../code.go#L5)\n\n## Run it\n\n```sh\nmake lab INCIDENT=3\n```\n\n" +
		"## Exercise\n\nWhy?\n\n<details><summary>Answer</summary>\n\nBecause.\n\n</details>\n"
	swapped := strings.Replace(strings.Replace(good, "## Run it", "## TMP", 1), "## Exercise", "## Run it", 1)
	swapped = strings.Replace(swapped, "## TMP", "## Exercise", 1)
	cases := map[string]struct{ page, want string }{
		"good":             {good, ""},
		"order":            {swapped, "sections"},
		"long story":       {strings.Replace(good, "Three!", "Three. Four.", 1), "What happened has 4 sentences"},
		"no picture":       {strings.Replace(good, "incident-3.png", "incident-4.png", 1), "no picture"},
		"a link, no image": {strings.Replace(good, "![t]", "[t]", 1), "no picture"},
		"no linked code":   {strings.Replace(good, " [`Fixed`](../../code.go#L5)", "", 1), "links 1 line range(s)"},
		"no command":       {strings.Replace(good, "INCIDENT=3", "INCIDENT=4", 1), "does not show make lab INCIDENT=3"},
		"answer shown":     {strings.Replace(good, "<details>", "", 1), "no answer folded"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			root := writeFiles(t, map[string]string{"code.go": code, "docs/incidents/3-x.md": c.page})
			got := checkIncidentShape(root, "docs/incidents/3-x.md")
			if c.want == "" {
				wantProblems(t, got)
			} else {
				wantProblems(t, got, c.want)
			}
		})
	}
}
