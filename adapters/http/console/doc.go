// Package console is hookrelay's operator console: an http.Handler that a
// service mounts on its own mux (and that `hookrelay console` serves
// standalone). It shows, per destination, the same numbers as
// hookrelay.LedgerStats (so the page and the metrics agree); lists
// dead-lettered deliveries by tenant, destination, event type, reason and
// time; shows one delivery with its whole attempt history and its payload
// (cut to a size cap); plans a redrive (a dry-run count by destination and
// reason shown before the button), starts it with a required reason and a
// rate per destination, shows its progress, stops it through the
// persisted stop control and resumes it (the operator resuming is
// recorded as ResumedBy); lists the redrive audit log; and pauses, resumes
// and re-enables destinations.
//
// It is safe by construction:
//
//   - Every change is a POST; GETs change nothing.
//   - CSRF: net/http.CrossOriginProtection refuses cross-origin POSTs, and
//     every form carries a token bound to the actor (an HMAC under a key the
//     handler draws at start), checked on every POST, for browsers that send
//     neither Sec-Fetch-Site nor Origin.
//   - The embedding service says who the operator is (Config.Actor; there
//     is no user store here) and may refuse any action (Config.Authorize).
//     A page of one selection or record asks it with the tenants,
//     selection, delivery or redrive it is about to show, so a hook can
//     keep an operator to their own tenants whatever the URL says.
//     A redrive is also decided by the client's hookrelay.Authorizer, so a
//     cross-tenant redrive needs its explicit permission, as in the API.
//   - Destinations are read as hookrelay.DestinationStatus, which has no
//     URL, secret or header field, so the console cannot render them. All
//     output goes through html/template; attempt details are masked again.
//   - Server-rendered pages with embedded CSS and no JavaScript; a strict
//     Content-Security-Policy.
//
// Mount it under a prefix with http.StripPrefix and set Config.Prefix to
// the same path:
//
//	h, err := console.New(console.Config{
//		Client: client, Stats: store, Prefix: "/ops/hookrelay",
//		Actor: func(r *http.Request) (string, error) { return sessionUser(r) },
//	})
//	mux.Handle("/ops/hookrelay/", http.StripPrefix("/ops/hookrelay", h))
//	defer h.Close(ctx) // stops redrives started from the page (resumable)
package console
