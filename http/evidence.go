package httpapi

// Evidence packs (SPEC 4.5; issue 24): ZIP downloads written straight into
// the response (evidencepack.Writer), each with a manifest of SHA-256 hashes
// signed with the receipt key, verifiable offline with `svc verify-pack`.
// What goes into them is read here; what must never go into them (tokens,
// token hashes, signing keys, secrets, raw tool parameters; SPEC 1.8) is
// kept out by the views: decisions without their tool_call, approvals
// without parameters, agents without token or key.

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"svc/evidencepack"
	"svc/persistence"
	"svc/receipt"
	"svc/rules/evidence"
)

// complianceDefaultRange is the compliance pack's range without from.
const complianceDefaultRange = 30 * 24 * time.Hour

// packPage is the page size of the compliance pack's reads; receipts are
// read packPage at a time too (not chainPage, the export's 5,000): what a
// pack holds at once sets the Go heap's live size, and with the collector's
// headroom (SVC_GC_PERCENT) a multiple of it in resident memory.
const packPage = 500

func (s *Server) registerEvidence() {
	s.register(Route{Method: "GET", Path: "/incidents/:incident_id/evidence-pack", Access: AccessViewer, Tag: "evidence",
		RawBody: "application/zip", Resp: "", Errors: []int{404}, Download: true,
		Summary: "The incident's evidence pack, a ZIP: incident.json, alerts.json (the alerts its source events raised), decisions.json (the decisions behind its source events), receipts.jsonl (their receipts as a selection export that `svc verify-receipts` checks), audit_events.json (their authorize_decision events), approvals.json, narrative.md (a timeline built from those records), and manifest.json with every file's SHA-256, signed in manifest.sig with the receipt key when receipts are signed (`svc verify-pack`). No token, key, secret or tool parameter is in it.",
		Handle:  s.incidentPack})
	s.register(Route{Method: "GET", Path: "/compliance/evidence-pack", Access: AccessViewer, Tag: "evidence",
		RawBody: "application/zip", Resp: "", Download: true,
		Query: []QueryParam{
			{Name: "from", Type: "string", Description: "RFC 3339 start of the range (inclusive); default: to minus 30 days"},
			{Name: "to", Type: "string", Description: "RFC 3339 end of the range (exclusive); default: now"},
		},
		Summary: "The tenant's compliance evidence pack, a ZIP written as it is read (any size, little memory): tenant.json (settings and risk settings), policies.json (the base set's and the tenant's Rego, with the tenant's policy version), skills.json, agents.json (no token or key), decision_stats.json (counts in the range), receipts.jsonl (the whole receipt chain as `svc verify-receipts` reads it) with receipts_verification.json (the chain verified as exported), and, in the range, audit_events.jsonl, approvals.json and incidents.json; manifest.json lists every file's SHA-256 and is signed in manifest.sig when receipts are signed (`svc verify-pack`).",
		Handle:  s.compliancePack})
}

// packFile is the download's name and the writer of its files.
type packFile struct {
	name  string
	write func(p *evidencepack.Writer) error
}

// download answers a pack: headers, then the archive as it is written. An
// error once bytes have left aborts the connection, so the client never
// holds a truncated archive that looks whole.
func (s *Server) download(c *Call, kind string, f packFile) streamOut {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/zip")
		w.Header().Set("Content-Disposition", `attachment; filename="`+f.name+`"`)
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusOK)
		p := evidencepack.NewWriter(w, kind, c.Principal.TenantID, s.ReceiptSigner, time.Now())
		err := f.write(p)
		if err == nil {
			err = p.Close()
		}
		if err != nil {
			s.log.Error("evidence pack aborted", "kind", kind, "tenant_id", c.Principal.TenantID, "error", err)
			panic(http.ErrAbortHandler)
		}
	}
}

