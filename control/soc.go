package control

import (
	"context"
	"time"

	"svc/persistence"
)

// CloseIncident closes the tenant's open incident id, with an optional
// reason, and an incident_closed admin_action event. A closed incident:
// Conflict incident_closed; an unknown one: NotFound.
func (p *Plane) CloseIncident(ctx context.Context, op Operator, id string, reason *string) (persistence.Incident, error) {
	now := time.Now().UTC().Truncate(time.Microsecond)
	details := map[string]any{"incident_id": id}
	if reason != nil {
		details["reason"] = *reason
	}
	ev := Event(op, "admin_action", "incident_closed", "", details)
	ev.CreatedAt = now // the incident's closed_at
	var in persistence.Incident
	err := p.change(func() (err error) {
		in, err = p.d.Store.CloseIncident(ctx, op.TenantID, id, reason, now, ev)
		return refuse(err, "incident", conflict("incident", "incident_closed", "the incident is already closed"))
	}, nil)
	return in, err
}
