package control_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"svc/actors"
	"svc/broadcast"
	"svc/config"
	"svc/control"
	"svc/messages"
	"svc/persistence"
	"svc/persistence/sharedstate"
	"svc/rules/policy"
)

// settingsFixture is newFixture's plane rebuilt over a store whose tenant
// settings writes (policies, skills, risk settings, audit appends) fail
// while failWith is set, with a real invalidation hub and policy engine.
// Every effect after a change is recorded in order in effects: a drop on
// this node as "drop <kind> <tenant> <key> after <n> audit events" (n read
// from the database as the drop runs, so a drop before the commit shows
// it), a policy preparation as "prepare <tenant>".
type settingsFixture struct {
	*fixture
	shared *sharedstate.Memory
	logs   *syncBuffer

	mu      sync.Mutex
	effects []string
	// prepareErr, when set, is what PreparePolicies answers.
	prepareErr error
}

// settingsStore fails the settings writes while the fixture's failWith is
// set (the database going away).
type settingsStore struct{ *failingStore }

func (s settingsStore) CreatePolicy(ctx context.Context, p persistence.Policy, audit ...persistence.AuditEvent) (persistence.Policy, error) {
	if err := s.fail(); err != nil {
		return persistence.Policy{}, err
	}
	return s.Store.CreatePolicy(ctx, p, audit...)
}

func (s settingsStore) UpdatePolicy(ctx context.Context, p persistence.Policy, audit ...persistence.AuditEvent) (persistence.Policy, error) {
	if err := s.fail(); err != nil {
		return persistence.Policy{}, err
	}
	return s.Store.UpdatePolicy(ctx, p, audit...)
}

func (s settingsStore) DeletePolicy(ctx context.Context, tenantID, name string, audit ...persistence.AuditEvent) error {
	if err := s.fail(); err != nil {
		return err
	}
	return s.Store.DeletePolicy(ctx, tenantID, name, audit...)
}

func (s settingsStore) AppendAudit(ctx context.Context, events []persistence.AuditEvent) error {
	if err := s.fail(); err != nil {
		return err
	}
	return s.Store.AppendAudit(ctx, events)
}

func (s settingsStore) PutSkill(ctx context.Context, sk persistence.Skill, audit ...persistence.AuditEvent) (persistence.Skill, error) {
	if err := s.fail(); err != nil {
		return persistence.Skill{}, err
	}
	return s.Store.PutSkill(ctx, sk, audit...)
}

func (s settingsStore) DeleteSkill(ctx context.Context, tenantID, key string, audit ...persistence.AuditEvent) error {
	if err := s.fail(); err != nil {
		return err
	}
	return s.Store.DeleteSkill(ctx, tenantID, key, audit...)
}

func (s settingsStore) PutRiskWeights(ctx context.Context, tenantID string, w map[string]float64, audit ...persistence.AuditEvent) error {
	if err := s.fail(); err != nil {
		return err
	}
	return s.Store.PutRiskWeights(ctx, tenantID, w, audit...)
}

func (s settingsStore) PutRiskEscalation(ctx context.Context, tenantID string, threshold, windowMinutes int, audit ...persistence.AuditEvent) error {
	if err := s.fail(); err != nil {
		return err
	}
	return s.Store.PutRiskEscalation(ctx, tenantID, threshold, windowMinutes, audit...)
}

