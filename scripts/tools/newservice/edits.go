package main

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// edit is one change to a file the repository has: apply returns the
// file's new content, or an error when its anchor is missing or the file
// names the service already, so that a second run changes nothing.
type edit struct {
	path  string // relative to the repository root, slash-separated
	apply func(src string, s Service) (string, error)
}

// edits are the files the drift tests and the tools read the list of
// services from.
var edits = []edit{
	{"go.work", addToGoWork},
	{"Makefile", addToMakefile},
	{"scripts/run.sh", addToRunScript},
	{"docker-compose.yml", addToCompose},
	{"deploy/nats.conf", addToNATSConfig},
	{"docs/configuration.md", addToConfigDoc},
}

var goWorkUse = regexp.MustCompile(`(?ms)^use \(\n(.*?)^\)`)

// addToGoWork adds ./services/<name> to go.work's use block, in order.
func addToGoWork(src string, s Service) (string, error) {
	m := goWorkUse.FindStringSubmatchIndex(src)
	if m == nil {
		return "", fmt.Errorf("no use ( … ) block")
	}
	dir := "./services/" + s.Name
	lines := strings.SplitAfter(src[m[2]:m[3]], "\n")
	at := len(lines) - 1 // the empty string after the last newline
	for i, line := range lines {
		switch entry := strings.TrimSpace(line); {
		case entry == dir:
			return "", fmt.Errorf("uses %s already", dir)
		case entry != "" && !strings.HasPrefix(entry, "//") && entry > dir && at == len(lines)-1:
			at = i
		}
	}
	lines = slices.Insert(lines, at, "\t"+dir+"\n")
	return src[:m[2]] + strings.Join(lines, "") + src[m[3]:], nil
}

// addToMakefile adds services/<name> to MODULES, after the other services
// so that pkg is tested first and scripts last, and <name> to SERVICES.
func addToMakefile(src string, s Service) (string, error) {
	src, err := editList(src, "MODULES", "services/"+s.Name, func(words []string) int {
		at := len(words)
		for i, w := range words {
			switch {
			case strings.HasPrefix(w, "services/"):
				at = i + 1
			case w == "scripts" && at == len(words):
				at = i
			}
		}
		return at
	})
	if err != nil {
		return "", err
	}
	return editList(src, "SERVICES", s.Name, func(words []string) int { return len(words) })
}

// editList inserts word into the make variable defined on one line as
// "NAME := words", at the index where returns.
func editList(src, name, word string, where func(words []string) int) (string, error) {
	re := regexp.MustCompile(`(?m)^(` + name + `[ \t]*:=)(.*)$`)
	m := re.FindStringSubmatchIndex(src)
	if m == nil {
		return "", fmt.Errorf("no %s := line", name)
	}
	words := strings.Fields(src[m[4]:m[5]])
	if slices.Contains(words, word) {
		return "", fmt.Errorf("%s has %s already", name, word)
	}
	words = slices.Insert(words, where(words), word)
	return src[:m[4]] + " " + strings.Join(words, " ") + src[m[5]:], nil
}

var (
	programsFunc = regexp.MustCompile(`(?ms)^programs\(\) \{\n(.*?)^\}`)
	serviceLine  = regexp.MustCompile(`(?m)^[ \t]*echo "[a-z0-9-]+\|services/.*\n`)
)

// addToRunScript adds the service's line to programs() in scripts/run.sh,
// after the last service there, so that it starts after the ones before it.
func addToRunScript(src string, s Service) (string, error) {
	m := programsFunc.FindStringSubmatchIndex(src)
	if m == nil {
		return "", fmt.Errorf("no programs() { … } function")
	}
	body := src[m[2]:m[3]]
	if strings.Contains(body, `echo "`+s.Name+`|`) {
		return "", fmt.Errorf("programs() lists %s already", s.Name)
	}
	lines := serviceLine.FindAllStringIndex(body, -1)
	if lines == nil {
		return "", fmt.Errorf(`programs() has no line echo "<name>|services/…" to add %s after`, s.Name)
	}
	line, err := render("insert/run.sh.tmpl", s)
	if err != nil {
		return "", err
	}
	at := m[2] + lines[len(lines)-1][1]
	return src[:at] + string(line) + src[at:], nil
}

var (
	composeServices = regexp.MustCompile(`(?m)^services:[ \t]*$`)
	topLevelKey     = regexp.MustCompile(`(?m)^[^\s#]`)
	yamlAlias       = regexp.MustCompile(`\*([A-Za-z0-9_-]+)`)
)

