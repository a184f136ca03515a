package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hookrelay/hookrelay"
	hooksql "github.com/hookrelay/hookrelay/adapters/sql"
)

// ageFlag is a duration flag that also takes whole days ("30d").
type ageFlag struct {
	d   time.Duration
	set bool
}

func (f *ageFlag) String() string { return f.d.String() }

func (f *ageFlag) Set(v string) error {
	d, err := parseAge(v)
	if err != nil {
		return err
	}
	f.d, f.set = d, true
	return nil
}

// maxAgeDays is the most days a time.Duration holds (about 292 years).
const maxAgeDays = math.MaxInt64 / int64(24*time.Hour)

// parseAge reads a non-negative Go duration ("36h") or a number of days
// ("30d"). Days beyond what a duration holds are refused, not wrapped
// around into a short age that would purge almost everything.
func parseAge(v string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.ParseInt(days, 10, 64)
		switch {
		case strings.HasPrefix(days, "-"):
			return 0, fmt.Errorf("%q is not a number of days (e.g. 30d)", v)
		case errors.Is(err, strconv.ErrRange) || n > maxAgeDays:
			return 0, fmt.Errorf("%q is too long: at most %dd", v, maxAgeDays)
		case err != nil:
			return 0, fmt.Errorf("%q is not a number of days (e.g. 30d)", v)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%q is not an age (e.g. 30d or 36h)", v)
	}
	return d, nil
}

type purgeView struct {
	DryRun    bool               `json:"dry_run"`
	Removed   int64              `json:"removed"`
	Compacted int64              `json:"compacted"`
	Counts    []historyCountView `json:"counts"`
}

type historyCountView struct {
	DestinationID string `json:"destination_id"`
	State         string `json:"state"`
	Removed       int64  `json:"removed"`
	Compacted     int64  `json:"compacted"`
}

// purge applies a retention policy once: every batch until nothing is
// left, or with --dry-run only the counts.
func (g *globals) purge(ctx context.Context, args []string) error {
	fs := g.flagSet("purge")
	def := hookrelay.DefaultRetention()
	delivered := ageFlag{d: def.Delivered}
	details := ageFlag{d: def.AttemptDetails}
	var dead ageFlag
	fs.Var(&delivered, "delivered-after", "remove delivered records older than this")
	fs.Var(&details, "details-after", "compact attempt details of delivered records older than this")
	fs.Var(&dead, "dead-after", "also remove dead records older than this (kept when not given)")
	batch := fs.Int("batch", def.BatchSize, "records per transaction (at most 1000)")
	dryRun := fs.Bool("dry-run", false, "count what would be removed and compacted; change nothing")
	if _, err := parse(fs, args, 0); err != nil {
		return err
	}
	// One batch is one transaction's picked rows and their locks: bounded
	// like every other page the operator calls take.
	if err := checkPageFlag("purge", "--batch", *batch); err != nil {
		return err
	}
	policy := hookrelay.RetentionPolicy{
		Delivered: delivered.d, AttemptDetails: details.d, RemoveDead: dead.set, Dead: dead.d, BatchSize: *batch,
	}
	mode := accessWrite
	if *dryRun {
		mode = accessRead
	}
	return g.withAccess(ctx, mode, false, func(s *hooksql.Store, _ *hookrelay.Client) error {
		var cleaner hookrelay.HistoryCleaner = s
		now := time.Now()
		var all []hookrelay.HistoryCount
		batches := 0
		for {
			res, err := cleaner.CleanHistory(ctx, hookrelay.CleanHistoryParams{Now: now, Policy: policy, Limit: *batch, DryRun: *dryRun})
			all = append(all, res.Counts...) // a failed call's committed part too
			if err != nil {
				// The batches that committed stay done: say what they
				// removed, or the operator cannot tell what is already
				// gone (a purge run again will not count it).
				if len(all) > 0 {
					if serr := g.showPurge(*dryRun, all); serr != nil {
						return serr
					}
				}
				if ctx.Err() != nil && !*dryRun {
					return fail(exitFailed, "purge interrupted: %d earlier batches committed (shown above, if any); the one cut short may have removed some records too. Run purge again to finish", batches)
				}
				return err
			}
			batches++
			if !res.More {
				break
			}
		}
		return g.showPurge(*dryRun, all)
	})
}

func (g *globals) showPurge(dryRun bool, counts []hookrelay.HistoryCount) error {
	byKey := map[[2]string]*historyCountView{}
	out := purgeView{DryRun: dryRun, Counts: []historyCountView{}}
	var order [][2]string
	for _, c := range counts {
		k := [2]string{c.DestinationID, string(c.State)}
		v, ok := byKey[k]
		if !ok {
			v = &historyCountView{DestinationID: c.DestinationID, State: string(c.State)}
			byKey[k] = v
			order = append(order, k)
		}
		v.Removed += c.Removed
		v.Compacted += c.Compacted
		out.Removed += c.Removed
		out.Compacted += c.Compacted
	}
	for _, k := range order {
		out.Counts = append(out.Counts, *byKey[k])
	}
	// Batches each come sorted; their union is sorted again.
	sortCounts(out.Counts)
	if g.json {
		return g.writeJSON(out)
	}
	if len(out.Counts) == 0 {
		fmt.Fprintf(g.stdout, "nothing to purge\n")
		return nil
	}
	tw := g.table("DESTINATION", "STATE", "REMOVED", "COMPACTED")
	for _, c := range out.Counts {
		row(tw, c.DestinationID, c.State, c.Removed, c.Compacted)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if dryRun {
		fmt.Fprintf(g.stdout, "dry run: would remove %d records and compact the attempts of %d\n", out.Removed, out.Compacted)
	} else {
		fmt.Fprintf(g.stdout, "removed %d records, compacted the attempts of %d\n", out.Removed, out.Compacted)
	}
	return nil
}

func sortCounts(cs []historyCountView) {
	slices.SortFunc(cs, func(a, b historyCountView) int {
		return cmp.Or(strings.Compare(a.DestinationID, b.DestinationID), strings.Compare(a.State, b.State))
	})
}

var _ flag.Value = (*ageFlag)(nil)
