// Package rules is the home of svc's pure decision logic: policy
// evaluation (rules/policy, OPA in process), risk scoring (rules/risk), and
// later detection, correlation and inspection. Nothing under rules/ does
// I/O; everything is table-tested.
package rules
