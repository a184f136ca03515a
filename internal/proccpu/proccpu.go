// Package proccpu reads the CPU time this process and the database
// servers on this machine have used, as the kernel counts it in /proc, for
// the benchmarks: a SQL store's work is split between this process and the
// server's, and on a machine of two cores both count.
//
// Written by hand: what it needs is one field of /proc/<pid>/stat for the
// processes named like a database server, which no library reads alone.
package proccpu

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ServerOf maps a process's command to the database server it belongs to:
// "postgres" or "mysql".
var ServerOf = map[string]string{"postgres": "postgres", "mariadbd": "mysql", "mysqld": "mysql"}

// Self is the CPU time (user and system) this process has used so far.
func Self() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Servers is the CPU time used so far by each database server's processes
// on this machine, by ServerOf's kind; a server none of whose processes
// can be read (one on another machine) is missing. A process that ends
// takes its CPU time with it: keep connections open across a measurement.
func Servers() map[string]time.Duration {
	used := map[string]time.Duration{}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, path := range stats {
		command, t, ok := Stat(path)
		if kind, known := ServerOf[command]; ok && known {
			used[kind] += t
		}
	}
	return used
}

// Stat reads a process's command and the CPU time it has used from its
// /proc/<pid>/stat file; ok is false when the process has ended or the
// file does not parse. The command is between the first '(' and the last
// ')': it may hold either.
func Stat(statPath string) (command string, used time.Duration, ok bool) {
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
	u, err1 := strconv.Atoi(f[11])
	st, err2 := strconv.Atoi(f[12])
	if err1 != nil || err2 != nil {
		return "", 0, false
	}
	return s[open+1 : end], time.Duration(u+st) * 10 * time.Millisecond, true
}