// incidentPack serves GET /incidents/:incident_id/evidence-pack.
func (s *Server) incidentPack(c *Call) (any, error) {
	// Everything is read before the first byte: an incident's records are
	// few, and a failure is still an error envelope.
	recs, err := s.incidentRecords(c)
	if err != nil {
		return nil, err
	}
	in, ds := *recs.Incident, recs.Decisions
	alerts, err := s.Store.AlertsBySourceEvents(c.Ctx(), c.Principal.TenantID, in.SourceEventIDs)
	if err != nil {
		return nil, err
	}
	var rids []string
	for _, d := range ds {
		if d.ReceiptID != "" {
			rids = append(rids, d.ReceiptID)
		}
	}
	rs, err := s.Store.ReceiptsByID(c.Ctx(), c.Principal.TenantID, rids)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(rs, func(a, b persistence.Receipt) int { return cmp.Compare(a.Seq, b.Seq) })
	write := func(p *evidencepack.Writer) error {
		if err := p.WriteJSON("incident.json", viewIncident(in)); err != nil {
			return err
		}
		if err := p.WriteJSON("alerts.json", viewAll(alerts, viewAlert)); err != nil {
			return err
		}
		if err := p.WriteJSON("decisions.json", viewAll(ds, viewDecision)); err != nil {
			return err
		}
		if err := s.writeSelection(p, c.Principal.TenantID, rs); err != nil {
			return err
		}
		events := make([]auditView, len(ds))
		for i, d := range ds {
			events[i] = viewAuditEvent(d.AuditEvent())
		}
		if err := p.WriteJSON("audit_events.json", events); err != nil {
			return err
		}
		approvals := make([]packApproval, 0, len(recs.Approvals))
		for _, d := range ds {
			if a, ok := recs.Approvals[d.ApprovalID]; ok {
				approvals = append(approvals, viewPackApproval(a))
			}
		}
		if err := p.WriteJSON("approvals.json", approvals); err != nil {
			return err
		}
		w, err := p.Create("narrative.md")
		if err != nil {
			return err
		}
		_, err = io.WriteString(w, evidence.Narrative(evidence.NarrativeInput{Incident: in, Agents: recs.Agents,
			Decisions: ds, Approvals: recs.Approvals, Alerts: alerts, Receipts: rs, Now: recs.Now}))
		return err
	}
	return s.download(c, "incident", packFile{name: "incident-" + in.ID + "-evidence.zip", write: write}), nil
}

// writeSelection writes receipts.jsonl: the receipts, in seq order, as a
// selection export (receipt.SelectionFormat) whose head is the last.
func (s *Server) writeSelection(p *evidencepack.Writer, tenantID string, rs []persistence.Receipt) error {
	w, err := p.Create("receipts.jsonl")
	if err != nil {
		return err
	}
	var head receipt.Head
	if n := len(rs); n > 0 {
		head = receipt.Head{Seq: rs[n-1].Seq, Hash: rs[n-1].Hash}
	}
	ew, err := receipt.NewExportWriter(w, receipt.SelectionFormat, tenantID, s.ReceiptSigner, head, len(rs))
	if err != nil {
		return err
	}
	for _, r := range rs {
		if err := ew.Write(viewReceipt(r)); err != nil {
			return err
		}
	}
	return ew.Flush()
}

// compliancePack serves GET /compliance/evidence-pack.
func (s *Server) compliancePack(c *Call) (any, error) {
	from, to, err := packRange(c)
	if err != nil {
		return nil, err
	}
	if err := s.Authorizer.Consistent(c.Ctx()); err != nil {
		return nil, err
	}
	tenant, err := s.Store.GetTenant(c.Ctx(), c.Principal.TenantID)
	if err != nil {
		return nil, orNotFound(err, "tenant")
	}
	cp := &compliance{s: s, ctx: c.Ctx(), tenant: tenant, from: from, to: to}
	name := fmt.Sprintf("compliance-%s-%s-%s-evidence.zip", tenant.ID, from.Format("20060102T150405Z"), to.Format("20060102T150405Z"))
	return s.download(c, "compliance", packFile{name: name, write: cp.write}), nil
}

