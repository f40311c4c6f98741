package httpapi

// The skill registry (SPEC 4.2 rule 9's skill input): /skills.

import (
	"errors"
	"time"

	"svc/canonical"
	"svc/messages"
	"svc/persistence"
)

// registerSkills registers /skills.
func (s *Server) registerSkills() {
	s.register(Route{Method: "PUT", Path: "/skills/:skill_key", Access: AccessAdmin, Tag: "policies", Body: &skillPut{}, Resp: skillView{},
		Summary: "Register or replace a skill: each action's risk (low, medium, high, critical), mutates_state and approval_required, as the policy input's `skill`. The skill key and action keys are normalized like a call's tool and action (percent-decoded, NFC, trimmed, lower-cased); two action keys that normalize alike are 400.",
		Handle:  s.putSkill})
	s.register(Route{Method: "GET", Path: "/skills", Access: AccessViewer, Tag: "policies", Resp: []skillView{}, Summary: "The skill registry.",
		Handle: s.listSkills})
	s.register(Route{Method: "GET", Path: "/skills/:skill_key", Access: AccessViewer, Tag: "policies", Resp: skillView{}, Errors: []int{404},
		Summary: "One skill.",
		Handle:  s.getSkill})
	s.register(Route{Method: "DELETE", Path: "/skills/:skill_key", Access: AccessAdmin, Tag: "policies", Status: 204, Errors: []int{404},
		Summary: "Remove a skill.",
		Handle:  s.deleteSkill})
}

type skillPut struct {
	Description string                             `json:"description"`
	Actions     map[string]persistence.SkillAction `json:"actions"`
}

type skillView struct {
	SkillKey    string                             `json:"skill_key"`
	Description string                             `json:"description"`
	Actions     map[string]persistence.SkillAction `json:"actions"`
	CreatedAt   time.Time                          `json:"created_at"`
	UpdatedAt   time.Time                          `json:"updated_at"`
}

func viewSkill(sk persistence.Skill) skillView {
	return skillView{SkillKey: sk.Key, Description: sk.Description, Actions: sk.Actions, CreatedAt: sk.CreatedAt.UTC(), UpdatedAt: sk.UpdatedAt.UTC()}
}

// skillKey is the path's skill key, normalized as a call's tool is (SPEC
// 4.2 rule 7), so that every spelling of one tool names one skill.
func skillKey(c *Call) string { return canonical.NormalizeIdentifier(c.Param("skill_key")) }

// skillKeys are the keys GET and DELETE try, in order: the normalized key,
// then the path's own spelling when it differs, so that a skill stored as
// typed (before keys were normalized) can still be read and removed.
func skillKeys(c *Call) []string {
	if raw, key := c.Param("skill_key"), skillKey(c); raw != key {
		return []string{key, raw}
	}
	return []string{skillKey(c)}
}

// putSkill serves PUT /skills/:skill_key.
func (s *Server) putSkill(c *Call) (any, error) {
	b := bodyOf[skillPut](c)
	key := skillKey(c)
	if len(key) == 0 || len(key) > 128 {
		return nil, invalidField("skill_key", "must be 1 to 128 characters")
	}
	// Calls are matched on their normalized tool and action (SPEC 4.2
	// rule 7), so the registry stores its keys normalized the same way:
	// a skill registered as "Danger" with action "Wipe" applies to a
	// call of Danger/Wipe, danger/wipe or DANGER/WIPE.
	actions := make(map[string]persistence.SkillAction, len(b.Actions))
	for name, a := range b.Actions {
		switch a.Risk {
		case "low", "medium", "high", "critical":
		default:
			return nil, invalidField("actions."+name+".risk", "must be low, medium, high or critical")
		}
		norm := canonical.NormalizeIdentifier(name)
		if norm == "" {
			return nil, invalidField("actions."+name, "an action key must not be empty")
		}
		if _, dup := actions[norm]; dup {
			return nil, invalidField("actions."+name, "two action keys normalize to %q", norm)
		}
		actions[norm] = a
	}
	b.Actions = actions
	p := c.Principal
	sk, err := s.Store.PutSkill(c.Ctx(), persistence.Skill{TenantID: p.TenantID, Key: key, Description: b.Description, Actions: b.Actions},
		auditEvent(p, p.TenantID, "config_change", "skill_registered", "", map[string]any{"skill_key": key}))
	if err != nil {
		return nil, s.audited(err)
	}
	s.auditOK()
	s.invalidate(c.Ctx(), messages.CacheSkill, p.TenantID, key)
	return viewSkill(sk), nil
}

// listSkills serves GET /skills.
func (s *Server) listSkills(c *Call) (any, error) {
	list, err := s.Store.ListSkills(c.Ctx(), c.Principal.TenantID)
	if err != nil {
		return nil, err
	}
	return viewAll(list, viewSkill), nil
}

// getSkill serves GET /skills/:skill_key.
func (s *Server) getSkill(c *Call) (any, error) {
	var err error
	for _, key := range skillKeys(c) {
		var sk persistence.Skill
		if sk, err = s.Store.GetSkill(c.Ctx(), c.Principal.TenantID, key); err == nil {
			return viewSkill(sk), nil
		}
		if !errors.Is(err, persistence.ErrNotFound) {
			break
		}
	}
	return nil, orNotFound(err, "skill")
}

// deleteSkill serves DELETE /skills/:skill_key.
func (s *Server) deleteSkill(c *Call) (any, error) {
	p := c.Principal
	var key string
	var err error
	for _, key = range skillKeys(c) {
		err = s.Store.DeleteSkill(c.Ctx(), p.TenantID, key, auditEvent(p, p.TenantID, "config_change", "skill_deleted", "", map[string]any{"skill_key": key}))
		if !errors.Is(err, persistence.ErrNotFound) {
			break
		}
	}
	if errors.Is(err, persistence.ErrNotFound) {
		return nil, notFound("skill")
	}
	if err != nil {
		return nil, s.audited(err)
	}
	s.auditOK()
	s.invalidate(c.Ctx(), messages.CacheSkill, p.TenantID, key)
	return nil, nil
}
