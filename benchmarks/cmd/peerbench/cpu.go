package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cpuTimes is CPU time used so far: by this process (the systems' Go code
// and the receiver), and by the PostgreSQL server's processes on this
// machine (backends of every connection, River's included, and the WAL
// writer), as the kernel counts them; server is zero when no PostgreSQL
// process can be read (a server elsewhere).
type cpuTimes struct {
	self, server time.Duration
	serverSeen   bool
}

// readCPU reads cpuTimes. PostgreSQL's processes are those whose command
// is "postgres"; one that ends during a measurement takes its CPU time with
// it, so the pools are kept open across rounds.
func readCPU() cpuTimes {
	var t cpuTimes
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		t.self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // ended meanwhile
		}
		s := string(b)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open || s[open+1:end] != "postgres" {
			continue
		}
		// Fields after the command name: utime and stime are the 12th and
		// 13th, in clock ticks (100 per second on Linux).
		f := strings.Fields(s[end+1:])
		if len(f) < 13 {
			continue
		}
		u, _ := strconv.Atoi(f[11])
		st, _ := strconv.Atoi(f[12])
		t.server += time.Duration(u+st) * 10 * time.Millisecond
		t.serverSeen = true
	}
	return t
}

// span times one delivery phase: wall clock and CPU.
type span struct {
	start time.Time
	cpu0  cpuTimes
}

func beginSpan() span { return span{cpu0: readCPU(), start: time.Now()} }

// measured is what a span saw.
type measured struct {
	elapsed      time.Duration
	self, server time.Duration
	serverSeen   bool
}

func (s span) end() measured {
	elapsed := time.Since(s.start)
	c := readCPU()
	return measured{elapsed: elapsed, self: c.self - s.cpu0.self, server: c.server - s.cpu0.server,
		serverSeen: c.serverSeen && s.cpu0.serverSeen}
}

// cpuPer is the CPU time per delivery, this process and the server
// together, in microseconds.
func (m measured) cpuPer(n int) float64 {
	return float64(m.self+m.server) / float64(time.Microsecond) / float64(n)
}