// syncBuffer is a log destination safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// newSettingsFixture builds the fixture; policyPath is SVC_POLICY_FILE
// ("" for the embedded base set).
func newSettingsFixture(t *testing.T, policyPath string) *settingsFixture {
	t.Helper()
	f := &settingsFixture{fixture: newFixture(t), shared: sharedstate.NewMemory(), logs: &syncBuffer{}}
	t.Cleanup(func() { _ = f.shared.Close() })
	engine, err := policy.NewEngine(policy.Options{PolicyPath: policyPath})
	if err != nil {
		t.Fatal(err)
	}
	hub := broadcast.NewInvalidations(f.shared, hclog.NewNullLogger())
	hub.Subscribe(func(inv messages.Invalidation) {
		evs, err := f.store.ListAudit(context.Background(), inv.TenantID, persistence.AuditFilter{}, persistence.Page{Limit: 100})
		n := len(evs)
		if err != nil {
			n = -1
		}
		f.record(fmt.Sprintf("drop %s %s %s after %d audit events", inv.Kind, inv.TenantID, inv.Key, n))
	}, messages.CacheSkill, messages.CachePolicy, messages.CacheRisk, messages.CacheBasePolicy)
	f.plane = control.New(control.Deps{Config: &config.Config{PolicyFile: policyPath}, Store: settingsStore{f.store}, Registry: f.registry,
		MCP: f.mcp, Invalidations: hub, Policies: preparerFunc(func(_ context.Context, tenantID string) error {
			f.record("prepare " + tenantID)
			f.mu.Lock()
			defer f.mu.Unlock()
			return f.prepareErr
		}), Engine: engine}).WithLogger(hclog.New(&hclog.LoggerOptions{Output: f.logs, Level: hclog.Debug}))
	return f
}

type preparerFunc func(ctx context.Context, tenantID string) error

func (p preparerFunc) PreparePolicies(ctx context.Context, tenantID string) error {
	return p(ctx, tenantID)
}

func (f *settingsFixture) record(e string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.effects = append(f.effects, e)
}

// takeEffects returns the effects recorded since the last call.
func (f *settingsFixture) takeEffects() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.effects
	f.effects = nil
	return out
}

// settingsCase is one change and what it must leave behind.
type settingsCase struct {
	name string
	// fail makes the store's writes fail with it during the change.
	fail   error
	change func(ctx context.Context) error
	// refusal: the change is refused so (Field and Message are compared
	// when set);
	// err: it fails with an error that is this one.
	refusal *control.Refusal
	err     error
	// action and details: the config_change event the change records
	// (details without "action"); drops: its cache drops on this node,
	// as "<kind> <key>" in the fixture's tenant, after the commit;
	// prepared: the tenant's policies are prepared first.
	action   string
	details  map[string]any
	drops    []string
	prepared bool
}

// run applies the cases in order: a change that commits records exactly
// its audit event, then prepares and drops what it names, each after the
// commit; a refusal or a failure records nothing and drops nothing. The
// audit writer's health is degraded after a storage failure, unchanged by
// a refusal, ok after a success.
func (f *settingsFixture) run(t *testing.T, cases []settingsCase) {
	t.Helper()
	ctx := context.Background()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before, health := len(f.audit(t)), f.health(t)
			f.takeEffects()
			f.store.mu.Lock()
			f.store.failWith = c.fail
			f.store.mu.Unlock()
			err := c.change(ctx)
			f.store.mu.Lock()
			f.store.failWith = nil
			f.store.mu.Unlock()
			evs := f.audit(t)
			effects := f.takeEffects()
			switch {
			case c.refusal != nil:
				r := refusal(t, err)
				want := *c.refusal
				if want.Field == "" {
					want.Field = r.Field
				}
				if want.Message == "" {
					want.Message = r.Message
				}
				if r.Kind != want.Kind || r.What != want.What || r.Code != want.Code || r.Message != want.Message || r.Field != want.Field {
					t.Fatalf("refusal %+v, want %+v", r, want)
				}
			case c.err != nil:
				if !errors.Is(err, c.err) {
					t.Fatalf("error %v, want %v", err, c.err)
				}
			case err != nil:
				t.Fatal(err)
			}
			wantHealth := health
			switch {
			case c.fail != nil:
				wantHealth = actors.StateDegraded
			case err == nil:
				wantHealth = actors.StateOK
			}
			if got := f.health(t); got != wantHealth {
				t.Fatalf("audit writer health %q, want %q", got, wantHealth)
			}
			if err != nil {
				if len(evs) != before || len(effects) != 0 {
					t.Fatalf("a change that did not commit recorded %d audit events and had effects %q", len(evs)-before, effects)
				}
				return
			}
			if len(evs) != before+1 {
				t.Fatalf("%d audit events recorded, want 1", len(evs)-before)
			}
			ev := evs[0]
			details := map[string]any{"action": c.action}
			for k, v := range c.details {
				details[k] = v
			}
			if ev.EventType != "config_change" || ev.Action != c.action || ev.Actor != f.op.Actor || ev.AgentID != "" || ev.TenantID != f.op.TenantID ||
				jsonOf(t, ev.Details) != jsonOf(t, details) {
				t.Fatalf("audit event %+v, want action %s and details %s", ev, c.action, jsonOf(t, details))
			}
			var want []string
			if c.prepared {
				want = append(want, "prepare "+f.op.TenantID)
			}
			for _, d := range c.drops {
				kind, key, _ := strings.Cut(d, " ")
				want = append(want, fmt.Sprintf("drop %s %s %s after %d audit events", kind, f.op.TenantID, key, before+1))
			}
			if fmt.Sprint(effects) != fmt.Sprint(want) {
				t.Fatalf("effects %q, want %q", effects, want)
			}
		})
	}
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

