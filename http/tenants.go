package httpapi

import (
	"strings"
	"time"
	"unicode/utf8"

	"svc/control"
	"svc/persistence"
)

type tenantCreate struct {
	Name string `json:"name" openapi:"required,pattern=nonblank,maxLength=128"`
}

type tenantView struct {
	TenantID                     string    `json:"tenant_id" openapi:"format=uuid"`
	Name                         string    `json:"name"`
	CreatedAt                    time.Time `json:"created_at"`
	AutoRotateTokenOnLeakEnabled bool      `json:"auto_rotate_token_on_leak_enabled"`
}

type tenantCreated struct {
	tenantView
	OperatorToken string `json:"operator_token"`
}

type settingsView struct {
	TenantID                     string `json:"tenant_id" openapi:"format=uuid"`
	AutoRotateTokenOnLeakEnabled bool   `json:"auto_rotate_token_on_leak_enabled"`
	// CodehostWebhookSecretSet: the tenant has its own code-host webhook
	// secret, the only one its deliveries are verified with.
	CodehostWebhookSecretSet bool `json:"codehost_webhook_secret_set"`
	// CodehostWebhookSecret is present only when the patch generated it,
	// shown this once.
	CodehostWebhookSecret string `json:"codehost_webhook_secret,omitempty"`
}

type settingsPatch struct {
	AutoRotateTokenOnLeakEnabled *bool `json:"auto_rotate_token_on_leak_enabled" openapi:"notnull"`
	// CodehostWebhookSecret is "generate", 32 to 256 printable ASCII
	// characters without spaces, or null to remove the tenant's own secret.
	CodehostWebhookSecret *string `json:"codehost_webhook_secret" openapi:"pattern=codehost_hook_key"`
}

type opTokenCreate struct {
	Name string `json:"name" openapi:"required,pattern=nonblank,maxLength=128"`
	Role string `json:"role" openapi:"required,enum=admin|approver|viewer"`
}

type opTokenView struct {
	TokenID   string    `json:"token_id" openapi:"format=uuid"`
	Name      string    `json:"name"`
	Role      string    `json:"role" openapi:"enum=admin|approver|viewer"`
	CreatedAt time.Time `json:"created_at"`
}

type opTokenCreated struct {
	opTokenView
	OperatorToken string `json:"operator_token"`
}

func viewTenant(t persistence.Tenant) tenantView {
	return tenantView{TenantID: t.ID, Name: t.Name, CreatedAt: t.CreatedAt.UTC(), AutoRotateTokenOnLeakEnabled: t.AutoRotateTokenOnLeak}
}

func viewOpToken(t persistence.OperatorToken) opTokenView {
	return opTokenView{TokenID: t.ID, Name: t.Name, Role: t.Role, CreatedAt: t.CreatedAt.UTC()}
}

// operator is who makes a change through the control plane: the
// principal's tenant and its audit actor.
func operator(p Principal) control.Operator {
	return control.Operator{TenantID: p.TenantID, Actor: p.Actor()}
}

// validName checks a 1..max character name.
func validName(field, v string, limit int) error {
	if strings.TrimSpace(v) == "" {
		return invalidField(field, "is required")
	}
	if utf8.RuneCountInString(v) > limit {
		return invalidField(field, "must be at most %d characters", limit)
	}
	return nil
}

func (s *Server) registerTenants() {
	s.register(Route{Method: "POST", Path: "/tenants", Access: AccessSuperAdmin, Tag: "tenants", Status: 201,
		Summary: "Create a tenant; the response carries its admin operator token, once.",
		Body:    &tenantCreate{}, Resp: tenantCreated{}, Errors: []int{409},
		Handle: s.createTenant})
	s.register(Route{Method: "GET", Path: "/tenants", Access: AccessSuperAdmin, Tag: "tenants", Resp: []tenantView{},
		Summary: "List tenants.",
		Handle:  s.listTenants})
	s.register(Route{Method: "DELETE", Path: "/tenants/:tenant_id", Access: AccessSuperAdmin, Tag: "tenants", Status: 204,
		Summary: "Delete a tenant and every row it owns; its tokens stop working at once.", Errors: []int{404},
		Handle: s.deleteTenant})
	s.register(Route{Method: "GET", Path: "/tenants/settings", Access: AccessViewer, Tag: "tenants", Resp: settingsView{},
		Summary: "The tenant's settings; codehost_webhook_secret_set says whether it has its own code-host webhook secret (never shown).",
		Handle:  s.getTenantSettings})
	s.register(Route{Method: "PATCH", Path: "/tenants/settings", Access: AccessAdmin, Tag: "tenants", Resp: settingsView{},
		Summary: "Change the tenant's settings (config_change audit event each), at least one of auto_rotate_token_on_leak_enabled " +
			"and codehost_webhook_secret (400 invalid_field otherwise). codehost_webhook_secret sets the tenant's own code-host " +
			"webhook secret, from then on the only one POST /webhooks/codehost verifies the tenant's deliveries with (the " +
			"installation's SVC_CODEHOST_WEBHOOK_SECRET is refused for it): \"generate\" mints one, returned in this answer " +
			"only; otherwise 32 to 256 printable ASCII characters without spaces; null removes it, and the installation secret " +
			"applies again.",
		Body: &settingsPatch{}, Handle: s.updateTenantSettings})
	s.register(Route{Method: "POST", Path: "/operator-tokens", Access: AccessAdmin, Tag: "tenants", Status: 201,
		Summary: "Create an operator token with a role; the secret is returned once.",
		Body:    &opTokenCreate{}, Resp: opTokenCreated{},
		Handle: s.createOperatorToken})
	s.register(Route{Method: "GET", Path: "/operator-tokens", Access: AccessAdmin, Tag: "tenants", Resp: []opTokenView{},
		Summary: "List the tenant's operator tokens (never their secrets).",
		Handle:  s.listOperatorTokens})
	s.register(Route{Method: "DELETE", Path: "/operator-tokens/:token_id", Access: AccessAdmin, Tag: "tenants", Status: 204,
		Summary: "Revoke an operator token; it fails on the very next call.", Errors: []int{404},
		Handle: s.deleteOperatorToken})
}

