package httpapi

import (
	"encoding/json"
	"time"

	"svc/actors"
	"svc/control"
	"svc/persistence"
	"svc/rules/detect"
)

// ruleView is one effective detection rule (SPEC 4.5, CONTRACT §7).
type ruleView struct {
	RuleKey     string         `json:"rule_key"`
	AlertName   string         `json:"alert_name"`
	Severity    string         `json:"severity" openapi:"enum=INFO|LOW|MEDIUM|HIGH"`
	Source      string         `json:"source"`
	Enabled     bool           `json:"enabled"`
	Condition   map[string]any `json:"condition"`
	Description string         `json:"description,omitempty"`
	CreatedAt   *time.Time     `json:"created_at,omitempty"`
	UpdatedAt   *time.Time     `json:"updated_at,omitempty"`
}

type ruleReq struct {
	RuleKey   string         `json:"rule_key" openapi:"required,pattern=key"`
	AlertName *string        `json:"alert_name"`
	Severity  string         `json:"severity" openapi:"required,pattern=severity"`
	Enabled   *bool          `json:"enabled"`
	Condition map[string]any `json:"condition" openapi:"required"`
}

type backtestReq struct {
	From *time.Time `json:"from"`
	To   *time.Time `json:"to"`
}

type backtestView struct {
	RuleKey string `json:"rule_key"`
	detect.BacktestResult
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
}

func viewDefaultRule(r detect.Rule) ruleView {
	return ruleView{RuleKey: r.Key, AlertName: r.AlertName, Severity: r.Severity, Source: detect.SourceDefault, Enabled: true,
		Condition: r.Condition.Raw(), Description: r.Description}
}

func viewCustomRule(r persistence.CustomRule) ruleView {
	var cond map[string]any
	_ = json.Unmarshal(r.Condition, &cond)
	c, u := r.CreatedAt.UTC(), r.UpdatedAt.UTC()
	return ruleView{RuleKey: r.Key, AlertName: r.AlertName, Severity: r.Severity, Source: detect.SourceCustom, Enabled: r.Enabled,
		Condition: cond, CreatedAt: &c, UpdatedAt: &u}
}

// maxBacktestRange bounds a backtest's range; the decisions scanned are
// capped at detect.MaxBacktestDecisions anyway.
const maxBacktestRange = 366 * 24 * time.Hour

func (s *Server) registerSOCRules() {
	s.register(Route{Method: "GET", Path: "/soc/rules", Access: AccessViewer, Tag: "soc", Resp: []ruleView{},
		Summary: "The effective detection rules: the eight defaults (source default) and the tenant's custom rules (source custom).",
		Handle:  s.listSOCRules})
	s.register(Route{Method: "POST", Path: "/soc/rules", Access: AccessAdmin, Tag: "soc", Body: &ruleReq{}, AcceptYAML: true,
		Resp: ruleView{}, Errors: []int{409},
		Summary: "Create or replace a custom rule. The body is JSON or YAML (Content-Type application/yaml): rule_key " +
			"([a-z0-9_]{1,64}; a default rule's key is 409), alert_name (default the key), severity (INFO, LOW, MEDIUM or HIGH, " +
			"any case), enabled (default true), condition (CONTRACT §7: field to scalar or to one of eq, ne, gt, gte, lt, lte, in, " +
			"contains, prefix). An invalid condition or severity is 400 with the offending path in details.path. The change " +
			"applies from the next event on every node.",
		Handle: s.putSOCRule})
	s.register(Route{Method: "DELETE", Path: "/soc/rules/:rule_key", Access: AccessAdmin, Tag: "soc", Status: 204, Errors: []int{404, 409},
		Summary: "Delete a custom rule (a default rule's key is 409).",
		Handle:  s.deleteSOCRule})
	s.register(Route{Method: "POST", Path: "/soc/rules/reload", Access: AccessAdmin, Tag: "soc", Resp: map[string]any{},
		Summary: "A no-op kept for compatibility: rules are read fresh for every event (a change invalidates the cache at once).",
		Handle:  s.reloadSOCRules})
	s.register(Route{Method: "POST", Path: "/soc/rules/:rule_key/backtest", Access: AccessAdmin, Tag: "soc", Body: &backtestReq{},
		OptionalBody: true, Resp: backtestView{}, Errors: []int{404},
		Summary: "Replay a default or enabled custom rule over the tenant's recorded decisions from `from` to `to` (RFC 3339; " +
			"default the trailing 7 days), read-only and in memory, scanning at most 50,000 decisions (the newest). " +
			"estimated_daily_alert_volume is match_count divided by the range in days. 404 for an unknown or disabled rule.",
		Handle: s.backtestSOCRule})
}

