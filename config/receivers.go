package config

import (
	"path/filepath"
	"slices"
	"strings"

	"github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/check"
	"go.yaml.in/yaml/v3"
)

var receiverFields = []string{"transport", "type", "type_header", "route", "route_header", "id_header",
	"ordering_key_header", "recipient_header", "batch", "on_error"}

// receiverSourceFields are the fields each receive location's transport
// takes besides the common ones.
var receiverSourceFields = map[courier.ReceiverTransport][]string{
	courier.ReceiveAMQP: {"url", "queue"},
	courier.ReceiveNATS: {"url", "stream", "consumer"},
	courier.ReceiveDir:  {"path", "pattern", "settle", "done_marker"},
}

var allReceiverFields = func() []string {
	all := append([]string{}, receiverFields...)
	for _, t := range courier.ReceiverTransports {
		for _, f := range receiverSourceFields[t] {
			if !slices.Contains(all, f) {
				all = append(all, f)
			}
		}
	}
	return all
}()

// MaxReceiveBatch bounds a receive location's batch: one durable commit
// holds at most this many items, as one batch ingest does.
const MaxReceiveBatch = 10000

// receivers reads the receive locations (docs/design.md §13).
func (d *decoder) receivers(n *yaml.Node, c *Config, refs *[]ref) {
	for _, p := range d.entries(n, "receivers") {
		path := "receivers." + p.key
		d.checkName(p, path, courier.ValidName)
		o := d.object(p.value, path, p.line, allReceiverFields)
		r := &courier.Receiver{Name: p.key, Batch: courier.DefaultReceiveBatch, OnError: courier.OnErrorSuspend}
		var tr string
		if o.required("transport", ": one of amqp, nats, dir") {
			if l := o.str("transport", &tr); l > 0 && !slices.Contains(courier.ReceiverTransports, courier.ReceiverTransport(tr)) {
				d.errorf(l, o.field("transport"), "must be amqp, nats or dir, not %q", check.Clip(tr))
			}
		}
		r.Transport = courier.ReceiverTransport(tr)
		if own, ok := receiverSourceFields[r.Transport]; ok {
			for _, f := range o.order {
				if !slices.Contains(receiverFields, f) && !slices.Contains(own, f) {
					o.errorf(f, "not a field of %s receivers", r.Transport)
				}
			}
		}
		switch r.Transport {
		case courier.ReceiveAMQP:
			if o.required("url", ": amqp:// or amqps:// URL of the broker") {
				if l := o.str("url", &r.AMQP.URL); l > 0 && check.URL(r.AMQP.URL, "amqp", "amqps") != nil {
					d.errorf(l, o.field("url"), "must be an amqp:// or amqps:// URL")
				}
			}
			if o.required("queue", ": the queue to consume") {
				o.str("queue", &r.AMQP.Queue)
			}
		case courier.ReceiveNATS:
			if o.required("url", ": nats:// or tls:// URL of the server") {
				if l := o.str("url", &r.NATS.URL); l > 0 {
					for _, u := range strings.Split(r.NATS.URL, ",") {
						if check.URL(strings.TrimSpace(u), "nats", "tls") != nil {
							d.errorf(l, o.field("url"), "must be a nats:// or tls:// URL (several separated by commas)")
							break
						}
					}
				}
			}
			if o.required("stream", ": the JetStream stream to read") {
				o.str("stream", &r.NATS.Stream)
			}
			r.NATS.Consumer = p.key
			if l := o.str("consumer", &r.NATS.Consumer); l > 0 && (r.NATS.Consumer == "" || strings.ContainsAny(r.NATS.Consumer, ". *>\t")) {
				d.errorf(l, o.field("consumer"), "%q is not a consumer name: no spaces, dots or wildcards", check.Clip(r.NATS.Consumer))
			}
		case courier.ReceiveDir:
			if o.required("path", ": the directory to pick files up from") {
				o.str("path", &r.Dir.Path)
			}
			r.Dir.Pattern = "*"
			if l := o.str("pattern", &r.Dir.Pattern); l > 0 {
				if _, err := filepath.Match(r.Dir.Pattern, ""); err != nil || strings.Contains(r.Dir.Pattern, "/") {
					d.errorf(l, o.field("pattern"), "%q is not a pattern of file names (*.xml, invoice-*.json)", check.Clip(r.Dir.Pattern))
				}
			}
			r.Dir.Settle = courier.DefaultSettle
			if l := o.duration("settle", &r.Dir.Settle); l > 0 && r.Dir.Settle <= 0 {
				d.errorf(l, o.field("settle"), "must be greater than 0")
			}
			o.boolean("done_marker", &r.Dir.DoneMarker)
		}
		d.receiverMapping(o, r, refs)
		c.Receivers[p.key] = r
	}
}

// receiverMapping reads how an item becomes a message: its type, route and
// id, fixed or from its headers, and how many go into one commit.
func (d *decoder) receiverMapping(o *object, r *courier.Receiver, refs *[]ref) {
	if l := o.str("type", &r.Type); l > 0 && !courier.ValidType(r.Type) {
		d.errorf(l, o.field("type"), "%q is not a valid type: use letters, digits, '.', '_' or '-'", check.Clip(r.Type))
	}
	if l := o.str("route", &r.Route); l > 0 {
		r.Route = d.use(refs, ref{line: l, field: o.field("route"), kind: "route", name: r.Route})
	}
	for _, h := range []struct {
		name string
		dst  *string
	}{{"type_header", &r.TypeHeader}, {"route_header", &r.RouteHeader}, {"id_header", &r.IDHeader}, {"ordering_key_header", &r.OrderingKeyHeader}, {"recipient_header", &r.RecipientHeader}} {
		if l := o.str(h.name, h.dst); l > 0 && !courier.ValidHeaderName(*h.dst) {
			d.errorf(l, o.field(h.name), "%q is not a header name", check.Clip(*h.dst))
		}
	}
	if !o.bad && r.Type == "" && r.TypeHeader == "" {
		o.errorf("type", "required (or type_header): the type of the messages, or the header that carries it")
	}
	if l := o.integer("batch", &r.Batch); l > 0 && (r.Batch < 1 || r.Batch > MaxReceiveBatch) {
		d.errorf(l, o.field("batch"), "must be from 1 to %d", MaxReceiveBatch)
	}
	oneOf(o, "on_error", &r.OnError, courier.OnErrorSuspend, courier.OnErrorStop)
}
