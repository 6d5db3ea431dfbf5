package metrics

import (
	courier "github.com/courier-gw/courier"
	"github.com/prometheus/client_golang/prometheus"
)

// lookupCollector reports the recipient lookups' cache from its counters:
// a scrape costs nothing but reading them.
type lookupCollector struct {
	stats func() courier.LookupStats
	desc  *prometheus.Desc
}

// NewLookupCollector returns a collector of courier_lookups_total by
// result: hit (from the cache), miss (the registry asked), failure (the
// registry could not be asked or answered nonsense) and not_registered.
func NewLookupCollector(stats func() courier.LookupStats) prometheus.Collector {
	return lookupCollector{stats: stats, desc: prometheus.NewDesc("courier_lookups_total",
		"Recipient lookups on this node by result: hit and miss of the cache; of the misses, failure and not_registered.", []string{"result"}, nil)}
}

func (c lookupCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c lookupCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stats()
	for _, v := range []struct {
		result string
		n      int64
	}{{"hit", s.Hits}, {"miss", s.Misses}, {"failure", s.Failures}, {"not_registered", s.NotRegistered}} {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(v.n), v.result)
	}
}
