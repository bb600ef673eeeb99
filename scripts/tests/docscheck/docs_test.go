package docscheck

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oncemall/oncemall/pkg/testkit/composecheck"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

// TestRelativeLinksResolve opens every relative link of every Markdown file:
// the file or directory must exist, a #Lx-Ly anchor must be within the file,
// and any other anchor must be a heading (or an HTML id) of the Markdown
// page it names. Links rot first when code and pages move; this is what
// notices.
func TestRelativeLinksResolve(t *testing.T) {
	root := composecheck.RepoRoot(t)
	for _, p := range checkLinks(root, markdownFiles(t, root)) {
		t.Error(p)
	}
}

// checkLinks returns a problem for each relative link of docs (Markdown
// files relative to root) that does not resolve.
func checkLinks(root string, docs []string) []string {
	var problems []string
	lineCounts := map[string]int{}
	pages := map[string]*page{}
	for _, doc := range docs {
		p, err := readPage(root, doc)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		pages[doc] = p
	}
	for _, doc := range docs {
		p := pages[doc]
		if p == nil {
			continue
		}
		for _, l := range p.links() {
			if external(l.Target) {
				continue
			}
			file, anchor := resolve(doc, l.Target)
			full := filepath.Join(root, file)
			info, err := os.Stat(full)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s:%d: link to %s: no such file", doc, l.Line, l.Target))
				continue
			}
			if anchor == "" || info.IsDir() {
				continue
			}
			if _, last, ok := lineRange(anchor); ok {
				count, seen := lineCounts[full]
				if !seen {
					b, err := os.ReadFile(full)
					if err != nil {
						problems = append(problems, err.Error())
						continue
					}
					count = bytes.Count(b, []byte{'\n'})
					lineCounts[full] = count
				}
				if last > count {
					problems = append(problems, fmt.Sprintf("%s:%d: link to %s: the file has %d lines", doc, l.Line, l.Target, count))
				}
				continue
			}
			if !strings.HasSuffix(file, ".md") {
				continue
			}
			target := pages[file]
			if target == nil {
				if target, err = readPage(root, file); err != nil {
					problems = append(problems, err.Error())
					continue
				}
				pages[file] = target
			}
			if !target.anchors()[anchor] {
				problems = append(problems, fmt.Sprintf("%s:%d: link to %s: %s has no heading #%s", doc, l.Line, l.Target, file, anchor))
			}
		}
	}
	return problems
}

// TestCheckLinksFailsOnBrokenLinks: a link to a file that is not there, a
// line range past a file's end and an anchor no heading defines are each
// one problem; good links of every kind are none.
func TestCheckLinksFailsOnBrokenLinks(t *testing.T) {
	root := writeFiles(t, map[string]string{
		"code.go":  "package x\n\nfunc A() {}\n",
		"other.md": "# Other\n\n## The `x` part, again\n\n<a id=\"custom\"></a>\n",
		"good.md":  "[a](code.go#L1-L3) [b](other.md#the-x-part-again) [c](other.md#custom) [d](#good) [e](https://example.com/none.md) [f](.)\n\n# Good\n",
		"bad.md":   "[a](missing.go)\n[b](code.go#L2-L9)\n[c](other.md#nowhere)\n[d](#nowhere)\n\n```\n[e](ignored-in-a-fence.md)\n```\n",
	})
	wantProblems(t, checkLinks(root, []string{"good.md", "other.md"}))
	wantProblems(t, checkLinks(root, []string{"bad.md"}),
		"bad.md:1: link to missing.go: no such file",
		"bad.md:2: link to code.go#L2-L9: the file has 3 lines",
		"bad.md:3: link to other.md#nowhere: other.md has no heading #nowhere",
		"bad.md:4: link to #nowhere: bad.md has no heading #nowhere")
}

// sourceWord is the word the project's founding incident write-ups go by,
// assembled so that this file, which states the rule, does not itself read
// as a citation of them.
var sourceWord = "s" + "eed"

// citationPattern matches a reference to those write-ups ("<word> 003",
// "the <word>'s", a "<word>s/" path, a "<word>s: 000" header), as an
// extended regular expression that git grep and Go both read.
var citationPattern = fmt.Sprintf(`\b%[1]ss?[ -]?0{0,2}[0-4]\b|%[1]ss/|\bthe %[1]s('s)?\b|\bno %[1]s\b|\b%[1]ss?:[[:space:]]*0`, sourceWord)

// TestNoPageCitesTheSourceWriteUps: the incident write-ups the project
// started from are not part of the repository, so no page or comment may
// send a reader to them; the docs say what matters in their own words.
func TestNoPageCitesTheSourceWriteUps(t *testing.T) {
	cmd := exec.Command("git", "grep", "-n", "-I", "-i", "-E", citationPattern, "--", "*.md", "*.go", ":!scripts/tests/docscheck")
	cmd.Dir = composecheck.RepoRoot(t)
	out, err := cmd.Output()
	if exit, ok := err.(*exec.ExitError); ok && exit.ExitCode() == 1 {
		return // no match
	}
	testenv.Must(t, err)
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		t.Errorf("cites the write-ups the project started from, which its readers do not have: %s", line)
	}
}
