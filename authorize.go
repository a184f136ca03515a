package hookrelay

import (
	"context"
	"errors"
)

// RedriveAuthorization is what an Authorizer decides on: who asks to
// redrive which selection, and which tenants it spans right now.
type RedriveAuthorization struct {
	Actor  string
	Reason string
	Filter DeadLetterFilter
	// Tenants are the tenants whose dead-lettered deliveries the selection
	// matches, sorted. More than one makes it a cross-tenant redrive.
	Tenants []string
	// Plan is the dry-run count the decision is based on.
	Plan RedrivePlan
}

// CrossTenant reports whether the selection spans more than one tenant.
func (a RedriveAuthorization) CrossTenant() bool { return len(a.Tenants) > 1 }

// Authorizer decides whether an actor may redrive a selection. It is set
// in Config.Authorizer and consulted before anything is written (also when
// a stopped redrive is resumed).
//
// Without an Authorizer, a redrive whose selection spans one tenant (or
// none: nothing matches) is allowed, and one spanning several tenants is
// refused. With one, its answer decides every redrive, single-tenant ones
// included, so it can also check that the actor belongs to the tenant.
// Implementations must be safe for concurrent use.
type Authorizer interface {
	// AuthorizeRedrive returns nil to allow the redrive, or an error saying
	// why not; the client wraps it in a *RedriveRefusedError.
	AuthorizeRedrive(ctx context.Context, req RedriveAuthorization) error
}

// AuthorizerFunc adapts a function to the Authorizer interface.
type AuthorizerFunc func(ctx context.Context, req RedriveAuthorization) error

// AuthorizeRedrive calls f.
func (f AuthorizerFunc) AuthorizeRedrive(ctx context.Context, req RedriveAuthorization) error {
	return f(ctx, req)
}

// SingleTenantOnly is the rule used when Config.Authorizer is nil: it
// allows a selection spanning at most one tenant and refuses the rest.
// Authorizers that widen the rule for some actors can fall back to it.
func SingleTenantOnly(_ context.Context, req RedriveAuthorization) error {
	if req.CrossTenant() {
		return errors.New("the selection spans several tenants and no Authorizer permits cross-tenant redrive")
	}
	return nil
}

// authorize applies the configured rule to a redrive request.
func (c *Client) authorize(ctx context.Context, req RedriveAuthorization) error {
	var err error
	if c.cfg.Authorizer != nil {
		err = c.cfg.Authorizer.AuthorizeRedrive(ctx, req)
	} else {
		err = SingleTenantOnly(ctx, req)
	}
	if err != nil {
		return &RedriveRefusedError{Actor: req.Actor, Tenants: req.Tenants, Err: err}
	}
	return nil
}
