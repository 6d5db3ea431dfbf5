//go:build !courier_clockshift

package main

import courier "github.com/courier-gw/courier"

// baseClock is this machine's clock.
func baseClock() courier.Clock { return courier.SystemClock{} }
