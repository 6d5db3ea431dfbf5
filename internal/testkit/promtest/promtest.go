// Package promtest reads Prometheus scrapes in tests, as a Prometheus
// server does: the text format, parsed by Prometheus's own parser.
package promtest

import (
	"io"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Parse parses a scrape in the text format, failing the test if it is not.
func Parse(t testing.TB, r io.Reader) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		t.Fatalf("parse the scrape: %v", err)
	}
	return fams
}

// Value returns the value (a histogram's count) of the first series of a
// family whose labels include the name=value pairs given, and whether there
// is one.
func Value(fams map[string]*dto.MetricFamily, name string, labels ...string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
series:
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		for i := 0; i+1 < len(labels); i += 2 {
			if have[labels[i]] != labels[i+1] {
				continue series
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

// Sample is a series a scrape should hold: its family, the name=value
// pairs of its labels (as Value takes them) and its value.
type Sample struct {
	Name   string
	Labels []string
	Value  float64
}

// Check fails t for every sample that fams lack or hold with another value.
func Check(t testing.TB, fams map[string]*dto.MetricFamily, want []Sample) {
	t.Helper()
	for _, w := range want {
		if got, ok := Value(fams, w.Name, w.Labels...); !ok || got != w.Value {
			t.Errorf("%s%v = %v (present %v), want %v", w.Name, w.Labels, got, ok, w.Value)
		}
	}
}
