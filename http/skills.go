package httpapi

// The skill registry (SPEC 4.2 rule 9's skill input): /skills.

import (
	"errors"
	"time"

	"svc/canonical"
	"svc/persistence"
)

// registerSkills registers /skills.
func (s *Server) registerSkills() {
	s.register(Route{Method: "PUT", Path: "/skills/:skill_key", Access: AccessAdmin, Tag: "policies", Body: &skillPut{}, Resp: skillView{},
		Summary: "Register or replace a skill: each action's risk (low, medium, high, critical), mutates_state and approval_required, as the policy input's `skill`; for run policies (CONTRACT §16) an optional `output_trust` (a trust level, on the skill or on one action: what the calls bring into their run lowers the run's `input.run.trust.min` for its later calls), `labels` (for example egress, private_read, untrusted_ingest: the run's `input.run.labels`) and `accumulate` (top-level numeric parameters the run sums in `input.run.sums`). The skill key and action keys are normalized like a call's tool and action (percent-decoded, NFC, trimmed, lower-cased); two action keys that normalize alike are 400.",
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
	// OutputTrust is the trust level of what the skill's calls bring into
	// their run (CONTRACT §16); an action's own output_trust wins.
	OutputTrust string `json:"output_trust,omitempty"`
}

type skillView struct {
	SkillKey    string                             `json:"skill_key"`
	Description string                             `json:"description"`
	Actions     map[string]persistence.SkillAction `json:"actions"`
	OutputTrust string                             `json:"output_trust,omitempty"`
	CreatedAt   time.Time                          `json:"created_at"`
	UpdatedAt   time.Time                          `json:"updated_at"`
}

func viewSkill(sk persistence.Skill) skillView {
	return skillView{SkillKey: sk.Key, Description: sk.Description, Actions: sk.Actions, OutputTrust: sk.OutputTrust, CreatedAt: sk.CreatedAt.UTC(), UpdatedAt: sk.UpdatedAt.UTC()}
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
	sk, err := s.Control.PutSkill(c.Ctx(), operator(c.Principal), key, b.Description, b.OutputTrust, b.Actions)
	if err != nil {
		return nil, err
	}
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
	return nil, s.Control.DeleteSkill(c.Ctx(), operator(c.Principal), skillKeys(c)...)
}
