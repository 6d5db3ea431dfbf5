package file

import (
	"fmt"
	"slices"
	"strings"

	"github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/check"
)

// Kind is the file transport as the configuration, the API and the server
// know it (package transport lists it).
var Kind = courier.NewTransportKind(courier.TransportFile, []string{"dir", "name"}, decode, wire,
	func(o courier.SenderOptions) *Transport { return New(Options{Logger: o.Logger}) })

// Settings are a file endpoint's settings.
type Settings struct {
	Dir  string
	Name string // name template: {id}, {type}, {time}
}

// Of returns the file settings of e, giving e empty ones if it has none:
// for whoever makes an endpoint.
func Of(e *courier.Endpoint) *Settings { return courier.SettingsOf[Settings](e) }

// settingsOf returns the file settings of e, empty ones if it has none,
// without changing e.
func settingsOf(e *courier.Endpoint) *Settings { return courier.SettingsIn[Settings](e) }

// Target is the directory.
func (s *Settings) Target() string { return s.Dir }

// Redacted returns a copy: a file endpoint has no secrets.
func (s *Settings) Redacted() courier.Settings {
	c := *s
	return &c
}

func decode(f courier.SettingsFields) *Settings {
	s := &Settings{Name: "{id}"}
	if f.Required("dir", ": the directory files are written to") {
		if l := f.String("dir", &s.Dir); l > 0 && strings.TrimSpace(s.Dir) == "" {
			f.ErrorAt(l, f.Field("dir"), "must not be empty")
		}
	}
	if l := f.String("name", &s.Name); l > 0 {
		if err := checkNameTemplate(s.Name); err != nil {
			f.ErrorAt(l, f.Field("name"), "%v", err)
		}
	}
	return s
}

// checkNameTemplate accepts a file name with the placeholders {id}, {type}
// and {time}; it must stay one name inside the endpoint's directory.
func checkNameTemplate(s string) error {
	if s == "" || s == "." || s == ".." {
		return fmt.Errorf("must be a file name such as {id}.xml")
	}
	if strings.ContainsAny(s, `/\`) {
		return fmt.Errorf("must be a name without / or \\: files stay in dir")
	}
	for rest := s; rest != ""; {
		i := strings.IndexAny(rest, "{}")
		if i < 0 {
			break
		}
		if rest[i] == '}' {
			return fmt.Errorf("has a } without {")
		}
		end := strings.IndexByte(rest[i:], '}')
		if end < 0 {
			return fmt.Errorf("has a { without }")
		}
		if p := rest[i+1 : i+end]; !slices.Contains([]string{"id", "type", "time"}, p) {
			return fmt.Errorf("{%s} is not a placeholder: use {id}, {type} or {time}", check.Clip(p))
		}
		rest = rest[i+end+1:]
	}
	return nil
}

// Wire are a file endpoint's settings as the API shows them.
type Wire struct {
	Dir  string `json:"dir"`
	Name string `json:"name,omitempty"`
}

func wire(s *Settings) Wire { return Wire{Dir: s.Dir, Name: s.Name} }
