package control_test

import (
	"context"
	"errors"
	"testing"

	"svc/actors"
	"svc/control"
	"svc/persistence"
)

// fakeApprovals answers as the approval actors would, recording the calls.
type fakeApprovals struct {
	err   error
	calls []string
}

func (f *fakeApprovals) Decide(_ context.Context, d persistence.ApprovalDecision, params map[string]any, actorName string) (persistence.Approval, error) {
	f.calls = append(f.calls, "decide "+d.TenantID+" "+d.ID+" "+d.Status+" "+d.ApproverUserID+" "+actorName)
	if params != nil {
		f.calls = append(f.calls, "with parameters")
	}
	return persistence.Approval{ID: d.ID, TenantID: d.TenantID, Status: d.Status}, f.err
}

func (f *fakeApprovals) Consume(_ context.Context, tenantID, id, agentID, actorName string) (persistence.Approval, error) {
	f.calls = append(f.calls, "consume "+tenantID+" "+id+" "+agentID+" "+actorName)
	return persistence.Approval{ID: id, TenantID: tenantID}, f.err
}

// TestApprovalsThroughThePlane: an approver's decision and a consumption
// reach the approval actors as the caller of op's tenant; their answers
// become refusals (unknown: NotFound, decided or expired: Conflict
// approval_conflict), and a storage failure marks the audit writer
// degraded, as every audited write does.
func TestApprovalsThroughThePlane(t *testing.T) {
	ctx := context.Background()
	op := control.Operator{TenantID: "t-1", Actor: "operator:ops"}
	decide := func(p *control.Plane) error {
		_, err := p.DecideApproval(ctx, op, control.ApprovalDecision{ID: "a-1", Status: persistence.ApprovalApproved, Approver: "ann",
			Parameters: map[string]any{"x": 1}})
		return err
	}
	consume := func(p *control.Plane) error {
		_, err := p.ConsumeApproval(ctx, op, "a-1", "")
		return err
	}
	for _, c := range []struct {
		name    string
		call    func(*control.Plane) error
		answer  error
		kind    control.Kind
		message string
		calls   []string
		health  actors.State
	}{
		{"decided", decide, nil, 0, "", []string{"decide t-1 a-1 APPROVED ann operator:ops", "with parameters"}, actors.StateOK},
		{"decide unknown", decide, persistence.ErrNotFound, control.NotFound, "", nil, actors.StateOK},
		{"decide twice", decide, persistence.ErrStateConflict, control.Conflict, "the approval is already decided or has expired", nil, actors.StateOK},
		{"decide, database down", decide, persistence.ErrUnavailable, 0, "", nil, actors.StateDegraded},
		{"consumed", consume, nil, 0, "", []string{"consume t-1 a-1  operator:ops"}, actors.StateOK},
		{"consume twice", consume, persistence.ErrStateConflict, control.Conflict,
			"the approval is not approved, has expired, or was already consumed", nil, actors.StateOK},
	} {
		t.Run(c.name, func(t *testing.T) {
			reg := actors.NewRegistry()
			fake := &fakeApprovals{err: c.answer}
			err := c.call(control.New(control.Deps{Registry: reg, Approvals: fake}))
			var r *control.Refusal
			switch {
			case c.kind != 0:
				if !errors.As(err, &r) || r.Kind != c.kind || (c.message != "" && (r.Message != c.message || r.Code != "approval_conflict")) {
					t.Fatalf("error %v, want a refusal of kind %d %q", err, c.kind, c.message)
				}
			case c.answer != nil:
				if !errors.Is(err, c.answer) || errors.As(err, &r) {
					t.Fatalf("error %v, want %v unchanged", err, c.answer)
				}
			case err != nil:
				t.Fatal(err)
			}
			if c.calls != nil && len(fake.calls) != len(c.calls) {
				t.Fatalf("calls %q, want %q", fake.calls, c.calls)
			}
			for i := range c.calls {
				if fake.calls[i] != c.calls[i] {
					t.Fatalf("calls %q, want %q", fake.calls, c.calls)
				}
			}
			comp, _ := reg.Get(control.ComponentAuditWriter)
			if comp.State != c.health {
				t.Fatalf("audit writer %q, want %q", comp.State, c.health)
			}
		})
	}
}
