package linerecord

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// timestampLayout parses the event time of a line from its --timestamp-field: one of the named
// layouts, or a Go time layout.
type timestampLayout struct {
	unit   time.Duration // the unix forms: the unit of the number; 0 for a text layout
	layout string        // a text layout for time.Parse
}

// The named layouts of --timestamp-layout.
var namedTimestampLayouts = map[string]timestampLayout{
	// time.Parse accepts a fractional second after the seconds even when the layout has none,
	// so RFC3339 takes "…:05Z" and "…:05.123456Z" alike.
	"rfc3339":     {layout: time.RFC3339},
	"rfc3339nano": {layout: time.RFC3339Nano},
	"unix":        {unit: time.Second},
	"unix_ms":     {unit: time.Millisecond},
	"unix_us":     {unit: time.Microsecond},
	"unix_ns":     {unit: time.Nanosecond},
}

// parseTimestampLayout resolves a --timestamp-layout value. A Go layout must format a known
// instant into something that parses back to that instant, or it is not a layout at all (a
// typo such as "rfc3399" would otherwise match nothing, silently, on every line).
func parseTimestampLayout(s string) (timestampLayout, error) {
	if s == "" {
		s = "rfc3339" // the default, for a Config not from DefaultConfig
	}
	if l, ok := namedTimestampLayouts[strings.ToLower(s)]; ok {
		return l, nil
	}
	ref := time.Date(2009, time.November, 10, 23, 4, 5, 0, time.UTC)
	formatted := ref.Format(s)
	if formatted == s {
		return timestampLayout{}, fmt.Errorf("%q is neither rfc3339, rfc3339nano, unix, unix_ms, unix_us, unix_ns nor a Go time layout (such as 2006-01-02T15:04:05.000Z07:00)", s)
	}
	back, err := time.Parse(s, formatted)
	if err != nil {
		return timestampLayout{}, fmt.Errorf("%q is not a usable Go time layout: %v", s, err)
	}
	if back.Year() != ref.Year() {
		// A layout without a year would date every line in year 0.
		return timestampLayout{}, fmt.Errorf("%q has no year (2006): not a usable Go time layout (named: rfc3339, rfc3339nano, unix, unix_ms, unix_us, unix_ns)", s)
	}
	return timestampLayout{layout: s}, nil
}

// parse reads v (a field's value: a string unquoted, a number as written) in the layout.
func (l timestampLayout) parse(v []byte) (time.Time, bool) {
	if l.unit == 0 {
		t, err := time.Parse(l.layout, string(v))
		return t, err == nil
	}
	return parseUnix(v, l.unit)
}

// parseUnix reads a decimal number of units since the Unix epoch. Integer and fraction are
// read apart, so that unix_ns values and millisecond fractions of unix seconds keep every
// digit (a float64 holds only about 15 digits); an exponent form goes through a float.
func parseUnix(v []byte, unit time.Duration) (time.Time, bool) {
	if len(v) == 0 {
		return time.Time{}, false
	}
	if bytes.ContainsAny(v, "eE") {
		f, err := strconv.ParseFloat(string(v), 64)
		ns := f * float64(unit)
		if err != nil || math.IsNaN(ns) || ns > math.MaxInt64 || ns < math.MinInt64 {
			return time.Time{}, false
		}
		return time.Unix(0, int64(ns)).UTC(), true
	}
	neg := v[0] == '-'
	if neg {
		v = v[1:]
	}
	intPart, frac, _ := bytes.Cut(v, []byte("."))
	if len(intPart) == 0 || !allDigits(intPart) || !allDigits(frac) {
		return time.Time{}, false
	}
	n, err := strconv.ParseInt(string(intPart), 10, 64)
	if err != nil || n > math.MaxInt64/int64(unit) {
		return time.Time{}, false
	}
	ns := n * int64(unit)
	// The fraction's first digits, up to a nanosecond.
	scale := int64(unit) / 10
	for _, c := range frac {
		if scale == 0 {
			break
		}
		ns += int64(c-'0') * scale
		scale /= 10
	}
	if neg {
		ns = -ns
	}
	return time.Unix(0, ns).UTC(), true
}

func allDigits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
