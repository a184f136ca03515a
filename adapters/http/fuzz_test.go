package hookhttp

import (
	"strconv"
	"testing"
	"time"
)

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{
		"0", "120", " 5 ", "-1", "1.5", "+3", "1e3", "", "soon",
		"99999999999999999999999",
		"Wed, 21 Oct 2015 07:28:00 GMT",
		"Wednesday, 21-Oct-15 07:28:00 GMT",
		"Wed Oct 21 07:28:00 2015",
		"Mon, 01 Jan 0001 00:00:00 GMT",
		"Fri, 31 Dec 9999 23:59:59 GMT",
	} {
		f.Add(s)
	}
	now := time.Date(2015, 10, 21, 7, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, v string) {
		d, ok := ParseRetryAfter(v, now)
		if d < 0 {
			t.Fatalf("negative delay %v for %q", d, v)
		}
		if !ok && d != 0 {
			t.Fatalf("invalid %q gave %v", v, d)
		}
		if secs, err := strconv.ParseInt(v, 10, 64); err == nil && secs >= 0 && secs < 1<<31 && isDigits(v) {
			if !ok || d != time.Duration(secs)*time.Second {
				t.Fatalf("%q: got %v, %v", v, d, ok)
			}
		}
	})
}
