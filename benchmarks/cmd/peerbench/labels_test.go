package main

import (
	"bytes"
	"context"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/pprof/profile"
	"github.com/stretchr/testify/require"
)

// spinner is a system whose drain spends CPU in a goroutine it starts, as
// a hookrelay worker's attempts and claim loop do.
type spinner struct{ d time.Duration }

func (s spinner) drain(context.Context, int) (measured, error) {
	var wg sync.WaitGroup
	wg.Go(func() { spin(s.d) })
	wg.Wait()
	return measured{elapsed: s.d}, nil
}

func (spinner) close() error { return nil }

//go:noinline
func spin(d time.Duration) {
	x := 0
	for end := time.Now().Add(d); time.Now().Before(end); {
		x++
	}
	_ = x
}

// TestDrainLabelsItsGoroutines checks that the CPU a system spends in the
// goroutines its drain starts is labelled with the system's name in a
// --cpuprofile, which is what lets one profile of a run be split by
// system.
func TestDrainLabelsItsGoroutines(t *testing.T) {
	var buf bytes.Buffer
	if err := pprof.StartCPUProfile(&buf); err != nil {
		t.Skipf("a CPU profile is already running: %v", err)
	}
	_, err := drainLabelled(context.Background(), spinner{d: 500 * time.Millisecond}, "spinner", 1)
	pprof.StopCPUProfile()
	require.NoError(t, err)

	p, err := profile.Parse(&buf)
	require.NoError(t, err)
	var spinning, labelled int
	for _, s := range p.Sample {
		for _, loc := range s.Location {
			for _, line := range loc.Line {
				if line.Function != nil && strings.HasSuffix(line.Function.Name, ".spin") {
					spinning++
					if v := s.Label["system"]; len(v) == 1 && v[0] == "spinner" {
						labelled++
					}
				}
			}
		}
	}
	require.Positive(t, spinning, "the profile caught the spinning goroutine")
	require.Equal(t, spinning, labelled, "every sample of the goroutine the drain started carries system=spinner")
}
