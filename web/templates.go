package web

import (
	"fmt"
	"html/template"
	"io/fs"
	"maps"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
)

// parsePages parses each page with the layout, once at start.
func parsePages() map[string]*template.Template {
	names, err := fs.Glob(files, "templates/*.html")
	if err != nil {
		panic(err)
	}
	pages := map[string]*template.Template{}
	for _, n := range names {
		base := path.Base(n)
		if base == "layout.html" {
			continue
		}
		pages[base] = template.Must(template.New(base).Funcs(funcs).ParseFS(files, "templates/layout.html", n))
	}
	return pages
}

var funcs = template.FuncMap{
	"when": when,
	// whenp is when for an optional time.
	"whenp": func(t *time.Time) string {
		if t == nil {
			return "-"
		}
		return when(*t)
	},
	// ago says how long before (or after) now a time is.
	"ago": func(now time.Time, t *time.Time) string {
		if t == nil || t.IsZero() {
			return ""
		}
		d := now.Sub(*t).Round(time.Second)
		switch {
		case d < -time.Second:
			return "in " + (-d).String()
		case d < time.Second:
			return "now"
		default:
			return d.String() + " ago"
		}
	},
	"short": func(s string, n int) string {
		s = strings.Join(strings.Fields(s), " ")
		if len(s) <= n {
			return s
		}
		for n > 0 && s[n]&0xC0 == 0x80 {
			n--
		}
		return s[:n] + "…"
	},
	// ms shows a duration in milliseconds.
	"ms": func(v float64) string {
		if v >= 1000 {
			return fmt.Sprintf("%.2f s", v/1000)
		}
		return fmt.Sprintf("%.0f ms", v)
	},
	"persec": func(v float64) string { return fmt.Sprintf("%.2f", v) },
	// outcomes lists an endpoint's recent outcomes, deliveries first.
	"outcomes": func(m map[string]int) []string {
		var out []string
		if n := m["delivered"]; n > 0 {
			out = append(out, fmt.Sprintf("delivered %d", n))
		}
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if k != "delivered" && m[k] > 0 {
				out = append(out, fmt.Sprintf("%s %d", k, m[k]))
			}
		}
		return out
	},
	// held says why a queued message is held (api.Hold), as of now.
	"held": func(now time.Time, h *api.Hold) string {
		var why string
		switch {
		case h.State == courier.HealthOff:
			why = "switched off"
			if h.By != "" {
				why += " by " + h.By
			}
			if h.Since != nil {
				why += " at " + when(*h.Since)
			}
		case h.Until != nil && h.Until.After(now):
			why = "suspended until " + when(*h.Until) + " (in " + h.Until.Sub(now).Round(time.Second).String() + ")"
		default:
			why = "suspended; its probe attempt is due"
		}
		if len(h.Also) > 0 {
			why += "; also held by " + strings.Join(h.Also, ", ")
		}
		return why
	},
	"pathesc": url.PathEscape,
	"percent": func(f float64) string { return fmt.Sprintf("%.0f%%", 100*f) },
	"ptr":     func(t time.Time) *time.Time { return &t },
	// size shows a number of bytes in the largest unit it fills.
	"size": func(n int64) string {
		units := []string{"KiB", "MiB", "GiB", "TiB"}
		if n < 1024 {
			return fmt.Sprintf("%d bytes", n)
		}
		v, u := float64(n)/1024, 0
		for v >= 1024 && u < len(units)-1 {
			v, u = v/1024, u+1
		}
		return fmt.Sprintf("%.1f %s", v, units[u])
	},
	"kib": func(n int) string {
		if n < 1024 {
			return fmt.Sprintf("%d bytes", n)
		}
		return fmt.Sprintf("%.1f KiB", float64(n)/1024)
	},
}

// when shows a time in UTC to the second.
func when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05") + " UTC"
}
