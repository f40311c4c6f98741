package svc.policies.base

# registered_approval: require approval where the skill registry marks the
# action approval_required.
results contains {"policy": "registered_approval", "decision": "require_approval", "reason": "approval_required"} if {
	input.skill.approval_required == true
}