// createTenant serves POST /tenants.
func (s *Server) createTenant(c *Call) (any, error) {
	b := bodyOf[tenantCreate](c)
	if err := validName("name", b.Name, 128); err != nil {
		return nil, err
	}
	t, tok, err := s.Control.CreateTenant(c.Ctx(), c.Principal.Actor(), b.Name)
	if err != nil {
		return nil, err
	}
	return tenantCreated{viewTenant(t), tok}, nil
}

// listTenants serves GET /tenants.
func (s *Server) listTenants(c *Call) (any, error) {
	ts, err := s.Store.ListTenants(c.Ctx())
	if err != nil {
		return nil, err
	}
	return viewAll(ts, viewTenant), nil
}

// deleteTenant serves DELETE /tenants/:tenant_id.
func (s *Server) deleteTenant(c *Call) (any, error) {
	return nil, s.Control.DeleteTenant(c.Ctx(), c.Param("tenant_id"))
}

// getTenantSettings serves GET /tenants/settings.
func (s *Server) getTenantSettings(c *Call) (any, error) {
	t, err := s.Store.GetTenant(c.Ctx(), c.Principal.TenantID)
	if err != nil {
		return nil, err
	}
	return s.viewSettings(c, t)
}

// viewSettings is the tenant's settings view.
func (s *Server) viewSettings(c *Call, t persistence.Tenant) (settingsView, error) {
	own, err := s.Store.CodehostWebhookSecret(c.Ctx(), t.ID)
	if err != nil {
		return settingsView{}, err
	}
	return settingsView{TenantID: t.ID, AutoRotateTokenOnLeakEnabled: t.AutoRotateTokenOnLeak, CodehostWebhookSecretSet: own != ""}, nil
}

// updateTenantSettings serves PATCH /tenants/settings.
func (s *Server) updateTenantSettings(c *Call) (any, error) {
	b := bodyOf[settingsPatch](c)
	rotate, hasSecret := c.HasField("auto_rotate_token_on_leak_enabled"), c.HasField("codehost_webhook_secret")
	switch {
	case rotate && b.AutoRotateTokenOnLeakEnabled == nil:
		return nil, invalidField("auto_rotate_token_on_leak_enabled", "must be true or false")
	case !rotate && !hasSecret:
		return nil, invalidField("auto_rotate_token_on_leak_enabled", "is required unless codehost_webhook_secret is given")
	}
	change := control.TenantSettings{AutoRotateTokenOnLeak: b.AutoRotateTokenOnLeakEnabled}
	if hasSecret {
		secret := "" // null removes the tenant's own secret
		if b.CodehostWebhookSecret != nil {
			secret = *b.CodehostWebhookSecret
		}
		change.CodehostWebhookSecret = &secret
	}
	t, shown, err := s.Control.UpdateTenantSettings(c.Ctx(), operator(c.Principal), change)
	if err != nil {
		return nil, err
	}
	v, err := s.viewSettings(c, t)
	v.CodehostWebhookSecret = shown
	return v, err
}

// createOperatorToken serves POST /operator-tokens.
func (s *Server) createOperatorToken(c *Call) (any, error) {
	b := bodyOf[opTokenCreate](c)
	if err := validName("name", b.Name, 128); err != nil {
		return nil, err
	}
	if _, ok := roleRank[b.Role]; !ok {
		return nil, invalidField("role", "must be admin, approver or viewer")
	}
	ot, tok, err := s.Control.CreateOperatorToken(c.Ctx(), operator(c.Principal), b.Name, b.Role)
	if err != nil {
		return nil, err
	}
	return opTokenCreated{viewOpToken(ot), tok}, nil
}

// listOperatorTokens serves GET /operator-tokens.
func (s *Server) listOperatorTokens(c *Call) (any, error) {
	ts, err := s.Store.ListOperatorTokens(c.Ctx(), c.Principal.TenantID)
	if err != nil {
		return nil, err
	}
	return viewAll(ts, viewOpToken), nil
}

// deleteOperatorToken serves DELETE /operator-tokens/:token_id.
func (s *Server) deleteOperatorToken(c *Call) (any, error) {
	return nil, s.Control.DeleteOperatorToken(c.Ctx(), operator(c.Principal), c.Param("token_id"))
}
