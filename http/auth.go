package httpapi

import (
	"crypto/subtle"
	"errors"
	"net/http"
	"strings"

	"svc/credential"
	"svc/persistence"
)

// Access is what a route requires of its caller.
type Access int

// Access levels. Operator roles nest: admin ⊃ approver ⊃ viewer.
const (
	AccessPublic Access = iota
	AccessSuperAdmin
	AccessAgent
	AccessViewer
	AccessApprover
	AccessAdmin
	AccessAgentOrViewer
	// AccessAgentOrAdmin: an agent token (its own resources) or an admin
	// operator token (approval consume).
	AccessAgentOrAdmin
)

// Principal kinds.
const (
	KindAgent      = "agent"
	KindOperator   = "operator"
	KindSuperAdmin = "super_admin"
)

// TenantHeader names the tenant for super-admin calls.
const TenantHeader = "X-Svc-Tenant-ID"

// Principal is the authenticated caller.
type Principal struct {
	Kind     string
	TenantID string
	Role     string
	AgentID  string
	TokenID  string
	// agent is the agent record an agent token was looked up as (nil for
	// other principals), for a handler that needs more than its id.
	agent *persistence.Agent
}

// Actor names the principal in audit events (never a token).
func (p Principal) Actor() string {
	switch p.Kind {
	case KindAgent:
		return "agent:" + p.AgentID
	case KindOperator:
		return "operator:" + p.TokenID
	default:
		return p.Kind
	}
}

var roleRank = map[string]int{persistence.RoleViewer: 1, persistence.RoleApprover: 2, persistence.RoleAdmin: 3}

func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
}

// authenticate identifies the caller and checks it against the route's
// access level (CONTRACT §2): 401 for a missing or unknown token, 403 for
// the wrong kind of credential or role, or another tenant in the header.
func (s *Server) authenticate(r *http.Request, need Access) (Principal, error) {
	tok := bearer(r)
	if tok == "" {
		return Principal{}, unauthorized("missing bearer token")
	}
	ctx := r.Context()
	var p Principal
	switch {
	case strings.HasPrefix(tok, credential.AgentPrefix):
		a, err := s.Store.LookupAgentToken(ctx, credential.Hash(tok))
		if errors.Is(err, persistence.ErrNotFound) {
			return p, unauthorized("invalid agent token")
		}
		if err != nil {
			return p, err
		}
		switch a.Status {
		case persistence.AgentActive, persistence.AgentFrozen:
		default:
			return p, unauthorized("invalid agent token")
		}
		p = Principal{Kind: KindAgent, TenantID: a.TenantID, AgentID: a.ID, agent: &a}
	case strings.HasPrefix(tok, credential.OperatorPrefix):
		o, err := s.Store.LookupOperatorToken(ctx, credential.Hash(tok))
		if errors.Is(err, persistence.ErrNotFound) {
			return p, unauthorized("invalid operator token")
		}
		if err != nil {
			return p, err
		}
		p = Principal{Kind: KindOperator, TenantID: o.TenantID, Role: o.Role, TokenID: o.ID}
	case s.cfg.SuperAdminEnabled() && subtle.ConstantTimeCompare([]byte(tok), []byte(s.cfg.AdminToken)) == 1:
		p = Principal{Kind: KindSuperAdmin, Role: persistence.RoleAdmin}
	default:
		return p, unauthorized("invalid token")
	}

	switch need {
	case AccessSuperAdmin:
		if !s.cfg.SuperAdminEnabled() {
			// CONTRACT §2: fail closed, 401 for every caller.
			return p, unauthorized("super-admin endpoints are disabled: SVC_ADMIN_TOKEN is unset or shorter than 32 characters")
		}
		if p.Kind != KindSuperAdmin {
			return p, forbidden("this endpoint requires the super-admin token")
		}
		return p, nil
	case AccessAgent:
		if p.Kind != KindAgent {
			return p, forbidden("this endpoint requires an agent token")
		}
		return p, nil
	case AccessAgentOrViewer:
		if p.Kind == KindAgent {
			return p, nil
		}
		need = AccessViewer
	case AccessAgentOrAdmin:
		if p.Kind == KindAgent {
			return p, nil
		}
		need = AccessAdmin
	}
	if p.Kind == KindAgent {
		return p, forbidden("this endpoint requires an operator token")
	}
	header := strings.TrimSpace(r.Header.Get(TenantHeader))
	if p.Kind == KindSuperAdmin {
		if header == "" {
			return p, badRequest("tenant_required", "the super-admin token needs the %s header on tenant endpoints", TenantHeader)
		}
		if _, err := s.Store.GetTenant(r.Context(), header); err != nil {
			if errors.Is(err, persistence.ErrNotFound) {
				return p, notFound("tenant")
			}
			return p, err
		}
		p.TenantID = header
		return p, nil
	}
	if header != "" && header != p.TenantID {
		return p, forbidden("the %s header names another tenant", TenantHeader)
	}
	want := map[Access]string{AccessViewer: persistence.RoleViewer, AccessApprover: persistence.RoleApprover, AccessAdmin: persistence.RoleAdmin}[need]
	if roleRank[p.Role] < roleRank[want] {
		return p, forbidden("role %s may not call this endpoint (needs %s)", p.Role, want)
	}
	return p, nil
}