// compliance writes one compliance pack, file by file, each read as it is
// written.
type compliance struct {
	s        *Server
	ctx      context.Context
	tenant   persistence.Tenant
	from, to time.Time
}

func (cp *compliance) write(p *evidencepack.Writer) error {
	tid := cp.tenant.ID
	for _, step := range []func(*evidencepack.Writer) error{
		cp.settings,
		func(p *evidencepack.Writer) error { return cp.s.writePolicies(cp.ctx, p, tid) },
		cp.skills, cp.agents, cp.stats,
		func(p *evidencepack.Writer) error { return cp.s.writeChain(cp.ctx, p, tid) },
		func(p *evidencepack.Writer) error { return cp.s.writeAuditRange(cp.ctx, p, tid, cp.from, cp.to) },
		cp.approvals, cp.incidents,
	} {
		if err := step(p); err != nil {
			return err
		}
	}
	return nil
}

func (cp *compliance) settings(p *evidencepack.Writer) error {
	risk, err := cp.s.Store.GetRiskSettings(cp.ctx, cp.tenant.ID)
	if err != nil {
		return err
	}
	return p.WriteJSON("tenant.json", map[string]any{"tenant": viewTenant(cp.tenant), "range": map[string]any{"from": cp.from, "to": cp.to},
		"risk_weights": risk.Weights, "risk_escalation": map[string]any{"denial_threshold": risk.DenialThreshold, "window_minutes": risk.WindowMinutes}})
}

func (cp *compliance) skills(p *evidencepack.Writer) error {
	skills, err := cp.s.Store.ListSkills(cp.ctx, cp.tenant.ID)
	if err != nil {
		return err
	}
	return p.WriteJSON("skills.json", viewAll(skills, viewSkill))
}

func (cp *compliance) agents(p *evidencepack.Writer) error {
	return jsonArray(p, "agents.json", func(add func(any)) error {
		return pages(func(pg persistence.Page) ([]persistence.Agent, error) {
			return cp.s.Store.ListAgents(cp.ctx, cp.tenant.ID, persistence.AgentFilter{}, pg)
		}, func(a persistence.Agent) int64 { return a.Seq }, func(a persistence.Agent) bool { add(viewAgent(a)); return true })
	})
}

func (cp *compliance) stats(p *evidencepack.Writer) error {
	st, err := cp.s.Store.DecisionStats(cp.ctx, cp.tenant.ID, cp.from, cp.to)
	if err != nil {
		return err
	}
	return p.WriteJSON("decision_stats.json", map[string]any{"from": cp.from, "to": cp.to, "total": st.Total,
		"by_decision": st.ByDecision, "by_trust_level": st.ByTrustLevel})
}

func (cp *compliance) approvals(p *evidencepack.Writer) error {
	return jsonArray(p, "approvals.json", func(add func(any)) error {
		return pages(func(pg persistence.Page) ([]persistence.Approval, error) {
			return cp.s.Store.ListApprovals(cp.ctx, cp.tenant.ID, "", pg)
		}, func(a persistence.Approval) int64 { return a.Seq }, inRange(cp.from, cp.to,
			func(a persistence.Approval) time.Time { return a.CreatedAt }, func(a persistence.Approval) { add(viewPackApproval(a)) }))
	})
}

func (cp *compliance) incidents(p *evidencepack.Writer) error {
	return jsonArray(p, "incidents.json", func(add func(any)) error {
		return pages(func(pg persistence.Page) ([]persistence.Incident, error) {
			return cp.s.Store.ListIncidents(cp.ctx, cp.tenant.ID, persistence.IncidentFilter{}, pg)
		}, func(in persistence.Incident) int64 { return in.Seq }, inRange(cp.from, cp.to,
			func(in persistence.Incident) time.Time { return in.OpenedAt }, func(in persistence.Incident) { add(viewIncident(in)) }))
	})
}

