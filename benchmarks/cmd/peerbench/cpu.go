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
// and the receiver), and by each database server's processes on this
// machine (for PostgreSQL the backends of every connection, River's
// included, and the WAL writer), as the kernel counts them; a server none
// of whose processes can be read (one elsewhere) is missing from server.
type cpuTimes struct {
	self   time.Duration
	server map[string]time.Duration // by serverOf's kind
}

// serverOf maps a process's command to the database server it belongs to.
var serverOf = map[string]string{"postgres": "postgres", "mariadbd": "mysql", "mysqld": "mysql"}

// readCPU reads cpuTimes. A server process that ends during a measurement
// takes its CPU time with it, so the pools are kept open across rounds.
func readCPU() cpuTimes {
	t := cpuTimes{self: selfCPU(), server: map[string]time.Duration{}}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, path := range stats {
		command, used, ok := procCPU(path)
		if kind, known := serverOf[command]; ok && known {
			t.server[kind] += used
		}
	}
	return t
}

// selfCPU is the CPU time this process has used so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procCPU reads a process's command and the CPU time it has used from its
// /proc/<pid>/stat file; ok is false when the process has ended or the file
// does not parse.
func procCPU(statPath string) (command string, used time.Duration, ok bool) {
	b, err := os.ReadFile(statPath)
	if err != nil {
		return "", 0, false
	}
	s := string(b)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return "", 0, false
	}
	// Fields after the command name: utime and stime are the 12th and
	// 13th, in clock ticks (100 per second on Linux).
	f := strings.Fields(s[end+1:])
	if len(f) < 13 {
		return "", 0, false
	}
	u, _ := strconv.Atoi(f[11])
	st, _ := strconv.Atoi(f[12])
	return s[open+1 : end], time.Duration(u+st) * 10 * time.Millisecond, true
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
