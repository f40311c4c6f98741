package evidencepack

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The kinds of pack (the manifest's kind) that the gateway writes
// (packcontents).
const (
	KindIncident   = "incident"
	KindCompliance = "compliance"
)

// RequiredFiles returns the files a pack of kind holds, in the order the
// gateway writes them, and false for a kind this package does not know. A
// pack is valid only with all of them (an empty list or range is still a
// file: "[]", or no line); a pack without them proves nothing about the
// incident or the tenant, however well its hashes match.
func RequiredFiles(kind string) ([]string, bool) {
	switch kind {
	case KindIncident:
		return []string{"incident.json", "alerts.json", "decisions.json", "receipts.jsonl", "audit_events.json",
			"approvals.json", "narrative.md"}, true
	case KindCompliance:
		return []string{"tenant.json", "policies.json", "skills.json", "agents.json", "decision_stats.json",
			"receipts.jsonl", "receipts_verification.json", "audit_events.jsonl", "approvals.json", "incidents.json"}, true
	}
	return nil, false
}

// ErrUnsafeName is returned by CheckName (and Writer.Create) for a name no
// pack member may have.
var ErrUnsafeName = errors.New("evidencepack: unsafe file name")

// CheckName returns nil when name may name a pack member: a relative path
// of segments separated by '/' that stays inside the directory a pack is
// unpacked into, whatever the system. It refuses a name that is empty, not
// UTF-8 or holds a control character (NUL among them); that is absolute
// ('/' or '\' first) or names a drive or a stream (':'); or that has a
// segment, with '\' taken as a separator too (as Windows reads it), that
// is empty or only dots and spaces ("..", ".", "..." and ". ." among them,
// which Windows reads as "." or "..").
func CheckName(name string) error {
	if why := unsafeName(name); why != "" {
		return fmt.Errorf("%w %s: %s", ErrUnsafeName, strconv.Quote(name), why)
	}
	return nil
}

// unsafeName is CheckName's reason, or "".
func unsafeName(name string) string {
	switch {
	case name == "":
		return "empty"
	case !utf8.ValidString(name):
		return "not UTF-8"
	case strings.ContainsFunc(name, unicode.IsControl):
		return "a control character"
	case name[0] == '/' || name[0] == '\\':
		return "an absolute path"
	case strings.ContainsRune(name, ':'):
		return "a drive or stream name (':')"
	}
	for _, seg := range strings.Split(strings.ReplaceAll(name, `\`, "/"), "/") {
		switch {
		case seg == "":
			return "an empty path segment"
		case strings.Trim(seg, ". ") == "":
			return fmt.Sprintf("a %q path segment", seg)
		}
	}
	return ""
}

// label is name as a problem shows it: quoted unless it is a safe name
// (which has no control character to forge a line of the report).
func label(name string) string {
	if unsafeName(name) == "" {
		return name
	}
	return strconv.Quote(name)
}
