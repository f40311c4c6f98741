package gate

import (
	"strings"
	"testing"
)

func TestParseResource(t *testing.T) {
	for _, c := range []struct {
		in string
		ok bool
		pr PR
	}{
		{"acme/widgets#12", true, PR{"acme", "widgets", 12}},
		{" acme/my.repo_x-1#1 ", true, PR{"acme", "my.repo_x-1", 1}},
		{"acme/widgets#0", false, PR{}},
		{"acme/widgets#-1", false, PR{}},
		{"acme/widgets", false, PR{}},
		{"acme#12", false, PR{}},
		{"acme/../x#1", false, PR{}},
		{"acme/..#1", false, PR{}},
		{"acme/wid gets#1", false, PR{}},
		{"acme/widgets#12345678901", false, PR{}},
		{"", false, PR{}},
	} {
		pr, ok := ParseResource(c.in)
		if ok != c.ok || pr != c.pr {
			t.Errorf("ParseResource(%q) = %v %v, want %v %v", c.in, pr, ok, c.pr, c.ok)
		}
	}
}

func TestTally(t *testing.T) {
	for _, c := range []struct {
		name       string
		decisions  []string
		conclusion string
		tally      Tally
	}{
		{"all allowed", []string{"allow", "redact"}, "success", Tally{Allowed: 2}},
		{"one pending", []string{"allow", "require_approval"}, "action_required", Tally{Allowed: 1, Pending: 1}},
		{"a deny wins", []string{"require_approval", "deny", "allow"}, "failure", Tally{Allowed: 1, Pending: 1, Denied: 1}},
		{"quarantine and unknown are denied", []string{"quarantine", "what"}, "failure", Tally{Denied: 2}},
		{"nothing yet", nil, "success", Tally{}},
	} {
		var tl Tally
		for _, d := range c.decisions {
			switch Bucket(d) {
			case Allowed:
				tl.Allowed++
			case Pending:
				tl.Pending++
			case Denied:
				tl.Denied++
			}
		}
		if tl != c.tally || tl.Conclusion() != c.conclusion {
			t.Errorf("%s: %+v %s", c.name, tl, tl.Conclusion())
		}
	}
	if s := (Tally{Allowed: 3, Denied: 1, Pending: 2}).Summary(); !strings.Contains(s, "3 allowed, 1 denied, 2 pending") {
		t.Errorf("summary %q", s)
	}
}

func TestAnnotateAndComment(t *testing.T) {
	d := Decision{ID: "d-1", Decision: "deny", Reason: "untrusted_mutation", Action: "merge", AgentID: "a-1", RiskScore: 80,
		MatchedPolicies: []string{"untrusted_mutation", "critical"}}
	a, ok := Annotate(d)
	if !ok || a.Level != "failure" || !strings.Contains(a.Message, "d-1") || !strings.Contains(a.Message, "untrusted_mutation, critical") {
		t.Errorf("annotation %+v", a)
	}
	if a, ok := Annotate(Decision{Decision: "require_approval"}); !ok || a.Level != "warning" {
		t.Errorf("pending annotation %+v", a)
	}
	if _, ok := Annotate(Decision{Decision: "allow"}); ok {
		t.Error("an allow was annotated")
	}
	c := Comment(d)
	for _, want := range []string{"untrusted_mutation, critical", "Risk score: 80", "`d-1`"} {
		if !strings.Contains(c, want) {
			t.Errorf("comment lacks %q: %s", want, c)
		}
	}
}
