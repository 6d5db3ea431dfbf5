package courier

import (
	"log/slog"
	"net/netip"
)

// Settings are what an endpoint's transport needs besides the rules every
// endpoint has: a URL and secrets, a mail server and its addresses, a
// directory. The transport's package defines the type and describes it in
// a TransportKind; the rest of courier knows it through this interface.
type Settings interface {
	// Target says where the endpoint delivers: a URL, smtp://host:port, a
	// directory. It may hold secrets until the settings are Redacted.
	Target() string
	// Redacted returns a copy fit to show or log: secrets replaced by
	// Redacted, passwords and query values left out of URLs (RedactURL).
	Redacted() Settings
}

// TransportKind is what a sending transport brings: its name, the fields
// its endpoints take, how they are read and checked, and how the API shows
// them. Every transport is one TransportKind in one list (package
// transport), which the configuration, the API and the server go through.
type TransportKind struct {
	Name Transport
	// Fields are the fields its endpoints take besides those every
	// endpoint has (endpoints.NAME.url, .subject, ...).
	Fields []string
	// Decode reads and checks the settings from an endpoint's fields,
	// reporting each problem through f; the settings it returns hold the
	// transport's defaults where a field is left out.
	Decode func(f SettingsFields) Settings
	// Wire is the settings as the API shows them (GET /v1/routes), under
	// the transport's name; s is redacted already.
	Wire func(s Settings) any
	// NewSender makes the transport's sender.
	NewSender func(o SenderOptions) ClosingSender
}

// NewTransportKind describes a transport whose endpoints' settings are
// *S: decode reads and checks them, wire shows them as the API does, and
// newSender makes its sender. Each transport declares its Kind with it, in
// its own types.
func NewTransportKind[S any, PS interface {
	*S
	Settings
}, W any, C ClosingSender](name Transport, fields []string, decode func(SettingsFields) PS, wire func(PS) W,
	newSender func(SenderOptions) C) TransportKind {
	return TransportKind{
		Name:      name,
		Fields:    fields,
		Decode:    func(f SettingsFields) Settings { return decode(f) },
		Wire:      func(s Settings) any { return wire(s.(PS)) },
		NewSender: func(o SenderOptions) ClosingSender { return newSender(o) },
	}
}

// SenderOptions are what the server gives every sender it makes; each
// takes what concerns it.
type SenderOptions struct {
	Logger *slog.Logger
	// AllowNetworks are the networks an http endpoint may reach despite
	// the SSRF guard (outbound.allow_networks).
	AllowNetworks []netip.Prefix
	// PublicURL is where receivers reach courier (claim-check notices).
	PublicURL string
}

// ClosingSender is a Sender that holds connections, closed once the
// engine has stopped.
type ClosingSender interface {
	Sender
	Close()
}

// SettingsFields are the fields of one endpoint as the configuration reads
// them, for a TransportKind's Decode: every value comes with its line, and
// every problem is reported with file, line and field (endpoints.acme.url).
type SettingsFields interface {
	// Has reports whether the field is given, even with an empty value.
	Has(name string) bool
	// Required reports the field as missing, with hint after "required",
	// and tells whether it is there.
	Required(name, hint string) bool
	// String and Bool store the field's value in dst when it is given and
	// well-formed, and return its line (0 otherwise).
	String(name string, dst *string) int
	Bool(name string, dst *bool) int
	// List returns the elements of a list field; ok is false when the
	// field is absent or not a list. Len is how many entries the list
	// has, those that could not be read included.
	List(name string) (items []FieldItem, ok bool)
	Len(name string) int
	// Networks reads a list of networks in CIDR notation.
	Networks(name string) []string
	// Sub returns the mapping in the field, which takes the known fields,
	// or nil when it is absent.
	Sub(name string, known []string) SettingsFields
	// Entries returns the entries of a mapping whose keys are chosen by
	// the user (an http endpoint's headers), in order: each value is a
	// single value, or a mapping that takes the known fields, read as Sub.
	// The field not being a mapping is reported; nil when it is absent.
	Entries(name string, known []string) []FieldEntry
	// Field returns the path of the field (endpoints.acme.url).
	Field(name string) string
	// Errorf reports a problem of the field, at its line.
	Errorf(name, format string, args ...any)
	// ErrorAt reports a problem at a line and a field path.
	ErrorAt(line int, field, format string, args ...any)
	// Malformed reports that the endpoint is not a mapping (already
	// reported), so that nothing in it is missing.
	Malformed() bool
}

// FieldItem is one element of a list field, with its line and path
// (endpoints.mail.to[2]).
type FieldItem struct {
	Value string
	Line  int
	Field string
}

// FieldEntry is one entry of a mapping read by SettingsFields.Entries:
// its key, its line and path (endpoints.crm.headers.X-Api-Key), and its
// value, which is Value, or Sub when it is a mapping.
type FieldEntry struct {
	Key   string
	Line  int
	Field string
	Value string
	Sub   SettingsFields
}

// SettingsOf returns e's settings of the transport whose settings are *S,
// giving e empty ones if it has none: for whoever makes an endpoint. Each
// transport's Of is this for its own type.
func SettingsOf[S any, PS interface {
	*S
	Settings
}](e *Endpoint) PS {
	s := SettingsIn[S, PS](e)
	if e.Settings != Settings(s) {
		e.Settings = s // it had none of the type
	}
	return s
}

// SettingsIn returns e's settings of the type *S, or empty ones if it has
// none, without changing e: for a sender reading the endpoint it is given.
func SettingsIn[S any, PS interface {
	*S
	Settings
}](e *Endpoint) PS {
	if s, ok := e.Settings.(PS); ok {
		return s
	}
	return PS(new(S))
}
