# The base policy set. Every file of base/ belongs to the one package
# svc.policies.base, so a single evaluation of its `results` covers them all
# (one package per policy costs about twice as much per call); each result
# names its policy id in "policy".
#
# Sets are written as literals where they are used, and conditions on input
# come first, so that most rules fail on their first expression without
# evaluating a helper rule.
package svc.policies.base

# A call mutates state when the request says so or when the skill registry
# says the action does: a client cannot pass a registered mutation off as a
# read.
mutating if input.mutates_state == true

mutating if input.skill.mutates_state == true
