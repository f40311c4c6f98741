package control_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"svc/actors"
	"svc/control"
	"svc/messages"
	"svc/persistence"
)

// Saving and deleting a custom rule: each records its config_change event
// in the write and drops the tenant's cached rules once committed.
func TestSOCRuleChanges(t *testing.T) {
	o := newOpsPlane(t, false)
	ctx := context.Background()
	cond := map[string]any{"decision": "deny", "tool": map[string]any{"prefix": "github."}}
	r, err := o.plane.PutSOCRule(ctx, o.f.op, control.SOCRule{Key: "gh_denies", Severity: "high", Condition: cond})
	if err != nil {
		t.Fatal(err)
	}
	if r.Key != "gh_denies" || r.AlertName != "gh_denies" || r.Severity != "HIGH" || !r.Enabled || r.TenantID != o.f.op.TenantID {
		t.Fatalf("saved %+v", r)
	}
	ev := o.f.audit(t)[0]
	if ev.EventType != "config_change" || ev.Action != "soc_rule_saved" || ev.Actor != "operator:test" ||
		fmt.Sprint(ev.Details) != "map[action:soc_rule_saved enabled:true rule_key:gh_denies severity:HIGH]" || !ev.CreatedAt.Equal(r.UpdatedAt) {
		t.Fatalf("save event %+v (rule updated at %v)", ev, r.UpdatedAt)
	}
	r, err = o.plane.PutSOCRule(ctx, o.f.op, control.SOCRule{Key: "gh_denies", AlertName: ptr("GitHub denies"), Severity: "Low",
		Enabled: ptr(false), Condition: cond})
	if err != nil || r.AlertName != "GitHub denies" || r.Severity != "LOW" || r.Enabled {
		t.Fatalf("replace: %+v %v", r, err)
	}
	o.wantDrops(t, messages.CacheSOCRules, 1, 2)

	if r := refusal(t, o.plane.DeleteSOCRule(ctx, o.f.op, "nope")); r.Kind != control.NotFound || r.What != "rule" {
		t.Fatalf("delete of an unknown rule: %+v", r)
	}
	o.wantDrops(t, messages.CacheSOCRules)
	if err := o.plane.DeleteSOCRule(ctx, o.f.op, "gh_denies"); err != nil {
		t.Fatal(err)
	}
	if ev = o.f.audit(t)[0]; ev.Action != "soc_rule_deleted" || fmt.Sprint(ev.Details) != "map[action:soc_rule_deleted rule_key:gh_denies]" {
		t.Fatalf("delete event %+v", ev)
	}
	o.wantDrops(t, messages.CacheSOCRules, 3)
	if rules, err := o.f.store.ListRules(ctx, o.f.op.TenantID); err != nil || len(rules) != 0 {
		t.Fatalf("rules after the delete: %v %v", rules, err)
	}
}

// The rules a tenant may not save or delete are refused before anything is
// written.
func TestSOCRuleRefusals(t *testing.T) {
	o := newOpsPlane(t, false)
	ctx := context.Background()
	cond := map[string]any{"decision": "deny"}
	for _, c := range []struct {
		name    string
		rule    control.SOCRule
		kind    control.Kind
		field   string
		code    string
		message string
		details map[string]any
	}{
		{name: "bad key", rule: control.SOCRule{Key: "Bad-Key", Severity: "LOW", Condition: cond}, kind: control.Invalid, field: "rule_key",
			code: "invalid_field", message: "must match [a-z0-9_]{1,64}"},
		{name: "default key", rule: control.SOCRule{Key: "confused_deputy_block", Severity: "LOW", Condition: cond}, kind: control.Conflict,
			code: "default_rule", message: "confused_deputy_block is a default rule's key"},
		{name: "severity", rule: control.SOCRule{Key: "x", Severity: "CRITICAL", Condition: cond}, kind: control.Invalid, field: "severity",
			code: "invalid_field", message: "one of INFO, LOW, MEDIUM, HIGH"},
		{name: "no condition", rule: control.SOCRule{Key: "x", Severity: "LOW"}, kind: control.Invalid, code: "invalid_condition",
			message: "detect: invalid condition: condition: a condition is required", details: map[string]any{"path": "condition", "field": "condition"}},
		{name: "bad operator", rule: control.SOCRule{Key: "x", Severity: "LOW", Condition: map[string]any{"tool": map[string]any{"regex": "."}}},
			kind: control.Invalid, code: "invalid_condition"},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := len(o.f.audit(t))
			_, err := o.plane.PutSOCRule(ctx, o.f.op, c.rule)
			r := refusal(t, err)
			if r.Kind != c.kind || r.Field != c.field || r.Code != c.code || (c.message != "" && r.Message != c.message) {
				t.Fatalf("refusal %+v", r)
			}
			if c.details != nil && fmt.Sprint(r.Details) != fmt.Sprint(c.details) {
				t.Fatalf("details %v, want %v", r.Details, c.details)
			}
			if c.code == "invalid_condition" && (r.Details["field"] != "condition" || r.Details["path"] == "") {
				t.Fatalf("a condition refusal without its path: %+v", r)
			}
			if n := len(o.f.audit(t)); n != before {
				t.Fatalf("a refused change recorded %d audit events", n-before)
			}
			o.wantDrops(t, messages.CacheSOCRules)
		})
	}
	r := refusal(t, o.plane.DeleteSOCRule(ctx, o.f.op, "confused_deputy_block"))
	if r.Kind != control.Conflict || r.Code != "default_rule" || r.Message != "confused_deputy_block is a default rule and cannot be deleted" {
		t.Fatalf("deleting a default rule: %+v", r)
	}
}

