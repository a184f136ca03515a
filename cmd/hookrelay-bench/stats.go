package main

import (
	"slices"
	"time"
)

// round is one measurement of the ceiling followed by one drain.
type round struct {
	ceiling    float64       // requests/s
	ceilingCPU time.Duration // process CPU per request
	throughput float64       // deliveries/s
	cpu        time.Duration // process CPU per delivery
}

func (r round) ratio() float64 { return r.throughput / r.ceiling }

type backendResult struct {
	name     string
	rounds   []round
	offered  float64
	p50, p99 time.Duration
	peakHeap uint64 // peak heap in use over the drains
}

// median returns the round with the median ratio.
func (b backendResult) median() round {
	rs := slices.Clone(b.rounds)
	slices.SortFunc(rs, func(x, y round) int {
		switch {
		case x.ratio() < y.ratio():
			return -1
		case x.ratio() > y.ratio():
			return 1
		}
		return 0
	})
	return rs[len(rs)/2]
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(int(p*float64(len(s))), len(s)-1)]
}
