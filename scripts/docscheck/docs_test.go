package docscheck

import (
	"bufio"
	"bytes"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/oncemall/oncemall/pkg/testkit/composecheck"
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

// citation matches a reference to the write-ups the project started from.
var citation = regexp.MustCompile(`(?i)\bseeds?[ -]?0{0,2}[0-4]\b|seeds/|\bthe seed('s)?\b|\bno seed\b|\bseeds?:\s*0`)

// TestNoPageCitesTheSeedWriteUps: the incident write-ups the project
// started from are not part of the repository, so no page or comment may
// send a reader to them; the docs say what matters in their own words.
func TestNoPageCitesTheSeedWriteUps(t *testing.T) {
	root := composecheck.RepoRoot(t)
	cmd := exec.Command("git", "grep", "-n", "-I", "-i", "-E", `seeds?[ -]?0{0,2}[0-4]\b|seeds/|the seed('s)?\b|no seed\b|seeds?:[[:space:]]*0`, "--", "*.md", "*.go", ":!scripts/docscheck")
	cmd.Dir = root
	out, _ := cmd.Output() // exit 1 means no match
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line != "" && citation.MatchString(line) {
			t.Errorf("cites the seed write-ups: %s", line)
		}
	}
}
