// Package gate holds the rules of the pull-request Security Gate (SPEC 4.9
// rules 1 to 6, CONTRACT §9): which authorize calls it concerns, how a
// decision counts, the check run's conclusion, summary and annotations,
// and the deny comment. Pure: the code-host calls and the shared tally
// live in actors/ and codehost/.
package gate

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Name is the check run's name.
const Name = "Security Gate"

// Caps (SPEC 4.9 rules 4 and 5).
const (
	MaxAnnotations = 20
	MaxComments    = 5
)

// AnnotationPath is the synthetic path the annotations are on.
const AnnotationPath = ".svc/decisions"

// Buckets of the tally (rule 2).
const (
	Allowed = "allowed"
	Pending = "pending"
	Denied  = "denied"
)

// PR names a pull request: <owner>/<repo>#<number>.
type PR struct {
	Owner, Repo string
	Number      int
}

func (p PR) String() string { return fmt.Sprintf("%s/%s#%d", p.Owner, p.Repo, p.Number) }

// The code host's owner and repository names: letters, digits, '-', '_'
// and '.', at most 100 characters (and not "." or "..").
var resourceRE = regexp.MustCompile(`^([A-Za-z0-9][A-Za-z0-9._-]{0,99})/([A-Za-z0-9._-]{1,100})#([1-9][0-9]{0,9})$`)

// ParseResource reads an authorize call's resource as a pull request.
func ParseResource(resource string) (PR, bool) {
	m := resourceRE.FindStringSubmatch(strings.TrimSpace(resource))
	if m == nil || m[2] == "." || m[2] == ".." {
		return PR{}, false
	}
	n, err := strconv.Atoi(m[3])
	if err != nil || n <= 0 {
		return PR{}, false
	}
	return PR{Owner: m[1], Repo: m[2], Number: n}, true
}

// Bucket is how a decision counts (rule 2): allow and redact as allowed,
// require_approval as pending, deny, quarantine and anything else as
// denied.
func Bucket(decision string) string {
	switch decision {
	case "allow", "redact":
		return Allowed
	case "require_approval":
		return Pending
	}
	return Denied
}

// Tally is a pull request's counts.
type Tally struct {
	Allowed, Pending, Denied int64
}

// Conclusion is the check run's conclusion (rule 3): failure if any call
// was denied, else action_required if any waits for approval, else
// success.
func (t Tally) Conclusion() string {
	switch {
	case t.Denied > 0:
		return "failure"
	case t.Pending > 0:
		return "action_required"
	}
	return "success"
}

// Title is the check run output's title.
func (t Tally) Title() string {
	switch t.Conclusion() {
	case "failure":
		return "Agent calls were denied"
	case "action_required":
		return "Agent calls wait for approval"
	}
	return "Every agent call was allowed"
}

// Summary gives the three counts (rule 3).
func (t Tally) Summary() string {
	return fmt.Sprintf("svc authorized the agents' calls on this pull request: %d allowed, %d denied, %d pending approval.",
		t.Allowed, t.Denied, t.Pending)
}

// Decision is what the gate knows of one decision.
type Decision struct {
	ID              string
	Decision        string
	Reason          string
	Action          string
	AgentID         string
	RiskScore       int
	MatchedPolicies []string
}

// Output is what the check run shows: the conclusion, title and summary
// of the tally, and the annotations (at most MaxAnnotations).
type Output struct {
	Tally       Tally
	Annotations []Annotation
}

// Annotation is one check-run annotation (rule 4) of a decision that was
// not allowed.
type Annotation struct {
	Level, Title, Message string
}

// Annotate is the annotation of a decision, and false for an allowed one.
func Annotate(d Decision) (Annotation, bool) {
	level := "failure"
	switch Bucket(d.Decision) {
	case Allowed:
		return Annotation{}, false
	case Pending:
		level = "warning"
	}
	return Annotation{Level: level, Title: fmt.Sprintf("%s: %s", d.Decision, d.Action),
		Message: fmt.Sprintf("Decision %s by agent %s: %s (risk %d; policies: %s).", d.ID, d.AgentID, d.Reason, d.RiskScore,
			policies(d.MatchedPolicies))}, true
}

func policies(p []string) string {
	if len(p) == 0 {
		return "none"
	}
	return strings.Join(p, ", ")
}

// Comment is the pull-request comment of a deny (rule 5): the matched
// policies, the risk score and the decision id.
func Comment(d Decision) string {
	return fmt.Sprintf("**svc Security Gate: an agent's call was denied.**\n\n- Action: `%s`\n- Matched policies: %s\n- Risk score: %d\n- Decision: `%s`\n",
		d.Action, policies(d.MatchedPolicies), d.RiskScore, d.ID)
}
