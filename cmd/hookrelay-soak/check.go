package main

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/hookrelay/hookrelay"
)

// tally is what the soak counted.
type tally struct {
	deliveries, delivered, dead int
	deadReasons                 map[string]int
	ledgerAttempts              int
	// notReached: ledger attempts that provably never reached the
	// recipient (nothing written: refused, reset before write).
	notReached int
	// requests is what the recipient saw, by fault.
	requests        int
	requestsByFault map[fault]int
	// absorbed: repeats the recipient's idempotency middleware answered
	// without applying the effect again (replayed or 409 in progress).
	absorbed int
	// unrecorded: requests the recipient saw with no ledger attempt for
	// them: the worker was killed, or its lease lost, before the ledger
	// write. The next attempt carried the same ID.
	unrecorded int
	// unknownUnseen: attempts with an unknown outcome beyond the requests
	// the recipient saw: they were written but never arrived (check 5).
	unknownUnseen int
	// deadApplied: dead deliveries whose effect the recipient applied,
	// every later response having been lost (at-least-once's documented
	// limit; the effect still happened exactly once).
	deadApplied int
}

// check compares the ledger with what the recipient saw. The rules, per
// delivery ID:
//
//  1. The ledger has the record and it is delivered or dead (none lost,
//     none pending).
//  2. The recipient applied the effect at most once; exactly once if the
//     ledger says delivered, whose final attempt is a 2xx.
//  3. A dead delivery whose effect was applied has an attempt with an
//     unknown outcome, or a request the ledger never recorded (the effect
//     landed but no response was ever seen for it).
//  4. Attempt numbers are 1, 2, … with no gap or repeat.
//  5. Every ledger attempt that got an answer (an HTTP status) corresponds
//     to a request the recipient saw: their count is at most the
//     recipient's, and for each status the ledger recorded, the recipient
//     wrote that status at least as often. An attempt whose outcome is
//     unknown may or may not have reached it — a request written to a
//     kept-alive connection the recipient was closing is lost unread, and
//     the sender cannot tell that from a recipient that read it and
//     dropped the connection — so it bounds nothing. The recipient may see
//     more: attempts whose worker was killed (or lost its lease) before the
//     ledger write.
//  6. The recipient saw no ID that was not enqueued.
//
// That every request of a delivery carried the same ID is checked as each
// request arrives: webhook-id equals Idempotency-Key and equals the ID
// derived from the event and destination in the payload.
func check(ctx context.Context, ledger hookrelay.Ledger, ids []string, reqs map[string][]request, applied map[string]int) (tally, []string) {
	t := tally{deadReasons: map[string]int{}, requestsByFault: map[fault]int{}}
	var v []string
	bad := func(id, format string, args ...any) {
		v = append(v, fmt.Sprintf("%s: ", id)+fmt.Sprintf(format, args...))
	}
	known := make(map[string]bool, len(ids))
	for _, id := range ids {
		known[id] = true
		t.deliveries++
		d, err := ledger.Get(ctx, id)
		if err != nil {
			bad(id, "lost: %v", err)
			continue
		}
		atts, err := ledger.Attempts(ctx, id)
		if err != nil {
			bad(id, "attempts: %v", err)
			continue
		}
		t.ledgerAttempts += len(atts)
		rs := reqs[id]
		n := applied[id]
		if n > 1 {
			bad(id, "effect applied %d times", n)
		}
		for i, a := range atts {
			if a.Number != i+1 {
				bad(id, "attempt %d of the history is numbered %d", i+1, a.Number)
			}
		}
		switch d.State {
		case hookrelay.StateDelivered:
			t.delivered++
			if n == 0 { // n > 1 is reported above
				bad(id, "delivered in the ledger but the recipient never applied it")
			}
			if len(atts) == 0 || atts[len(atts)-1].Kind != hookrelay.KindDelivered || atts[len(atts)-1].StatusCode/100 != 2 {
				bad(id, "delivered without a final 2xx attempt")
			}
		case hookrelay.StateDead:
			t.dead++
			t.deadReasons[d.LastReason]++
		default:
			bad(id, "still %s", d.State)
		}

		answered, unknown := 0, 0
		ledgerStatus := map[int]int{}
		for _, a := range atts {
			switch {
			case a.StatusCode != 0:
				answered++
				ledgerStatus[a.StatusCode]++
			case a.Outcome == hookrelay.OutcomeUnknown:
				unknown++
			default:
				t.notReached++
			}
		}
		rcptStatus := map[int]int{}
		for _, r := range rs {
			t.requests++
			t.requestsByFault[r.fault]++
			if r.replayed || r.conflict {
				t.absorbed++
			}
			if r.status != 0 {
				rcptStatus[r.status]++
			}
		}
		if answered > len(rs) {
			bad(id, "the ledger has %d answered attempts, the recipient saw %d requests", answered, len(rs))
		} else if extra := answered + unknown - len(rs); extra > 0 {
			t.unknownUnseen += extra // unknown outcomes that never arrived
		} else {
			t.unrecorded += -extra
		}
		for _, s := range slices.Sorted(maps.Keys(ledgerStatus)) {
			if ledgerStatus[s] > rcptStatus[s] {
				bad(id, "the ledger recorded %d responses with status %d, the recipient wrote %d", ledgerStatus[s], s, rcptStatus[s])
			}
		}
		if d.State == hookrelay.StateDead && n == 1 {
			t.deadApplied++
			if unknown == 0 && len(rs) <= answered {
				bad(id, "dead, applied by the recipient, yet no attempt was unknown and every request was recorded")
			}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(reqs)) {
		if !known[id] {
			bad(id, "the recipient saw %d requests for an ID that was never enqueued", len(reqs[id]))
		}
	}
	return t, v
}

func (t tally) print(c chaosCounts, logged loggedErrors, logDir string) {
	fmt.Printf("\ndeliveries            %d: %d delivered, %d dead %v\n", t.deliveries, t.delivered, t.dead, t.deadReasons)
	fmt.Printf("  dead but applied    %d (effect applied once; every later response lost)\n", t.deadApplied)
	fmt.Printf("ledger attempts       %d (%d never reached the recipient)\n", t.ledgerAttempts, t.notReached)
	fmt.Printf("recipient requests    %d:", t.requests)
	for f := range numFaults {
		fmt.Printf(" %s %d", f, t.requestsByFault[f])
	}
	fmt.Println()
	fmt.Printf("  duplicates absorbed %d (replayed from the idempotency store, or 409 while in progress)\n", t.absorbed)
	fmt.Printf("  not in the ledger   %d (worker killed or lease lost before the ledger write)\n", t.unrecorded)
	fmt.Printf("  unknown, unseen     %d (outcome unknown to the sender; the recipient never saw the request)\n", t.unknownUnseen)
	fmt.Printf("kills survived        %d SIGKILLs; %d database sessions terminated once; %d worker errors reported, %d startups tried again (logs: %s)\n",
		c.kills, c.sessionsTerminated, logged.worker, logged.startup, logDir)
}
