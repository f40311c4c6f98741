package httpapi

// Evidence packs (SPEC 4.5; issue 24): ZIP downloads written straight into
// the response, each with a manifest of SHA-256 hashes signed with the
// receipt key, verifiable offline with `svc verify-pack`. What goes into
// them, and what never does (tokens, token hashes, signing keys, secrets,
// raw tool parameters; SPEC 1.8), is packcontents' to decide; here are the
// routes, the compliance pack's range, the download's headers and the
// abort of a response that failed midway.

import (
	"net/http"
	"strings"
	"time"

	"svc/packcontents"
)

// complianceDefaultRange is the compliance pack's range without from.
const complianceDefaultRange = 30 * 24 * time.Hour

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

// download answers a pack: headers, then the archive as it is written. An
// error once bytes have left aborts the connection, so the client never
// holds a truncated archive that looks whole.
func (s *Server) download(c *Call, pack packcontents.Pack) streamOut {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/zip")
		w.Header().Set("Content-Disposition", `attachment; filename="`+pack.Name+`"`)
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusOK)
		if err := pack.Write(c.Ctx(), w); err != nil {
			s.log.Error("evidence pack aborted", "kind", pack.Kind, "tenant_id", c.Principal.TenantID, "error", err)
			panic(http.ErrAbortHandler)
		}
	}
}

// incidentPack serves GET /incidents/:incident_id/evidence-pack: the
// incident's records as the graph reads them, the rest read by
// packcontents before the first byte, so a failure is still an error
// envelope.
func (s *Server) incidentPack(c *Call) (any, error) {
	recs, err := s.incidentRecords(c)
	if err != nil {
		return nil, err
	}
	pack, err := packcontents.Incident(c.Ctx(), s.Store, c.Principal.TenantID, recs, s.ReceiptSigner)
	if err != nil {
		return nil, err
	}
	return s.download(c, pack), nil
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
	base := map[string]string{}
	if s.Policy != nil {
		base = s.Policy.BaseSources()
	}
	pack, err := packcontents.Compliance(c.Ctx(), s.Store, c.Principal.TenantID, from, to, base, s.ReceiptSigner)
	if err != nil {
		return nil, orNotFound(err, "tenant")
	}
	return s.download(c, pack), nil
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
