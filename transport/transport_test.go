package transport_test

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"slices"
	"testing"

	"github.com/courier-gw/courier"
	"github.com/courier-gw/courier/transport"
)

// Every registered transport brings every piece: a name, its fields, a
// decoder, redaction, a wire view and a sender.
func TestEveryKindIsComplete(t *testing.T) {
	t.Parallel()
	if len(transport.Kinds) == 0 {
		t.Fatal("no transport is registered")
	}
	var names []courier.Transport
	for _, k := range transport.Kinds {
		t.Run(string(k.Name), func(t *testing.T) {
			switch {
			case k.Name == "":
				t.Fatal("no name")
			case len(k.Fields) == 0:
				t.Error("no Fields")
			case k.Decode == nil:
				t.Fatal("no Decode")
			case k.Wire == nil:
				t.Fatal("no Wire")
			case k.NewSender == nil:
				t.Fatal("no NewSender")
			}
			s := k.Decode(&fields{})
			if s == nil {
				t.Fatal("Decode returned no settings")
			}
			r := s.Redacted()
			if r == nil || reflect.TypeOf(r) != reflect.TypeOf(s) {
				t.Fatalf("Redacted returned %T, want %T", r, s)
			}
			if w := k.Wire(r); w == nil {
				t.Error("Wire returned nothing")
			} else if b, err := json.Marshal(w); err != nil || b[0] != '{' {
				t.Errorf("Wire's view is %s (%v), want a JSON object", b, err)
			}
			sender := k.NewSender(courier.SenderOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if sender == nil {
				t.Fatal("NewSender returned nothing")
			}
			sender.Close()
		})
		if slices.Contains(names, k.Name) {
			t.Errorf("%s is registered twice", k.Name)
		}
		names = append(names, k.Name)
	}
}

// fields are an endpoint with no fields: Decode reports what is required.
type fields struct{ errs []string }

func (f *fields) Has(string) bool                               { return false }
func (f *fields) Required(name, hint string) bool               { f.Errorf(name, "required%s", hint); return false }
func (f *fields) String(string, *string) int                    { return 0 }
func (f *fields) Bool(string, *bool) int                        { return 0 }
func (f *fields) List(string) ([]courier.FieldItem, bool)       { return nil, false }
func (f *fields) Len(string) int                                { return 0 }
func (f *fields) Networks(string) []string                      { return nil }
func (f *fields) Sub(string, []string) courier.SettingsFields   { return nil }
func (f *fields) Entries(string, []string) []courier.FieldEntry { return nil }
func (f *fields) Field(name string) string                      { return "endpoints.e." + name }
func (f *fields) Malformed() bool                               { return false }
func (f *fields) Errorf(name, format string, args ...any) {
	f.ErrorAt(1, f.Field(name), format, args...)
}
func (f *fields) ErrorAt(_ int, field, format string, args ...any) {
	f.errs = append(f.errs, field+": "+fmt.Sprintf(format, args...))
}
