package docscheck

import (
	"bufio"
	"bytes"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/oncemall/oncemall/pkg/testkit/composecheck"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

// markdownFiles lists the repository's tracked and new Markdown files.
func markdownFiles(t *testing.T, root string) []string {
	t.Helper()
	cmd := exec.Command("git", "ls-files", "--cached", "--others", "--exclude-standard", "-z", "--", "*.md")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	var files []string
	for _, f := range bytes.Split(out, []byte{0}) {
		if len(f) > 0 && !strings.Contains(string(f), "/template/") {
			files = append(files, string(f))
		}
	}
	if len(files) == 0 {
		t.Fatal("no Markdown files found")
	}
	return files
}

// link matches an inline Markdown link's target: [text](target).
var link = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// lines matches a GitHub line anchor: #L12 or #L12-L34.
var lines = regexp.MustCompile(`^L(\d+)(?:-L(\d+))?$`)

// TestRelativeLinksResolve opens every relative link of every Markdown file:
// the file or directory must exist, and a #Lx-Ly anchor must be within the
// file. Line links rot first when code moves; this is what notices.
func TestRelativeLinksResolve(t *testing.T) {
	root := composecheck.RepoRoot(t)
	lineCounts := map[string]int{}
	for _, doc := range markdownFiles(t, root) {
		body, err := os.ReadFile(filepath.Join(root, doc))
		if err != nil {
			t.Fatal(err)
		}
		inFence := false
		sc := bufio.NewScanner(bytes.NewReader(body))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for n := 1; sc.Scan(); n++ {
			text := sc.Text()
			if strings.HasPrefix(strings.TrimSpace(text), "```") {
				inFence = !inFence
				continue
			}
			if inFence {
				continue
			}
			for _, m := range link.FindAllStringSubmatch(text, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") || strings.HasPrefix(target, "#") {
					continue
				}
				pathPart, anchor, _ := strings.Cut(target, "#")
				if p, err := url.PathUnescape(pathPart); err == nil {
					pathPart = p
				}
				full := filepath.Join(root, filepath.Dir(doc), pathPart)
				info, err := os.Stat(full)
				if err != nil {
					t.Errorf("%s:%d: link to %s: no such file", doc, n, target)
					continue
				}
				lm := lines.FindStringSubmatch(anchor)
				if lm == nil || info.IsDir() {
					continue
				}
				count, ok := lineCounts[full]
				if !ok {
					b, err := os.ReadFile(full)
					if err != nil {
						t.Fatal(err)
					}
					count = bytes.Count(b, []byte{'\n'})
					lineCounts[full] = count
				}
				last, _ := strconv.Atoi(lm[1])
				if lm[2] != "" {
					last, _ = strconv.Atoi(lm[2])
				}
				if last > count {
					t.Errorf("%s:%d: link to %s: the file has %d lines", doc, n, target, count)
				}
			}
		}
	}
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
	cmd := exec.Command("git", "grep", "-n", "-I", "-i", "-E", citationPattern, "--", "*.md", "*.go", ":!scripts/docscheck")
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