// jsonArray writes a file holding a JSON array whose elements fill adds as
// it reads them, one per line: a list of any length in little memory.
func jsonArray(p *evidencepack.Writer, name string, fill func(add func(any)) error) error {
	w, err := p.Create(name)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	sep := "[\n"
	var werr error
	err = fill(func(v any) {
		if werr == nil {
			if _, werr = io.WriteString(w, sep); werr == nil {
				werr = enc.Encode(v)
			}
			sep = ","
		}
	})
	if err == nil {
		err = werr
	}
	if err != nil {
		return err
	}
	if sep == "[\n" {
		_, err = io.WriteString(w, "[]\n")
	} else {
		_, err = io.WriteString(w, "]\n")
	}
	return err
}

// packRange reads from and to (RFC 3339); the default is the 30 days
// before now.
func packRange(c *Call) (from, to time.Time, err error) {
	q := c.R.URL.Query()
	to = time.Now().UTC()
	if v := q.Get("to"); v != "" {
		if to, err = time.Parse(time.RFC3339Nano, strings.TrimSpace(v)); err != nil {
			return from, to, invalidField("to", "an RFC 3339 timestamp")
		}
	}
	from = to.Add(-complianceDefaultRange)
	if v := q.Get("from"); v != "" {
		if from, err = time.Parse(time.RFC3339Nano, strings.TrimSpace(v)); err != nil {
			return from, to, invalidField("from", "an RFC 3339 timestamp")
		}
	}
	if !from.Before(to) {
		return from, to, invalidField("from", "before to")
	}
	return from.UTC(), to.UTC(), nil
}

// writePolicies writes policies.json: the base set's Rego by file, and the
// tenant's policies with their version.
func (s *Server) writePolicies(ctx context.Context, p *evidencepack.Writer, tenantID string) error {
	ps, err := s.Store.ListPolicies(ctx, tenantID)
	if err != nil {
		return err
	}
	version, err := s.Store.PolicyVersion(ctx, tenantID)
	if err != nil {
		return err
	}
	base := map[string]string{}
	if s.Policy != nil {
		base = s.Policy.BaseSources()
	}
	return p.WriteJSON("policies.json", map[string]any{"tenant_policy_version": version, "base": base,
		"tenant": viewAll(ps, viewPolicy)})
}

// writeChain writes receipts.jsonl, the tenant's whole chain as an export
// (receipt.ExportFormat) up to its stored head, read a page at a time and
// verified as it is written; then receipts_verification.json, the result
// (CONTRACT §13's verify-chain shape).
func (s *Server) writeChain(ctx context.Context, p *evidencepack.Writer, tenantID string) error {
	head, err := s.Store.ChainHead(ctx, tenantID)
	if err != nil {
		return err
	}
	w, err := p.Create("receipts.jsonl")
	if err != nil {
		return err
	}
	ew, err := receipt.NewExportWriter(w, receipt.ExportFormat, tenantID, s.ReceiptSigner, head, int(head.Seq))
	if err != nil {
		return err
	}
	var pub []byte
	if s.ReceiptSigner != nil {
		pub = s.ReceiptSigner.PublicKey()
	}
	check := receipt.NewChainCheck(pub, tenantID)
	for from := int64(1); from <= head.Seq; {
		rs, err := s.Store.ReceiptRange(ctx, tenantID, from, head.Seq, packPage)
		if err != nil {
			return err
		}
		for _, r := range rs {
			v := viewReceipt(r)
			check.Add(v)
			if err := ew.Write(v); err != nil {
				return err
			}
		}
		if len(rs) < packPage {
			break
		}
		from = rs[len(rs)-1].Seq + 1
	}
	if err := ew.Flush(); err != nil {
		return err
	}
	checked, errs := check.Finish(head)
	out := verifyChainView{Valid: len(errs) == 0, Checked: checked, Errors: make([]chainErrorView, len(errs))}
	for i, e := range errs {
		out.Errors[i] = chainErrorView{Index: e.Index, ReceiptID: e.ReceiptID, Error: e.Error}
	}
	return p.WriteJSON("receipts_verification.json", out)
}

