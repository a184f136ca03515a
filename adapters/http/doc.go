// Package hookhttp is hookrelay's HTTP sender: it implements
// [hookrelay.Sender] by POSTing each delivery's payload bytes, unchanged, to
// the destination's URL, signed per the Standard Webhooks specification.
//
// # Request
//
// Every attempt carries:
//
//	webhook-id          the delivery ID (the same on every attempt and redrive)
//	webhook-timestamp   the send time from the client's clock, Unix seconds
//	webhook-signature   "v1,<base64 HMAC-SHA256 of id.timestamp.body>", one per
//	                    active secret ("whsec_<base64 key>"), space-separated;
//	                    omitted when the destination has no secret
//	Idempotency-Key     the delivery ID
//	Content-Type        Config.ContentType (default application/json)
//	User-Agent          hookrelay/<version>
//
// plus the destination's Headers (e.g. Authorization), which may replace
// Content-Type and User-Agent but never the four above. Connection-specific
// headers (Connection, Keep-Alive, Proxy-Connection, Transfer-Encoding,
// Upgrade, TE but "TE: trailers") and Host, which stores refuse on Put, are
// not sent when a destination stored earlier has one: the request's host is
// always the URL's. Config.OnRequest sees the
// request last, e.g. to inject a traceparent header.
//
// # Classification
//
// Bad input never reaches the network; responses are classified by
// Config.Classify (default [DefaultClassify], which is
// [hookrelay.ClassifyStatus] plus the 409 row); network errors by their
// type, never their message.
//
// The whole table — every input check, status and network error with its
// kind, outcome and reason — is in this package's README
// (adapters/http/README.md, "Classification"); the reasons are the
// hookrelay.Reason… constants and this package's own (ReasonInvalidURL,
// ReasonUnsupportedScheme, ReasonDestinationBlocked,
// ReasonConflictInProgress, ReasonInvalidSecret, ReasonInvalidHeader).
//
// Retry-After (seconds or HTTP-date, relative to the send time) is attached
// to retryable results; the core honours it but never beyond the policy's
// MaxDelay. "Outcome unknown" means the recipient may have applied the
// request: it is retried with the same webhook-id, and only the recipient's
// deduplication (see package recipient) makes that one business effect.
//
// # Timeouts, connections, responses
//
// Each request is bounded by the destination's Timeout (default
// Config.Timeout, 10s) for the whole exchange. Connections are reused. Up to
// Config.MaxSnippetBytes of the response body are kept, with secrets
// redacted, as Result.Detail; the rest is discarded.
//
// # SSRF guard
//
// On by default: the dialer refuses every address of the IANA IPv4 and
// IPv6 special-purpose registries — loopback, private (RFC 1918,
// fc00::/7), link-local (169.254.0.0/16 including 169.254.169.254,
// fe80::/10), carrier-grade NAT (100.64.0.0/10), documentation,
// benchmarking, local-use NAT64, multicast, unspecified and reserved — kept
// in one table; an IPv6 address embedding an IPv4 address (IPv4-mapped,
// SIIT, NAT64, 6to4, Teredo) is decided on the embedded address. The
// check runs at dial time on the resolved address, so names that resolve
// to such addresses and literal spellings such as http://[::ffff:127.0.0.1]/
// are refused too; a name whose answer mixes refused and allowed addresses
// is dialled on the allowed ones only, and fails as unreachable (retried)
// when they fail. Numeric host spellings Go's resolver does not read
// (http://127.1/, http://2130706433/, http://0x7f.1/) are refused before
// any lookup, as permanent destination_blocked (or invalid_url when the
// address they spell is allowed), never retried. Config.AllowNetworks
// opens exceptions.
//
// # Secrets
//
// Signing secrets, destination header values and URL credentials never
// appear in a Result (Detail, Reason), so never in the ledger, logs or
// observer events: errors are reduced to their cause without the URL, and
// response snippets are scrubbed of those values in every spelling the
// sender knows (including the Basic header Go builds from URL user info
// and the decoded signing key), before they are cut, so no part of a
// secret survives at the cut.
package hookhttp
