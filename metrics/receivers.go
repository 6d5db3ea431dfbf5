package metrics

import (
	courier "github.com/courier-gw/courier"
	"github.com/prometheus/client_golang/prometheus"
)

// receiverCollector reports the receive locations from their statuses,
// which the receivers keep in memory: a scrape costs no store query.
type receiverCollector struct {
	statuses func() []courier.ReceiverStatus
	received *prometheus.Desc
	invalid  *prometheus.Desc
	redeliv  *prometheus.Desc
	pending  *prometheus.Desc
	up       *prometheus.Desc
}

// NewReceiverCollector returns a collector of the receive locations'
// metrics: items stored and stored as invalid (counters), items waiting
// at the source (the lag) and the state.
func NewReceiverCollector(statuses func() []courier.ReceiverStatus) prometheus.Collector {
	return receiverCollector{
		statuses: statuses,
		received: prometheus.NewDesc("courier_receiver_received_total",
			"Messages stored from a receive location on this node (repeated deliveries of one item count once).", []string{"receiver"}, nil),
		invalid: prometheus.NewDesc("courier_receiver_invalid_total",
			"Items of a receive location stored as suspended (invalid or no_route) on this node.", []string{"receiver"}, nil),
		redeliv: prometheus.NewDesc("courier_receiver_redelivered_total",
			"Items a receive location's source handed out again on this node (releases, lost acknowledgements, restarts).", []string{"receiver"}, nil),
		pending: prometheus.NewDesc("courier_receiver_pending",
			"Items waiting at a receive location's source, as last counted (the receiver's lag).", []string{"receiver"}, nil),
		up: prometheus.NewDesc("courier_receiver_state",
			"1 for the state a receive location is in on this node (running, connecting, stopped).", []string{"receiver", "state"}, nil),
	}
}

func (c receiverCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.received
	ch <- c.invalid
	ch <- c.redeliv
	ch <- c.pending
	ch <- c.up
}

func (c receiverCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.statuses() {
		ch <- prometheus.MustNewConstMetric(c.received, prometheus.CounterValue, float64(s.Received), s.Name)
		ch <- prometheus.MustNewConstMetric(c.invalid, prometheus.CounterValue, float64(s.Invalid), s.Name)
		ch <- prometheus.MustNewConstMetric(c.redeliv, prometheus.CounterValue, float64(s.Redelivered), s.Name)
		if s.Pending >= 0 {
			ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(s.Pending), s.Name)
		}
		for _, state := range []string{courier.ReceiverRunning, courier.ReceiverConnecting, courier.ReceiverStopped} {
			v := 0.0
			if s.State == state {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, v, s.Name, state)
		}
	}
}
