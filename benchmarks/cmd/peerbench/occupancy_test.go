package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sampleFor samples p for d and returns what it saw.
func sampleFor(p *probedSender, d time.Duration) occupancy {
	stop := p.startSampling()
	time.Sleep(d)
	return stop()
}

// TestOccupancyCountsIdleAndFullSlots: the probe's sampling tells a round
// whose slots all sent from one whose slots sent nothing.
func TestOccupancyCountsIdleAndFullSlots(t *testing.T) {
	p := &probedSender{slots: 4}
	p.inFlight.Store(4)
	busy := sampleFor(p, 30*time.Millisecond)
	require.NotEmpty(t, busy.seen)
	_, none, full := busy.tally()
	assert.Equal(t, int64(len(busy.seen)), full, "every sample saw all 4 slots sending")
	assert.Zero(t, none)
	assert.Contains(t, busy.String(), "4.0 of 4 on average, none in 0.0%")

	p.inFlight.Store(0)
	idle := sampleFor(p, 30*time.Millisecond)
	require.NotEmpty(t, idle.seen)
	_, none, _ = idle.tally()
	assert.Equal(t, int64(len(idle.seen)), none, "every sample saw no send")
	assert.Contains(t, idle.String(), "0.0 of 4 on average, none in 100.0%")

	assert.Equal(t, "sends in flight: no sample", occupancy{slots: 4}.String())
}

// TestOccupancyShowsWhenSlotsWereIdle: a round whose slots sent at its
// start and sat idle at its end shows it tenth by tenth, in order.
func TestOccupancyShowsWhenSlotsWereIdle(t *testing.T) {
	p := &probedSender{slots: 4}
	p.inFlight.Store(4)
	stop := p.startSampling()
	time.Sleep(40 * time.Millisecond)
	p.inFlight.Store(0)
	time.Sleep(40 * time.Millisecond)
	o := stop()
	require.GreaterOrEqual(t, len(o.seen), 10, "enough samples for tenths")
	tenths := o.byTenth()
	require.Len(t, tenths, 10)
	assert.Equal(t, 4.0, tenths[0], "the first tenth saw every slot sending")
	assert.Equal(t, 0.0, tenths[9], "the last tenth saw none")
	assert.Contains(t, o.String(), "; by tenth of the round: 4.0 ")
	assert.True(t, strings.HasSuffix(o.String(), " 0.0"), o.String())

	few := occupancy{slots: 4, seen: []int32{4, 4, 4}}
	assert.Nil(t, few.byTenth(), "fewer than ten samples have no tenths")
	assert.NotContains(t, few.String(), "by tenth")
}

// TestProbePrintsSendsInFlight runs the memory system with --probe and
// checks each round prints how many sends were in flight, an average
// within the worker's slots that saw the sends.
func TestProbePrintsSendsInFlight(t *testing.T) {
	r, w, err := os.Pipe()
	require.NoError(t, err)
	stderr := os.Stderr
	os.Stderr = w
	var got bytes.Buffer
	copied := make(chan struct{})
	go func() { _, _ = io.Copy(&got, r); close(copied) }()
	var out bytes.Buffer
	err = run(context.Background(), options{
		systems: []string{"memory"}, mode: "throughput", workers: 4, destinations: 3,
		n: 500, rounds: 2, payloadBytes: 512, latencyRate: 50, latencyFor: time.Second, probe: true,
	}, &out)
	os.Stderr = stderr
	require.NoError(t, w.Close())
	<-copied
	require.NoError(t, err, out.String())

	lines := regexp.MustCompile(`probe: sends in flight: ([0-9.]+) of 4 on average, none in [0-9.]+% of [0-9]+ samples`).FindAllStringSubmatch(got.String(), -1)
	require.Len(t, lines, 3, "the warm-up and two rounds: %s", got.String())
	var most float64
	for _, l := range lines {
		avg, err := strconv.ParseFloat(l[1], 64)
		require.NoError(t, err)
		assert.True(t, avg >= 0 && avg <= 4, "average %v within 0–4 slots", avg)
		most = max(most, avg)
	}
	assert.Positive(t, most, "the samples saw the sends: a probe that counted none would print 0.0 in every round")
}
