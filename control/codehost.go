package control

import (
	"context"
	"time"

	"svc/persistence"
)

// ClaimCodehostDelivery records a code host's webhook delivery unless the
// same one (its id, or its signed body) arrived since `since`: fresh is
// false for a repeat, with the first delivery. Not an operator's change
// but the one write the API makes on an outside system's behalf, so it
// takes the plane's road too (http/ only reads).
func (p *Plane) ClaimCodehostDelivery(ctx context.Context, d persistence.CodehostDelivery, since time.Time) (first persistence.CodehostDelivery, fresh bool, err error) {
	return p.d.Store.ClaimCodehostDelivery(ctx, d, since)
}
