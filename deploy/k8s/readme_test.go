package k8s

import (
	"fmt"
	"os"
	"regexp"
	"strings"
)

// contract is what README.md promises in its tables, read so that the
// test and the page cannot disagree.
type contract struct {
	// images maps an image repository (oncemall/order) to the main
	// package its PROGRAM build argument names.
	images map[string]string
	// external are the names the base may refer to without defining them:
	// kind ("Secret", "host") → names.
	external map[string]map[string]bool
	// secretKeys are the keys of the Secret a deployment supplies.
	secretKeys map[string]bool
	// defaults are the variables left at their defaults, with the reason.
	defaults map[string]string
}

var backticked = regexp.MustCompile("`([^`]+)`")

// readContract reads README.md's tables.
func readContract(path string) (*contract, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	text := string(b)
	c := &contract{
		images:     map[string]string{},
		external:   map[string]map[string]bool{},
		secretKeys: map[string]bool{},
		defaults:   map[string]string{},
	}
	rows := func(heading string) ([][]string, error) {
		r := tableRows(text, heading)
		if len(r) == 0 {
			return nil, fmt.Errorf("%s: no table under %q", path, heading)
		}
		return r, nil
	}
	images, err := rows("## Images")
	if err != nil {
		return nil, err
	}
	for _, r := range images {
		c.images[firstCode(r[0])] = firstCode(r[1])
	}
	external, err := rows("## What the base leaves to a deployment")
	if err != nil {
		return nil, err
	}
	for _, r := range external {
		kind := strings.TrimSpace(r[0])
		if c.external[kind] == nil {
			c.external[kind] = map[string]bool{}
		}
		c.external[kind][firstCode(r[1])] = true
	}
	keys, err := rows("## The Secret")
	if err != nil {
		return nil, err
	}
	for _, r := range keys {
		c.secretKeys[firstCode(r[0])] = true
	}
	defaults, err := rows("### Variables left at their defaults")
	if err != nil {
		return nil, err
	}
	for _, r := range defaults {
		for _, m := range backticked.FindAllStringSubmatch(r[0], -1) {
			c.defaults[m[1]] = strings.TrimSpace(r[1])
		}
	}
	return c, nil
}

// tableRows returns the cells of the body rows of the first table after
// the line heading, up to the next heading.
func tableRows(text, heading string) [][]string {
	_, after, ok := strings.Cut(text, "\n"+heading+"\n")
	if !ok {
		return nil
	}
	var rows [][]string
	inTable := false
	for line := range strings.SplitSeq(after, "\n") {
		if strings.HasPrefix(line, "#") {
			break
		}
		if !strings.HasPrefix(line, "|") {
			if inTable {
				break
			}
			continue
		}
		if !inTable {
			inTable = true // the column names
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if strings.Trim(cells[0], " -:") == "" {
			continue // the |---|---| line
		}
		rows = append(rows, cells)
	}
	return rows
}

// firstCode returns the first `code` in a cell, or the trimmed cell.
func firstCode(cell string) string {
	if m := backticked.FindStringSubmatch(cell); m != nil {
		return m[1]
	}
	return strings.TrimSpace(cell)
}
