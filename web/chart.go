package web

import (
	"fmt"

	"github.com/courier-gw/courier/api"
)

// chart is the overview's bar chart of the last hour, drawn as inline SVG
// on the server: one bar per minute, deliveries below, failed attempts
// stacked on them.
type chart struct {
	Width, Height int
	Top, Bottom   int // the plot's top and bottom edges
	Bars          []chartBar
	Max           int // the value at the top edge
}

type chartBar struct {
	X, W   int
	DY, DH int // the deliveries' rectangle
	FY, FH int // the failures' rectangle
	Title  string
	Empty  bool
}

const (
	chartWidth  = 600
	chartHeight = 140
	chartTop    = 12
	chartBottom = 118
)

func newChart(minutes []api.MinuteStats) chart {
	c := chart{Width: chartWidth, Height: chartHeight, Top: chartTop, Bottom: chartBottom}
	for _, m := range minutes {
		c.Max = max(c.Max, m.Delivered+m.Failed)
	}
	if len(minutes) == 0 {
		return c
	}
	scale := max(c.Max, 1)
	plot := chartBottom - chartTop
	step := chartWidth / len(minutes)
	for i, m := range minutes {
		dh := m.Delivered * plot / scale
		fh := m.Failed * plot / scale
		if m.Delivered > 0 && dh == 0 {
			dh = 1 // one is still visible
		}
		if m.Failed > 0 && fh == 0 {
			fh = 1
		}
		clock := m.Start.UTC().Format("15:04")
		c.Bars = append(c.Bars, chartBar{
			X: i * step, W: max(step-1, 1),
			DY: chartBottom - dh, DH: dh,
			FY: chartBottom - dh - fh, FH: fh,
			Title: fmt.Sprintf("%s UTC: %d delivered, %d failed", clock, m.Delivered, m.Failed),
			Empty: m.Delivered == 0 && m.Failed == 0,
		})
	}
	return c
}
