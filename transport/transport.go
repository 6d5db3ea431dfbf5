// Package transport lists the sending transports courier has: each is a
// package under transport/ that brings its endpoints' settings, how they
// are read, checked, redacted and shown, and its sender, as one
// courier.TransportKind. The configuration, the API and the server go
// through this list; adding a transport is adding its package and its
// line here (docs/design.md §12).
package transport

import (
	"github.com/courier-gw/courier"
	amqptransport "github.com/courier-gw/courier/transport/amqp"
	filetransport "github.com/courier-gw/courier/transport/file"
	httptransport "github.com/courier-gw/courier/transport/http"
	natstransport "github.com/courier-gw/courier/transport/nats"
	smtptransport "github.com/courier-gw/courier/transport/smtp"
)

// Kinds are the sending transports, in the order messages name them.
var Kinds = []courier.TransportKind{
	httptransport.Kind,
	smtptransport.Kind,
	filetransport.Kind,
	amqptransport.Kind,
	natstransport.Kind,
}

// Kind returns the transport named t.
func Kind(t courier.Transport) (courier.TransportKind, bool) {
	for _, k := range Kinds {
		if k.Name == t {
			return k, true
		}
	}
	return courier.TransportKind{}, false
}

// Names lists the transports' names, in the order of Kinds.
func Names() []courier.Transport {
	out := make([]courier.Transport, len(Kinds))
	for i, k := range Kinds {
		out[i] = k.Name
	}
	return out
}
