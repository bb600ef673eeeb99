package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// A count is one number beside a switch: what it is, where it is read,
// its value now and, for a counter, its growth since the switch was last
// used.
type count struct {
	Key    string `json:"key"`
	Group  string `json:"group"` // "effects", "absorbed", "invariant", "switch"
	Name   string `json:"name"`
	Source string `json:"source"`
	Now    int64  `json:"now"`
	// Since is the growth since the switch was last used (nil: a gauge, or
	// never used).
	Since *int64 `json:"since,omitempty"`
	Err   string `json:"error,omitempty"`
	gauge bool
}

// counter is a count read from a service's Prometheus metrics: the sum of
// family's series whose labels include labels.
type counter struct {
	family string
	labels map[string]string
}

// metrics reads counters from base/metrics, the Prometheus text format.
func (s *switches) metrics(ctx context.Context, base string, counters []counter) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s/metrics: %s", base, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return nil, fmt.Errorf("GET %s/metrics: %w", base, err)
	}
	out := map[string]float64{}
	for _, c := range counters {
		f, ok := families[c.family]
		if !ok {
			continue
		}
		var sum float64
	series:
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for k, v := range c.labels {
				if got[k] != v {
					continue series
				}
			}
			switch {
			case m.GetCounter() != nil:
				sum += m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				sum += m.GetGauge().GetValue()
			}
		}
		out[c.key()] = sum
	}
	return out, nil
}

func (c counter) key() string {
	k := c.family
	for n, v := range c.labels {
		k += "," + n + "=" + v
	}
	return k
}

// proxyStats is the part of the fault proxy's GET /stats the switch shows.
type proxyStats struct {
	Armed               int64 `json:"armed"`
	AcksDropped         int64 `json:"acks_dropped"`
	CommitsSeen         int64 `json:"commits_seen"`
	ErrorRepliesDropped int64 `json:"error_replies_dropped"`
}

// proxy calls the fault proxy's admin API with its token.
func (s *switches) proxy(ctx context.Context, method, path string, body, out any) error {
	return s.send(ctx, "fault proxy", method, s.cfg.FaultProxyURL+path, s.cfg.FaultProxyToken, body, out)
}

// send makes one call of a lab switch: method u with body as JSON (nil:
// none) and token as its bearer (empty: none), its answer decoded into out
// (nil: ignored).
func (s *switches) send(ctx context.Context, who, method, u, token string, body, out any) error {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, r)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s %s: %w", who, method, u, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 != 2 {
		var p struct {
			Detail string `json:"detail"`
			Error  string `json:"error"`
		}
		_ = json.Unmarshal(raw, &p)
		detail := p.Detail + p.Error
		if detail == "" {
			detail = string(raw)
		}
		return fmt.Errorf("%s %s %s: %s: %s", who, method, u, resp.Status, detail)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("%s %s %s: %w", who, method, u, err)
		}
	}
	return nil
}