const (
	goodRego = "package svc.policies.%s\n\nresults contains {\"decision\": \"deny\", \"reason\": \"no_charges\"} if input.tool_call.action == \"charge\"\n"
	badRego  = "package svc.policies.%s\n\nresults contains x if {\n  x := \n}\n"
)

func TestPolicyChanges(t *testing.T) {
	f := newSettingsFixture(t, "")
	create := func(name, rego string) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			p, err := f.plane.CreatePolicy(ctx, f.op, persistence.Policy{Name: name, Rego: fmt.Sprintf(rego, name), Description: "d", Enabled: true})
			if err == nil && (p.TenantID != f.op.TenantID || p.Name != name || !p.Enabled || p.Version == 0) {
				return fmt.Errorf("created %+v", p)
			}
			return err
		}
	}
	update := func(name string, patch control.PolicyPatch, check func(persistence.Policy) bool) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			p, err := f.plane.UpdatePolicy(ctx, f.op, name, patch)
			if err == nil && check != nil && !check(p) {
				return fmt.Errorf("updated %+v", p)
			}
			return err
		}
	}
	del := func(name string) func(ctx context.Context) error {
		return func(ctx context.Context) error { return f.plane.DeletePolicy(ctx, f.op, name) }
	}
	compileRefusal := &control.Refusal{Kind: control.Unprocessable, Code: "policy_compile_error", Message: "the policy does not compile"}
	unknown := &control.Refusal{Kind: control.NotFound, What: "policy"}
	off, desc, bad := false, "new", fmt.Sprintf(badRego, "charges")
	named := map[string]any{"name": "charges"}
	policyDrop := []string{"policy -"}
	cases := []settingsCase{
		{name: "create", change: create("charges", goodRego), action: "policy_created", details: named, prepared: true, drops: policyDrop},
		{name: "create, not compiling", change: create("broken", badRego), refusal: compileRefusal},
		{name: "create, name taken", change: create("charges", goodRego), refusal: &control.Refusal{Kind: control.Exists, What: "policy", Code: "already_exists", Message: `a policy named "charges" already exists`}},
		{name: "create, database down", change: create("other", goodRego), fail: persistence.ErrUnavailable, err: persistence.ErrUnavailable},
		{name: "update", change: update("charges", control.PolicyPatch{Description: &desc, Enabled: &off},
			func(p persistence.Policy) bool {
				return p.Description == "new" && !p.Enabled && p.Rego == fmt.Sprintf(goodRego, "charges")
			}),
			action: "policy_updated", details: named, prepared: true, drops: policyDrop},
		{name: "update, not compiling", change: update("charges", control.PolicyPatch{Rego: &bad}, nil), refusal: compileRefusal},
		{name: "update, unknown", change: update("nope", control.PolicyPatch{Description: &desc}, nil), refusal: unknown},
		{name: "update, database down", change: update("charges", control.PolicyPatch{Description: &desc}, nil),
			fail: persistence.ErrBusy, err: persistence.ErrBusy},
		{name: "delete", change: del("charges"), action: "policy_deleted", details: named, prepared: true, drops: policyDrop},
		{name: "delete, unknown", change: del("charges"), refusal: unknown},
	}
	f.run(t, cases)

	// The refusal's details.errors are the compile errors (line, col,
	// message, no file for a tenant module).
	_, err := f.plane.CreatePolicy(context.Background(), f.op, persistence.Policy{Name: "broken", Rego: fmt.Sprintf(badRego, "broken")})
	errs, _ := refusal(t, err).Details["errors"].([]map[string]any)
	if len(errs) == 0 || errs[0]["line"] == nil || errs[0]["col"] == nil || errs[0]["message"] == "" || errs[0]["file"] != nil {
		t.Fatalf("details %v", refusal(t, err).Details)
	}
}

