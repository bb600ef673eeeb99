package main

import (
	"bufio"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Sample is one result line of `go test -bench`: the benchmark's name
// (without the -GOMAXPROCS suffix), its iteration count and every
// value/unit pair, ns/op and the b.ReportMetric ones alike.
type Sample struct {
	Name       string
	Iterations int
	Metrics    map[string]float64
	Line       string // the line as printed, tabs and spaces squeezed
}

// procSuffix is the -N that go test appends to a benchmark name when
// GOMAXPROCS > 1.
var procSuffix = regexp.MustCompile(`-\d+$`)

// resultFields matches "<iterations> <value> <unit> [<value> <unit>...]".
var resultFields = regexp.MustCompile(`^\d+(\s+[-+0-9.eE]+\s+\S+)+$`)

// Parse reads `go test -bench` output and returns its result lines. A name
// and its results normally share a line; when a benchmark logs while it
// runs, go test prints the name, the log, then the results on a line of
// their own, and Parse joins them.
func Parse(r io.Reader) []Sample {
	var out []Sample
	pending := ""
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if strings.HasPrefix(fields[0], "Benchmark") {
			if len(fields) == 1 {
				pending = fields[0]
				continue
			}
			if s, ok := parseResult(fields[0], fields[1:]); ok {
				out = append(out, s)
				pending = ""
				continue
			}
		}
		if pending != "" && resultFields.MatchString(strings.Join(fields, " ")) {
			if s, ok := parseResult(pending, fields); ok {
				out = append(out, s)
			}
			pending = ""
		}
	}
	return out
}

func parseResult(name string, fields []string) (Sample, bool) {
	if len(fields) < 3 || len(fields)%2 != 1 {
		return Sample{}, false
	}
	n, err := strconv.Atoi(fields[0])
	if err != nil {
		return Sample{}, false
	}
	s := Sample{Name: procSuffix.ReplaceAllString(name, ""), Iterations: n, Metrics: map[string]float64{}}
	for i := 1; i+1 < len(fields); i += 2 {
		v, err := strconv.ParseFloat(fields[i], 64)
		if err != nil {
			return Sample{}, false
		}
		s.Metrics[fields[i+1]] = v
	}
	s.Line = name + " " + strings.Join(fields, " ")
	return s, true
}

// Stat summarises one metric over the runs of one benchmark (-count).
type Stat struct {
	Median, Min, Max float64
	Runs             int
}

// Figures maps benchmark name → unit → Stat.
type Figures map[string]map[string]Stat

// Summarise groups samples by name and unit.
func Summarise(samples []Sample) Figures {
	values := map[string]map[string][]float64{}
	for _, s := range samples {
		if values[s.Name] == nil {
			values[s.Name] = map[string][]float64{}
		}
		for unit, v := range s.Metrics {
			values[s.Name][unit] = append(values[s.Name][unit], v)
		}
	}
	f := Figures{}
	for name, units := range values {
		f[name] = map[string]Stat{}
		for unit, vs := range units {
			slices.Sort(vs)
			med := vs[len(vs)/2]
			if len(vs)%2 == 0 {
				med = (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2
			}
			f[name][unit] = Stat{Median: med, Min: vs[0], Max: vs[len(vs)-1], Runs: len(vs)}
		}
	}
	return f
}

// Get returns the median of unit for name, and whether it was measured.
func (f Figures) Get(name, unit string) (float64, bool) {
	s, ok := f[name][unit]
	return s.Median, ok
}