// listSOCRules serves GET /soc/rules.
func (s *Server) listSOCRules(c *Call) (any, error) {
	custom, err := s.Store.ListRules(c.Ctx(), c.Principal.TenantID)
	if err != nil {
		return nil, err
	}
	out := viewAll(detect.Defaults(), viewDefaultRule)
	return append(out, viewAll(custom, viewCustomRule)...), nil
}

// putSOCRule serves POST /soc/rules.
func (s *Server) putSOCRule(c *Call) (any, error) {
	b := bodyOf[ruleReq](c)
	r, err := s.Control.PutSOCRule(c.Ctx(), operator(c.Principal), control.SOCRule{Key: b.RuleKey, AlertName: b.AlertName,
		Severity: b.Severity, Enabled: b.Enabled, Condition: b.Condition})
	if err != nil {
		return nil, err
	}
	return viewCustomRule(r), nil
}

// deleteSOCRule serves DELETE /soc/rules/:rule_key.
func (s *Server) deleteSOCRule(c *Call) (any, error) {
	return nil, s.Control.DeleteSOCRule(c.Ctx(), operator(c.Principal), c.Param("rule_key"))
}

// reloadSOCRules serves POST /soc/rules/reload.
func (s *Server) reloadSOCRules(*Call) (any, error) {
	return map[string]any{"reloaded": true, "note": "rules are evaluated fresh per event; nothing to reload"}, nil
}

// backtestSOCRule serves POST /soc/rules/:rule_key/backtest.
func (s *Server) backtestSOCRule(c *Call) (any, error) {
	b := bodyOf[backtestReq](c)
	key := c.Param("rule_key")
	rule, ok := s.findRule(c, key)
	if !ok {
		return nil, notFound("rule")
	}
	to := nowUTC()
	if b.To != nil {
		to = b.To.UTC()
	}
	from := to.Add(-7 * 24 * time.Hour)
	if b.From != nil {
		from = b.From.UTC()
	}
	if !from.Before(to) {
		return nil, invalidField("from", "must be before to")
	}
	if to.Sub(from) > maxBacktestRange {
		return nil, invalidField("from", "the range is at most 366 days")
	}
	if err := s.Authorizer.Consistent(c.Ctx()); err != nil {
		return nil, err
	}
	ds, err := s.Store.DecisionsBetween(c.Ctx(), c.Principal.TenantID, from, to, detect.MaxBacktestDecisions)
	if err != nil {
		return nil, err
	}
	events := make([]detect.Event, len(ds))
	for i, d := range ds {
		events[i] = actors.DecisionEvent(d)
	}
	return backtestView{RuleKey: key, BacktestResult: detect.Backtest(rule, events, from, to), From: from, To: to}, nil
}

// findRule is the default or enabled custom rule with key.
func (s *Server) findRule(c *Call, key string) (detect.Rule, bool) {
	for _, r := range detect.Defaults() {
		if r.Key == key {
			return r, true
		}
	}
	custom, err := s.Store.ListRules(c.Ctx(), c.Principal.TenantID)
	if err != nil {
		return detect.Rule{}, false
	}
	for _, r := range custom {
		if r.Key != key || !r.Enabled {
			continue
		}
		rule, err := actors.CustomRule(r)
		return rule, err == nil
	}
	return detect.Rule{}, false
}
