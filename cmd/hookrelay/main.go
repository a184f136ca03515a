// Command hookrelay is the operator's tool for a hookrelay database:
// migrate it, inspect dead-lettered deliveries, plan and run audited,
// rate-limited redrives (and stop or resume them from any shell), pause,
// resume and list destinations (which ones a publish of an event type
// reaches), clear a destination's guard (its Retry-After hold, rate-limit
// hold and open circuit), show per-destination stats, and purge old
// delivery history.
//
//	hookrelay --dsn PATH|URL [--json] COMMAND [ARGS] [FLAGS]
//
// --dsn is a SQLite file path (or sqlite:PATH), a postgres:// URL or a
// mysql://user:pass@host:port/db URL; the drivers' own forms
// (user:pass@tcp(host:port)/db, host=… dbname=… keyword=value) are taken
// too. It defaults to $HOOKRELAY_DSN.
// Global flags may come before or after the command. Run hookrelay help for
// the commands.
//
// Exit status: 0 success, 1 the operation failed, 2 bad usage, 3 the
// database is unreachable or not migrated, 4 the redrive was refused by the
// authorization rule, 5 no such delivery, redrive or destination.
//
// hookrelay console serves the operator console (adapters/http/console) on
// --addr, 127.0.0.1:8089 by default: loopback only, so only this machine
// can reach it. Every change it makes names an actor: --actor NAME
// (default $USER) for a console you run for yourself, or --actor-header H
// to take the name from a header that an authenticating reverse proxy in
// front of it sets (bind it where only that proxy can reach it).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// Exit statuses.
const (
	exitOK       = 0
	exitFailed   = 1
	exitUsage    = 2
	exitDatabase = 3
	exitRefused  = 4
	exitNotFound = 5
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}

// exitError carries an exit status with its message.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func fail(code int, format string, args ...any) error {
	return &exitError{code: code, err: fmt.Errorf(format, args...)}
}

// run executes one command line and returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	err := dispatch(ctx, args, stdout, stderr, getenv)
	if err == nil {
		return exitOK
	}
	if errors.Is(err, flag.ErrHelp) {
		// -h or --help anywhere: the usage text, on stdout, and success.
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	code := exitFailed
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.code
	}
	writeError(stderr, err)
	return code
}

// writeError prints err's message on stderr, prefixed "hookrelay: ".
// Messages name stored text (a stop request's actor, a store's error):
// their own line breaks stay, other control bytes are escaped.
func writeError(stderr io.Writer, err error) {
	msg := err.Error()
	if msg == "" {
		return
	}
	if !strings.HasPrefix(msg, "hookrelay") {
		msg = "hookrelay: " + msg
	}
	lines := strings.Split(msg, "\n")
	for i, l := range lines {
		lines[i] = terminalText(l)
	}
	fmt.Fprintln(stderr, strings.Join(lines, "\n"))
}

