package httpapi

// GET /whoami: the caller's own credential as the gateway sees it. The
// operator console reads it after sign-in to learn the token's role and
// show only the actions that role may take; any client may (CONTRACT §12:
// the console reads the same API as everyone).

func (s *Server) registerWhoami() {
	s.register(Route{Method: "GET", Path: "/whoami", Access: AccessViewer, Tag: "tenants", Resp: whoamiView{},
		Summary: "The calling operator token: its tenant, id and role (admin, approver or viewer); the super-admin token (with X-Svc-Tenant-ID) answers kind super_admin and role admin. Never the token itself.",
		Handle:  s.whoami})
}

type whoamiView struct {
	Kind     string  `json:"kind" openapi:"enum=operator|super_admin"`
	TenantID string  `json:"tenant_id" openapi:"format=uuid"`
	TokenID  *string `json:"token_id" openapi:"format=uuid"`
	Role     string  `json:"role" openapi:"enum=admin|approver|viewer"`
}

// whoami serves GET /whoami.
func (s *Server) whoami(c *Call) (any, error) {
	p := c.Principal
	role := p.Role
	if p.Kind == KindSuperAdmin {
		role = "admin"
	}
	return whoamiView{Kind: p.Kind, TenantID: p.TenantID, TokenID: nullable(p.TokenID), Role: role}, nil
}
