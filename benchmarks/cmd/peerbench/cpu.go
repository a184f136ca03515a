package main

import (
	"time"

	"github.com/hookrelay/hookrelay/internal/proccpu"
)

// cpuTimes is CPU time used so far: by this process (the systems' Go code
// and the receiver), and by each database server's processes on this
// machine (for PostgreSQL the backends of every connection, River's
// included, and the WAL writer), as the kernel counts them; a server none
// of whose processes can be read (one elsewhere) is missing from server.
type cpuTimes struct {
	self   time.Duration
	server map[string]time.Duration // by proccpu.ServerOf's kind
}

// readCPU reads cpuTimes. A server process that ends during a measurement
// takes its CPU time with it, so the pools are kept open across rounds.
func readCPU() cpuTimes {
	return cpuTimes{self: proccpu.Self(), server: proccpu.Servers()}
}

// span times one delivery phase: wall clock and CPU.
type span struct {
	start time.Time
	cpu0  cpuTimes
}

func beginSpan() span { return span{cpu0: readCPU(), start: time.Now()} }

// measured is what a span saw.
type measured struct {
	elapsed time.Duration
	self    time.Duration
	server  map[string]time.Duration // by kind, for each server seen at both ends
}

func (s span) end() measured {
	elapsed := time.Since(s.start)
	c := readCPU()
	m := measured{elapsed: elapsed, self: c.self - s.cpu0.self, server: map[string]time.Duration{}}
	for kind, t := range c.server {
		if t0, ok := s.cpu0.server[kind]; ok {
			m.server[kind] = t - t0
		}
	}
	return m
}

// cpuPer is the CPU time per delivery, this process and the given
// server's (none: "") together, in microseconds, and whether that server's
// processes were read.
func (m measured) cpuPer(n int, server string) (float64, bool) {
	t, seen := m.server[server]
	return float64(m.self+t) / float64(time.Microsecond) / float64(n), seen || server == ""
}