// A preparation that fails is logged and the change stands (the next
// authorize prepares again); the drop still follows.
func TestPolicyPreparationFailure(t *testing.T) {
	f := newSettingsFixture(t, "")
	f.prepareErr = errors.New("prepare failed")
	f.run(t, []settingsCase{{name: "create", change: func(ctx context.Context) error {
		_, err := f.plane.CreatePolicy(ctx, f.op, persistence.Policy{Name: "charges", Rego: fmt.Sprintf(goodRego, "charges")})
		return err
	}, action: "policy_created", details: map[string]any{"name": "charges"}, prepared: true, drops: []string{"policy -"}}})
	if logs := f.logs.String(); !strings.Contains(logs, "preparing the tenant's policies failed; the next authorize retries") ||
		!strings.Contains(logs, "tenant_id="+f.op.TenantID) || !strings.Contains(logs, "prepare failed") {
		t.Fatalf("log %q", logs)
	}
}

// The base policy set's reload: recorded with its source, then broadcast
// to the other nodes (not applied here again); a set that does not compile
// is refused with each error's file, and nothing is recorded or sent.
func TestReloadBasePolicies(t *testing.T) {
	dir := t.TempDir()
	embedded, err := policy.NewEngine(policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for name, src := range embedded.BaseSources() {
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(name)), []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, path := range []string{"", dir} {
		t.Run("source "+path, func(t *testing.T) {
			f := newSettingsFixture(t, path)
			src := "embedded"
			if path != "" {
				src = path
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			sent, err := f.shared.Subscribe(ctx, broadcast.InvalidationChannel)
			if err != nil {
				t.Fatal(err)
			}
			reload := func(ctx context.Context) error {
				got, err := f.plane.ReloadBasePolicies(ctx, f.op)
				if err == nil && got != src {
					return fmt.Errorf("source %q, want %q", got, src)
				}
				return err
			}
			cases := []settingsCase{
				{name: "reload", change: reload, action: "policy_file_reload", details: map[string]any{"source": src}},
				{name: "reload, database down", change: reload, fail: persistence.ErrUnavailable, err: persistence.ErrUnavailable},
			}
			if path != "" {
				cases = append(cases, settingsCase{name: "reload, not compiling", change: func(ctx context.Context) error {
					broken := filepath.Join(dir, "broken.rego")
					if err := os.WriteFile(broken, []byte(fmt.Sprintf(badRego, "broken")), 0o600); err != nil {
						return err
					}
					defer func() { _ = os.Remove(broken) }()
					_, err := f.plane.ReloadBasePolicies(ctx, f.op)
					var r *control.Refusal
					if !errors.As(err, &r) {
						return err
					}
					errs, _ := r.Details["errors"].([]map[string]any)
					if !strings.HasPrefix(r.Message, "the base policy set does not compile: ") || len(errs) == 0 ||
						!strings.HasSuffix(fmt.Sprint(errs[0]["file"]), "broken.rego") || errs[0]["line"] == nil {
						return fmt.Errorf("refusal %q with details %v", r.Message, r.Details)
					}
					return err
				}, refusal: &control.Refusal{Kind: control.Unprocessable, Code: "policy_compile_error"}})
			}
			f.run(t, cases)
			select {
			case msg := <-sent:
				if string(msg) != "base - -" {
					t.Fatalf("broadcast %q", msg)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the reload was not broadcast")
			}
			select {
			case msg := <-sent:
				t.Fatalf("a second broadcast %q: only the committed reload is sent", msg)
			case <-time.After(100 * time.Millisecond):
			}
		})
	}
}
