package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// sizeUnits maps the accepted suffixes to their multipliers: binary units
// for the way sizes are written in the design, decimal ones because people
// write them too.
var sizeUnits = map[string]int64{
	"":    1,
	"b":   1,
	"kib": 1 << 10,
	"mib": 1 << 20,
	"gib": 1 << 30,
	"tib": 1 << 40,
	"kb":  1000,
	"mb":  1000 * 1000,
	"gb":  1000 * 1000 * 1000,
	"tb":  1000 * 1000 * 1000 * 1000,
}

// ParseSize parses a byte count such as "1MiB", "512KiB", "32MB" or a plain
// "1048576". Units are case-insensitive; KiB, MiB, GiB and TiB are powers of
// 1024, KB, MB, GB and TB powers of 1000.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	if i == 0 {
		return 0, fmt.Errorf("%q is not a size: write a whole number of bytes, or one with a unit such as 512KiB, 1MiB, 1GiB or 10MB", s)
	}
	unit, ok := sizeUnits[strings.ToLower(strings.TrimSpace(t[i:]))]
	if !ok {
		return 0, fmt.Errorf("%q is not a size: the unit must be one of B, KiB, MiB, GiB, TiB, KB, MB, GB or TB", s)
	}
	n, err := strconv.ParseInt(t[:i], 10, 64)
	if err != nil || n > math.MaxInt64/unit {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return n * unit, nil
}