// addToCompose adds the service's block at the end of docker-compose.yml's
// services. The block merges the file's shared anchors (the platform's
// environment, the healthcheck timing, the infrastructure it depends on),
// each of which must be defined.
func addToCompose(src string, s Service) (string, error) {
	block, err := render("insert/docker-compose.yml.tmpl", s)
	if err != nil {
		return "", err
	}
	for _, a := range yamlAlias.FindAllStringSubmatch(string(block), -1) {
		if !regexp.MustCompile(`&` + regexp.QuoteMeta(a[1]) + `\b`).MatchString(src) {
			return "", fmt.Errorf("no anchor &%s, which the service's block uses", a[1])
		}
	}
	m := composeServices.FindStringIndex(src)
	if m == nil {
		return "", fmt.Errorf("no top-level services: key")
	}
	end := len(src)
	if next := topLevelKey.FindStringIndex(src[m[1]:]); next != nil {
		end = m[1] + next[0]
	}
	if regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(s.Name) + `:`).MatchString(src[m[1]:end]) {
		return "", fmt.Errorf("services has %s already", s.Name)
	}
	// The service's passwords, given to the servers that check them: the
	// database's init creates oncemall_<name> for MYSQL_<NAME>_PASSWORD,
	// and deploy/nats.conf reads NATS_<NAME>_PASSWORD.
	for _, kind := range []struct{ prefix, skip string }{{"MYSQL", "ROOT"}, {"NATS", "ADMIN"}} {
		lines := regexp.MustCompile(`(?m)^      `+kind.prefix+`_([A-Z0-9_]+)_PASSWORD: .*\n`).FindAllStringSubmatchIndex(src, -1)
		at := -1
		for _, l := range lines {
			if src[l[2]:l[3]] != kind.skip && l[0] < end {
				at = l[1]
			}
		}
		if at < 0 {
			return "", fmt.Errorf("no %s_<SERVICE>_PASSWORD line to add %s_%s_PASSWORD after", kind.prefix, kind.prefix, s.Upper)
		}
		line := fmt.Sprintf("      %[1]s_%[2]s_PASSWORD: \"${%[1]s_%[2]s_PASSWORD:-dev-%[3]s-%[4]s-password}\"\n",
			kind.prefix, s.Upper, strings.ToLower(kind.prefix), s.Name)
		src = src[:at] + line + src[at:]
		end += len(line)
	}
	// Comment lines right above the next key belong to it.
	for end > m[1] {
		prev := strings.LastIndex(src[:end-1], "\n") + 1
		if !strings.HasPrefix(src[prev:end], "#") {
			break
		}
		end = prev
	}
	return insertSection(src, end, string(block)), nil
}

var natsUsersEnd = regexp.MustCompile(`(?m)^  \]\n\}\s*$`)

// addToNATSConfig adds the service's user to deploy/nats.conf, at the end
// of the users: it publishes <name>.> and uses the JetStream API on its own
// stream. Rights on the streams it consumes are the author's to add, as
// the drift test in scripts/tests/deploytest reminds.
func addToNATSConfig(src string, s Service) (string, error) {
	if regexp.MustCompile(`(?m)^\s*user: ` + regexp.QuoteMeta(s.Name) + `\s*$`).MatchString(src) {
		return "", fmt.Errorf("has a user %s already", s.Name)
	}
	m := natsUsersEnd.FindStringIndex(src)
	if m == nil {
		return "", fmt.Errorf("no end of the users list (a line \"  ]\" then \"}\" ending the file)")
	}
	block, err := render("insert/nats.conf.tmpl", s)
	if err != nil {
		return "", err
	}
	return src[:m[0]] + string(block) + src[m[0]:], nil
}

var (
	eachService = regexp.MustCompile(`(?m)^## Each service[ \t]*$`)
	heading2    = regexp.MustCompile(`(?m)^## `)
	variableRow = regexp.MustCompile("(?m)^\\|\\s*`([A-Z][A-Z0-9_]*)`\\s*\\|")
)

// addToConfigDoc adds the table of the service's own variables at the end
// of the "Each service" section of docs/configuration.md, where the drift
// test looks for their rows.
func addToConfigDoc(src string, s Service) (string, error) {
	table, err := render("insert/configuration.md.tmpl", s)
	if err != nil {
		return "", err
	}
	for _, row := range variableRow.FindAllStringSubmatch(string(table), -1) {
		if regexp.MustCompile("(?m)^\\|\\s*`" + row[1] + "`").MatchString(src) {
			return "", fmt.Errorf("has a row for %s already", row[1])
		}
	}
	m := eachService.FindStringIndex(src)
	if m == nil {
		return "", fmt.Errorf(`no "## Each service" section`)
	}
	end := len(src)
	if next := heading2.FindStringIndex(src[m[1]:]); next != nil {
		end = m[1] + next[0]
	}
	return insertSection(src, end, string(table)), nil
}

// insertSection inserts block, which ends with a newline, at offset at of
// src as a paragraph of its own: after one blank line, and followed by one
// unless it ends the file.
func insertSection(src string, at int, block string) string {
	head := strings.TrimRight(src[:at], "\n") + "\n\n" + block
	if at == len(src) {
		return head
	}
	return head + "\n" + src[at:]
}
