package docscheck

import (
	"bytes"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
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

// page is a Markdown file split into lines, with what is inside a fenced
// code block (the fence lines included) marked.
type page struct {
	Name  string // relative to the root
	Lines []string
	Fence []bool
}

// readPage reads the Markdown file name under root.
func readPage(root, name string) (*page, error) {
	b, err := os.ReadFile(filepath.Join(root, name))
	if err != nil {
		return nil, err
	}
	p := &page{Name: name, Lines: strings.Split(string(b), "\n")}
	p.Fence = make([]bool, len(p.Lines))
	in := false
	for i, l := range p.Lines {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			p.Fence[i] = true
			in = !in
			continue
		}
		p.Fence[i] = in
	}
	return p, nil
}

// mdLink is one inline link (or image) of a page, outside code blocks.
type mdLink struct {
	Line   int // 1-based
	Text   string
	Target string
}

// inlineLink matches [text](target) and ![alt](target).
var inlineLink = regexp.MustCompile(`\[([^\]]*)\]\(([^)\s]+)\)`)

// links returns the page's links, in order.
func (p *page) links() []mdLink {
	var out []mdLink
	for i, l := range p.Lines {
		if p.Fence[i] {
			continue
		}
		for _, m := range inlineLink.FindAllStringSubmatch(l, -1) {
			out = append(out, mdLink{Line: i + 1, Text: m[1], Target: m[2]})
		}
	}
	return out
}

// external reports whether a link leaves the repository.
func external(target string) bool {
	return strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:")
}

// resolve splits a relative link of doc into the file it opens (relative to
// the root; doc itself for "#anchor") and its anchor.
func resolve(doc, target string) (file, anchor string) {
	pathPart, anchor, _ := strings.Cut(target, "#")
	if p, err := url.PathUnescape(pathPart); err == nil {
		pathPart = p
	}
	if pathPart == "" {
		return doc, anchor
	}
	return filepath.Clean(filepath.Join(filepath.Dir(doc), pathPart)), anchor
}

// lineAnchor matches a GitHub line anchor: #L12 or #L12-L34.
var lineAnchor = regexp.MustCompile(`^L(\d+)(?:-L(\d+))?$`)

// lineRange reads a line anchor: its first and last line, ok false when the
// anchor is not one.
func lineRange(anchor string) (first, last int, ok bool) {
	m := lineAnchor.FindStringSubmatch(anchor)
	if m == nil {
		return 0, 0, false
	}
	first, _ = strconv.Atoi(m[1])
	last = first
	if m[2] != "" {
		last, _ = strconv.Atoi(m[2])
	}
	return first, last, true
}

// anchors returns the anchors a Markdown page defines: the GitHub slug of
// each heading (a repeated one numbered -1, -2, …) and every HTML id or
// name attribute.
func (p *page) anchors() map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for i, l := range p.Lines {
		if p.Fence[i] {
			continue
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(l, -1) {
			out[m[1]] = true
		}
		if !heading.MatchString(l) {
			continue
		}
		s := slug(strings.TrimLeft(l, "#"))
		if n := seen[s]; n > 0 {
			out[s+"-"+strconv.Itoa(n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

var (
	heading     = regexp.MustCompile(`^#{1,6} `)
	htmlAnchor  = regexp.MustCompile(`\b(?:id|name)="([^"]+)"`)
	linkInTitle = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

// slug is GitHub's anchor for a heading's text: lower case, links reduced
// to their text, every character but letters, digits, spaces, hyphens and
// underscores dropped, spaces made hyphens.
func slug(title string) string {
	title = linkInTitle.ReplaceAllString(strings.TrimSpace(title), "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(title) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// sections returns the page's level-two headings with the lines each
// section spans (after its heading, up to the next level-two heading).
func (p *page) sections() []section {
	var out []section
	for i, l := range p.Lines {
		if p.Fence[i] || !strings.HasPrefix(l, "## ") {
			continue
		}
		if n := len(out); n > 0 {
			out[n-1].End = i
		}
		out = append(out, section{Title: strings.TrimSpace(l[3:]), Start: i + 1, End: len(p.Lines)})
	}
	return out
}

// section is a level-two section: Lines[Start:End] of its page.
type section struct {
	Title      string
	Start, End int
}

// text returns the section's lines.
func (p *page) text(s section) string {
	return strings.Join(p.Lines[s.Start:s.End], "\n")
}

// writeFiles writes files (path → content) under a new directory and
// returns it: the fixtures the checks are shown to fail on.
func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// wantProblems checks that problems holds one problem containing each of
// want, and nothing else; an empty want means no problem at all.
func wantProblems(t *testing.T, problems []string, want ...string) {
	t.Helper()
	if len(problems) != len(want) {
		t.Errorf("%d problems, want %d (%q):\n%s", len(problems), len(want), want, strings.Join(problems, "\n"))
		return
	}
	for i, w := range want {
		if !strings.Contains(problems[i], w) {
			t.Errorf("problem %d is %q, want one about %q", i+1, problems[i], w)
		}
	}
}
