package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/hookrelay/hookrelay/adapters/http/console"
)

// console serves the operator console until ctx ends (SIGINT, SIGTERM),
// then shuts the server down and stops the redrives started from it (each
// ends stopped and resumable).
func (g *globals) console(ctx context.Context, args []string) error {
	fs := g.flagSet("console")
	addr := fs.String("addr", "127.0.0.1:8089", "listen address (loopback by default)")
	actor := fs.String("actor", "", "the operator's name for every request (default $USER)")
	header := fs.String("actor-header", "", "take the operator's name from this request header, set by an authenticating proxy")
	cross := fs.Bool("cross-tenant", false, "the operators are authorized to redrive across tenants")
	if _, err := parse(fs, args, 0); err != nil {
		return err
	}
	if *actor != "" && *header != "" {
		return fail(exitUsage, "console: give --actor or --actor-header, not both")
	}
	var actorOf func(*http.Request) (string, error)
	switch {
	case *header != "":
		if !httpguts.ValidHeaderFieldName(*header) {
			// No request carries it: every one would be refused.
			return fail(exitUsage, "console: --actor-header %q is not an HTTP header name", *header)
		}
		h := http.CanonicalHeaderKey(*header)
		actorOf = func(r *http.Request) (string, error) {
			if v := strings.TrimSpace(r.Header.Get(h)); v != "" {
				return v, nil
			}
			return "", fmt.Errorf("no operator: the request has no %s header (the console expects an authenticating proxy to set it)", h)
		}
	default:
		name := *actor
		if name == "" {
			name = g.getenv("USER")
		}
		if strings.TrimSpace(name) == "" {
			// A blank actor is none: every redrive from the console would be refused.
			return fail(exitUsage, "console: say who operates it: --actor NAME, not blank (or set $USER), or --actor-header HEADER behind an authenticating proxy")
		}
		actorOf = func(*http.Request) (string, error) { return name, nil }
	}
	s, err := g.openStore(ctx, accessWrite)
	if err != nil {
		return err
	}
	defer s.Close()
	c, err := g.client(s, *cross)
	if err != nil {
		return err
	}
	h, err := console.New(console.Config{Client: c, Stats: s, Actor: actorOf})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fail(exitFailed, "console: listen on %s: %w", *addr, err)
	}
	if host, _, err := net.SplitHostPort(ln.Addr().String()); err == nil {
		if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
			fmt.Fprintf(g.stderr, "hookrelay: warning: the console listens on %s, beyond this machine; put an authenticating proxy in front of it\n", ln.Addr())
		}
	}
	fmt.Fprintf(g.stdout, "hookrelay console on http://%s/ — stop with Ctrl-C\n", ln.Addr())
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	stopCtx := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	}
	select {
	case err := <-served: // the listener failed
		sctx, cancel := stopCtx()
		defer cancel()
		return errors.Join(fail(exitFailed, "console: serve: %w", err), h.Close(sctx))
	case <-ctx.Done():
	}
	sctx, cancel := stopCtx()
	defer cancel()
	err = srv.Shutdown(sctx)
	<-served // Serve returns at once once Shutdown began
	return errors.Join(err, h.Close(sctx))
}
