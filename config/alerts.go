package config

import (
	"slices"

	"github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/check"
)

var alertsFields = []string{"notify", "oldest_due", "max_per_hour"}

// alerts reads the alerts section: the endpoints that hear of operational
// events, when a route lags, and how many notices a subject may send in
// an hour. The notify endpoints are checked like an escalation's (they
// exist and take notices); with the topology in the store they are checked
// when a notice is sent, as the store's endpoints may change.
func (d *decoder) alerts(o *object, c *Config, refs *[]ref) {
	a := o.sub("alerts", alertsFields)
	if a == nil {
		return
	}
	if items, ok := a.list("notify"); ok {
		for _, it := range items {
			if slices.Contains(c.Alerts.Notify, it.value) {
				d.errorf(it.line, it.field, "endpoint %q is listed twice", check.Clip(it.value))
				continue
			}
			c.Alerts.Notify = append(c.Alerts.Notify, d.use(refs, ref{line: it.line, field: it.field, kind: "endpoint", name: it.value, notice: true}))
		}
	}
	if l := a.duration("oldest_due", &c.Alerts.OldestDue); l > 0 && c.Alerts.OldestDue <= 0 {
		d.errorf(l, a.field("oldest_due"), "must be greater than 0")
	}
	if l := a.integer("max_per_hour", &c.Alerts.MaxPerHour); l > 0 && c.Alerts.MaxPerHour < 1 {
		d.errorf(l, a.field("max_per_hour"), "must be at least 1")
	}
}

// defaultAlerts is the alerts section of a file that has none: events are
// recorded, no endpoint is notified.
func defaultAlerts() courier.Alerts {
	return courier.Alerts{OldestDue: courier.DefaultOldestDue, MaxPerHour: courier.DefaultAlertsPerHour}
}
