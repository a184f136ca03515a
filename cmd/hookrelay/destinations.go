package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/hookrelay/hookrelay"
)

// destinationView is a destination in `destination list --json`. It holds
// no URL path or credentials, secret or header: only the URL's host.
type destinationView struct {
	ID             string   `json:"id"`
	TenantID       string   `json:"tenant_id"`
	Host           string   `json:"host"`
	EventTypes     []string `json:"event_types"` // empty: every event type
	Paused         bool     `json:"paused"`
	Disabled       bool     `json:"disabled"`
	DisabledReason string   `json:"disabled_reason,omitempty"`
	// Publish says what a publish of --event-type does for it; only with
	// --event-type.
	Publish string `json:"publish,omitempty"`
}

// What a publish does for a listed destination.
const (
	publishDelivers = "delivers"
	publishWaits    = "waits_while_paused"
	publishSkipped  = "skipped_disabled"
	publishNoTenant = "never_no_tenant"
)

func publishOutcome(d hookrelay.Destination) string {
	switch {
	case d.TenantID == "":
		return publishNoTenant
	case d.Disabled:
		return publishSkipped
	case d.Paused:
		return publishWaits
	}
	return publishDelivers
}

// urlHost is the host (and port) of a destination URL: never its user
// info, path or query, any of which may carry a credential.
func urlHost(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Host
}

func (g *globals) destinationList(ctx context.Context, args []string) error {
	fs := g.flagSet("destination list")
	tenant := fs.String("tenant", "", "only this tenant's destinations")
	eventType := fs.String("event-type", "", "only destinations a publish of this event type would reach")
	if _, err := parse(fs, args, 0); err != nil {
		return err
	}
	if strings.Contains(*eventType, "*") {
		return fail(exitUsage, "destination list: --event-type takes an event type, e.g. lease.payment_recorded, not a pattern")
	}
	s, err := g.openStore(ctx, accessRead)
	if err != nil {
		return err
	}
	defer s.Close()
	ds, err := s.DestinationsFor(ctx, hookrelay.DestinationsForParams{TenantID: *tenant, EventType: *eventType})
	if err != nil {
		return classify(err)
	}
	views := make([]destinationView, len(ds))
	for i, d := range ds {
		views[i] = destinationView{
			ID: d.ID, TenantID: d.TenantID, Host: urlHost(d.URL), EventTypes: d.EventTypes,
			Paused: d.Paused, Disabled: d.Disabled, DisabledReason: d.DisabledReason,
		}
		if views[i].EventTypes == nil {
			views[i].EventTypes = []string{}
		}
		if *eventType != "" {
			views[i].Publish = publishOutcome(d)
		}
	}
	if g.json {
		return g.writeJSON(struct {
			Destinations []destinationView `json:"destinations"`
		}{views})
	}
	if len(views) == 0 {
		fmt.Fprintln(g.stdout, "no destinations match")
		return nil
	}
	header := []string{"DESTINATION", "TENANT", "HOST", "EVENT TYPES", "STATE"}
	if *eventType != "" {
		header = append(header, "PUBLISH "+*eventType)
	}
	tw := g.table(header...)
	reached := 0
	for _, v := range views {
		types := strings.Join(v.EventTypes, ",")
		if types == "" {
			types = "(every type)"
		}
		state := "active"
		switch {
		case v.Disabled:
			state = "disabled: " + oneLine(v.DisabledReason, 40)
		case v.Paused:
			state = "paused"
		}
		cells := []any{v.ID, v.TenantID, v.Host, types, state}
		if *eventType != "" {
			cells = append(cells, strings.ReplaceAll(v.Publish, "_", " "))
			if v.Publish == publishDelivers || v.Publish == publishWaits {
				reached++
			}
		}
		row(tw, cells...)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if *eventType != "" {
		fmt.Fprintf(g.stdout, "a publish of %s reaches %d destination(s)\n", *eventType, reached)
	}
	return nil
}
