//go:build courier_clockshift

package main

import (
	"os"
	"time"

	courier "github.com/courier-gw/courier"
)

// baseClock is, in a build for the tests of clocks that disagree, this
// machine's clock shifted by COURIER_CLOCK_SHIFT (a Go duration, such as
// 30s or -30s): a node whose clock is that far off.
func baseClock() courier.Clock {
	shift, _ := time.ParseDuration(os.Getenv("COURIER_CLOCK_SHIFT"))
	return shiftedClock(shift)
}

type shiftedClock time.Duration

func (s shiftedClock) Now() time.Time { return time.Now().Add(time.Duration(s)) }