// Storage failures of rule and incident writes mark the audit writer
// degraded and drop nothing; refusals leave its health as it is.
func TestSOCStorageFailure(t *testing.T) {
	o := newOpsPlane(t, false)
	ctx := context.Background()
	in := openIncident(t, o)
	o.store.setFail(fmt.Errorf("write: %w", persistence.ErrBusy))
	if _, err := o.plane.PutSOCRule(ctx, o.f.op, control.SOCRule{Key: "x", Severity: "LOW", Condition: map[string]any{"decision": "deny"}}); !errors.Is(err, persistence.ErrBusy) {
		t.Fatalf("save while the store fails: %v", err)
	}
	if got := o.health(t); got != actors.StateDegraded {
		t.Fatalf("health %q", got)
	}
	o.store.setFail(nil)
	if _, err := o.plane.CloseIncident(ctx, o.f.op, in, nil); err != nil {
		t.Fatal(err)
	}
	if got := o.health(t); got != actors.StateOK {
		t.Fatalf("health after a success %q", got)
	}
	o.store.setFail(persistence.ErrUnavailable)
	if err := o.plane.DeleteSOCRule(ctx, o.f.op, "x"); !errors.Is(err, persistence.ErrUnavailable) {
		t.Fatalf("delete while the store fails: %v", err)
	}
	if got := o.health(t); got != actors.StateDegraded {
		t.Fatalf("health %q", got)
	}
	o.store.setFail(nil)
	if _, err := o.plane.CloseIncident(ctx, o.f.op, in, nil); refusal(t, err).Kind != control.Conflict {
		t.Fatalf("closing a closed incident: %v", err)
	}
	if got := o.health(t); got != actors.StateDegraded {
		t.Fatalf("a refusal changed the health to %q", got)
	}
	o.wantDrops(t, messages.CacheSOCRules)
}

// Closing an incident records an admin_action event at its closing time;
// closing it again is a Conflict, an unknown one NotFound.
func TestCloseIncident(t *testing.T) {
	o := newOpsPlane(t, false)
	ctx := context.Background()
	id := openIncident(t, o)
	in, err := o.plane.CloseIncident(ctx, o.f.op, id, ptr("false positive"))
	if err != nil {
		t.Fatal(err)
	}
	if in.Status != persistence.IncidentClosed || in.ClosedAt == nil || in.CloseReason == nil || *in.CloseReason != "false positive" {
		t.Fatalf("closed %+v", in)
	}
	ev := o.f.audit(t)[0]
	if ev.EventType != "admin_action" || ev.Action != "incident_closed" || ev.Actor != "operator:test" || ev.AgentID != "" ||
		fmt.Sprint(ev.Details) != fmt.Sprintf("map[action:incident_closed incident_id:%s reason:false positive]", id) ||
		!ev.CreatedAt.Equal(*in.ClosedAt) {
		t.Fatalf("close event %+v (closed at %v)", ev, in.ClosedAt)
	}
	_, err = o.plane.CloseIncident(ctx, o.f.op, id, nil)
	if r := refusal(t, err); r.Kind != control.Conflict || r.Code != "incident_closed" || r.Message != "the incident is already closed" {
		t.Fatalf("second close: %+v", r)
	}
	if _, err := o.plane.CloseIncident(ctx, o.f.op, uuid.NewString(), nil); refusal(t, err).Kind != control.NotFound ||
		refusal(t, err).What != "incident" {
		t.Fatalf("unknown incident: %v", err)
	}
	other := control.Operator{TenantID: uuid.NewString(), Actor: "operator:x"}
	if _, err := o.plane.CloseIncident(ctx, other, openIncident(t, o), nil); refusal(t, err).Kind != control.NotFound {
		t.Fatalf("another tenant's incident: %v", err)
	}
	if n := len(o.f.audit(t)); n != 1 {
		t.Fatalf("%d audit events, want the one close", n)
	}
	// Closing an incident drops no cache.
	o.wantDrops(t, messages.CacheSOCRules)
}

func openIncident(t *testing.T, o *opsPlane) string {
	t.Helper()
	in := persistence.Incident{ID: persistence.NewRecordID(), TenantID: o.f.op.TenantID, Kind: "deny_storm", Severity: "HIGH",
		Status: persistence.IncidentOpen, AgentID: o.f.agent(t, persistence.AgentActive), Summary: "denies",
		OpenedAt: time.Now().UTC().Add(-time.Minute).Truncate(time.Microsecond)}
	if err := o.f.store.OpenIncidents(context.Background(), []persistence.Incident{in}); err != nil {
		t.Fatal(err)
	}
	return in.ID
}