// writeAuditRange writes audit_events.jsonl: the audit events of the range
// (administrative events and every decision's authorize_decision event),
// newest first, one per line.
func (s *Server) writeAuditRange(ctx context.Context, p *evidencepack.Writer, tenantID string, from, to time.Time) error {
	w, err := p.Create("audit_events.jsonl")
	if err != nil {
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	var werr error
	err = pages(func(pg persistence.Page) ([]persistence.AuditEvent, error) {
		return s.Store.ListAudit(ctx, tenantID, persistence.AuditFilter{}, pg)
	}, func(e persistence.AuditEvent) int64 { return e.Seq }, inRange(from, to, func(e persistence.AuditEvent) time.Time { return e.CreatedAt },
		func(e persistence.AuditEvent) {
			if werr == nil {
				werr = enc.Encode(viewAuditEvent(e))
			}
		}))
	if err != nil {
		return err
	}
	return werr
}

// packApproval is an approval in a pack: its tool call without parameters.
type packApproval struct {
	ApprovalID     string     `json:"approval_id"`
	DecisionID     string     `json:"decision_id"`
	AgentID        string     `json:"agent_id"`
	Tool           string     `json:"tool"`
	Action         string     `json:"action"`
	ActionHash     string     `json:"action_hash"`
	Status         string     `json:"status"`
	Reason         *string    `json:"reason"`
	ApproverUserID *string    `json:"approver_user_id"`
	CreatedAt      time.Time  `json:"created_at"`
	DecidedAt      *time.Time `json:"decided_at"`
	ExpiresAt      time.Time  `json:"expires_at"`
	ConsumedAt     *time.Time `json:"consumed_at"`
}

func viewPackApproval(a persistence.Approval) packApproval {
	var tc struct{ Tool, Action string }
	_ = json.Unmarshal(a.ToolCall, &tc)
	return packApproval{ApprovalID: a.ID, DecisionID: a.DecisionID, AgentID: a.AgentID, Tool: tc.Tool, Action: tc.Action,
		ActionHash: a.ActionHash, Status: a.EffectiveStatus(time.Now()), Reason: a.Reason, ApproverUserID: a.ApproverUserID,
		CreatedAt: a.CreatedAt.UTC(), DecidedAt: utcPtr(a.DecidedAt), ExpiresAt: a.ExpiresAt.UTC(), ConsumedAt: utcPtr(a.ConsumedAt)}
}

// pages reads a newest-first list a page at a time (by its seq cursor)
// and hands each row to each until it returns false or the list ends.
func pages[T any](list func(persistence.Page) ([]T, error), seq func(T) int64, each func(T) bool) error {
	for pg := (persistence.Page{Limit: packPage}); ; {
		rows, err := list(pg)
		if err != nil {
			return err
		}
		more := len(rows) > pg.Limit // the store reads one row past the page
		rows = rows[:min(len(rows), pg.Limit)]
		for _, r := range rows {
			if !each(r) {
				return nil
			}
		}
		if !more || len(rows) == 0 {
			return nil
		}
		pg.After = seq(rows[len(rows)-1])
	}
}

// inRange keeps the rows of a newest-first list whose time is within
// [from, to) and stops once a whole page has gone by older than from (rows
// are in time order but for clock skew between nodes).
func inRange[T any](from, to time.Time, at func(T) time.Time, keep func(T)) func(T) bool {
	older := 0
	return func(r T) bool {
		t := at(r)
		switch {
		case t.Before(from):
			older++
			return older < packPage
		case t.Before(to):
			keep(r)
		}
		older = 0
		return true
	}
}