const usage = `usage: hookrelay [--dsn DSN] [--table-prefix P] [--json] COMMAND [ARGS] [FLAGS]

commands:
  migrate                         create or upgrade the tables
  dead list [FILTERS] [--limit N] [--cursor C]
                                  list dead-lettered deliveries, oldest first
  dead show ID                    one delivery with its full attempt history
  redrive plan [FILTERS]          dry run: matches by tenant, destination, reason
  redrive start [FILTERS] --rate N --actor NAME --reason TEXT [--batch N] [--cross-tenant]
                                  move matches back to pending at N/s per destination;
                                  on a terminal, a live line: moved/matched, rate, ETA
  redrive stop ID [--actor NAME]  stop a running redrive before its next batch
  redrive resume ID [--actor NAME] [--cross-tenant]
                                  continue a stopped or failed redrive; the actor
                                  (default $USER) is recorded as who resumed it
  redrive status ID               a redrive's audit entry
  destination pause ID            hold a destination's deliveries (no attempts spent)
  destination resume ID           release them
  destination list [--tenant T] [--event-type E]
                                  destinations, their event types and state; with
                                  --event-type, what a publish of it would reach
  destination enable ID           re-enable a destination its recipient disabled (HTTP 410)
  destination clear-guard ID      lift its Retry-After and rate-limit holds and close its
                                  circuit breaker, once its recipient is fixed
  console [--addr 127.0.0.1:8089] [--actor NAME | --actor-header H] [--cross-tenant]
                                  serve the operator console (web page); loopback only
                                  by default; the actor is --actor (default $USER) or
                                  the header an authenticating proxy sets
  stats                           per-destination pending, eligible and dead counts
  purge [--delivered-after 30d] [--details-after 7d] [--dead-after AGE] [--batch N] [--dry-run]
                                  remove delivered history older than --delivered-after and
                                  compact attempt details older than --details-after, in
                                  transactions of --batch (500, at most 1000) records; dead records only with --dead-after;
                                  pending ones never. --dry-run counts by destination and
                                  state and changes nothing

filters (repeatable or comma-separated; a value holding a comma in double
quotes, as in CSV: --destination '"acct,eu"'):
  --tenant T  --destination D  --event-type E  --failure REASON
  --since TIME  --before TIME     dead-lettered in [since, before); RFC 3339 or a
                                  duration ago, e.g. 24h

global:
  --dsn DSN          SQLite path, postgres:// URL or mysql:// URL (default $HOOKRELAY_DSN)
  --table-prefix P   table prefix (default hookrelay_)
  --json             machine-readable output

exit status: 0 ok, 1 failed, 2 bad usage, 3 database unreachable or not
migrated, 4 redrive refused by authorization, 5 not found
`

func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	g := &globals{dsn: getenv("HOOKRELAY_DSN"), prefix: "", stdout: stdout, stderr: stderr, getenv: getenv, tty: isTerminal(stderr)}
	fs := g.flagSet("hookrelay")
	// The root's flags stop at the command; the rest is the command's.
	if err := fs.Parse(args); err != nil {
		return &exitError{code: exitUsage, err: fmt.Errorf("%w (run hookrelay help)", err)}
	}
	rest := fs.Args()
	if len(rest) == 0 {
		fmt.Fprint(stderr, usage)
		return &exitError{code: exitUsage, err: errors.New("")}
	}
	if rest[0] == "help" {
		fmt.Fprint(stdout, usage)
		return nil
	}
	cmd, rest := rest[0], rest[1:]
	switch cmd {
	case "migrate":
		return g.migrate(ctx, rest)
	case "dead":
		return g.sub(ctx, "dead", rest, map[string]command{"list": g.deadList, "show": g.deadShow})
	case "redrive":
		return g.sub(ctx, "redrive", rest, map[string]command{
			"plan": g.redrivePlan, "start": g.redriveStart, "stop": g.redriveStop,
			"resume": g.redriveResume, "status": g.redriveStatus,
		})
	case "destination":
		return g.sub(ctx, "destination", rest, map[string]command{
			"pause":       func(ctx context.Context, a []string) error { return g.destination(ctx, a, true) },
			"resume":      func(ctx context.Context, a []string) error { return g.destination(ctx, a, false) },
			"list":        g.destinationList,
			"enable":      g.destinationEnable,
			"clear-guard": g.destinationClearGuard,
		})
	case "console":
		return g.console(ctx, rest)
	case "stats":
		return g.stats(ctx, rest)
	case "purge":
		return g.purge(ctx, rest)
	}
	return fail(exitUsage, "unknown command %q (run hookrelay help)", cmd)
}

type command func(ctx context.Context, args []string) error

func (g *globals) sub(ctx context.Context, name string, args []string, cmds map[string]command) error {
	if len(args) == 0 {
		return fail(exitUsage, "%s needs a subcommand (run hookrelay help)", name)
	}
	c, ok := cmds[args[0]]
	if !ok {
		return fail(exitUsage, "unknown command %q %q (run hookrelay help)", name, args[0])
	}
	return c(ctx, args[1:])
}
