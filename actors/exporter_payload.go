package actors

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"svc/messages"
	"svc/persistence"
	"svc/rules/correlate"
	"svc/rules/detect"
)

// Export types (CONTRACT §7 "Export payload").
const (
	exportTypeDecision = "decision"
	exportTypeAlert    = "alert"
	exportTypeIncident = "incident"
)

// exportSchemaVersion is the schema_version of JSON export payloads.
const exportSchemaVersion = 1

// Export is one thing sent to webhook-export subscribers (SPEC 6.5): a
// deny or require_approval decision, or a HIGH alert or incident. Like a
// Notification it carries ids and short text only: never a secret, a
// token, a raw tool parameter or an approval id.
type Export struct {
	// ID is the decision, alert or incident id.
	ID string
	// Type is exportTypeDecision, exportTypeAlert or exportTypeIncident.
	Type string
	// Kind is the decision (deny or require_approval), the alert name or
	// the incident kind.
	Kind string
	// RuleKey is the detection rule of an alert ("" otherwise); the CEF
	// signature id prefers it to Kind.
	RuleKey string
	// Severity is INFO, LOW, MEDIUM or HIGH. CONTRACT §13: a deny decision
	// counts as HIGH and a require_approval decision as INFO; alerts and
	// incidents keep their own (HIGH for every one exported).
	Severity   string
	TenantID   string
	AgentID    string
	Summary    string
	OccurredAt time.Time
}

// ExportFromEvent maps a bus event to an export: exactly the
// authorize_decision events with decision deny, quarantine or
// require_approval (the chat notifier's triggers). Everything else reports false.
func ExportFromEvent(ev *messages.AseEvent) (Export, bool) {
	if ev == nil || ev.Kind != messages.KindAuthorizeDecision {
		return Export{}, false
	}
	var sev string
	switch ev.Decision {
	case "deny", "quarantine": // a quarantine is a deny that also quarantines (CONTRACT §13)
		sev = detect.SeverityHigh
	case "require_approval":
		sev = detect.SeverityInfo
	default:
		return Export{}, false
	}
	agent := ev.AgentID
	if agent == "" {
		agent = messages.UnknownAgent
	}
	id := ev.EventID
	if ev.Evidence != nil && ev.Evidence.DecisionID != nil && *ev.Evidence.DecisionID != "" {
		id = *ev.Evidence.DecisionID
	}
	return Export{ID: id, Type: exportTypeDecision, Kind: ev.Decision, Severity: sev, TenantID: ev.TenantID, AgentID: agent,
		Summary:    fmt.Sprintf("%s: %s.%s by agent %s (reason %s, risk %d)", ev.Decision, ev.Tool, ev.Action, agent, ev.Reason, ev.RiskScore),
		OccurredAt: ev.OccurredAt}, true
}

// ExportFromNotification maps a Notification of the SOC pipeline (a HIGH
// alert or incident) to an export, by the record it names (RecordType,
// RecordID, RuleKey). Without them the type follows the kind (the four SPEC
// 6.3 incident kinds, else alert) and the id is a fresh UUID.
func ExportFromNotification(n messages.Notification) Export {
	e := Export{Kind: n.Kind, Severity: strings.ToUpper(strings.TrimSpace(n.Severity)), TenantID: n.TenantID, AgentID: n.AgentID,
		Summary: n.Summary, OccurredAt: n.At, Type: n.RecordType, ID: n.RecordID, RuleKey: n.RuleKey}
	if e.AgentID == "" {
		e.AgentID = messages.UnknownAgent
	}
	if e.Type != exportTypeAlert && e.Type != exportTypeIncident {
		e.Type = ""
	}
	if _, err := uuid.Parse(e.ID); err != nil {
		e.ID = uuid.NewString()
	}
	if e.Type == "" {
		e.Type = exportTypeAlert
		switch n.Kind {
		case correlate.KindDenyStorm, correlate.KindRunaway, correlate.KindRepeatedApproval, correlate.KindTrustEscalation:
			e.Type = exportTypeIncident
		}
	}
	return e
}

// ExportAdmitted reports whether a subscription with minSeverity receives
// an export of severity: info admits everything, high only HIGH.
func ExportAdmitted(minSeverity, severity string) bool {
	switch minSeverity {
	case persistence.WebhookSeverityInfo:
		return true
	case persistence.WebhookSeverityHigh:
		return severity == detect.SeverityHigh
	default:
		return false
	}
}

// CEFSeverity maps a severity to CEF's 0 to 10: INFO 1 (so a
// require_approval decision), LOW 3, MEDIUM 5, HIGH 8 (so a deny
// decision); anything else 5.
func CEFSeverity(severity string) int {
	switch strings.ToUpper(severity) {
	case detect.SeverityInfo:
		return 1
	case detect.SeverityLow:
		return 3
	case detect.SeverityHigh:
		return 8
	default:
		return 5
	}
}

// exportJSON is the json format's body (CONTRACT §7).
type exportJSON struct {
	ID            string    `json:"id"`
	Type          string    `json:"type"`
	Kind          string    `json:"kind"`
	Severity      string    `json:"severity"`
	TenantID      string    `json:"tenant_id"`
	AgentID       string    `json:"agent_id"`
	Summary       string    `json:"summary"`
	OccurredAt    time.Time `json:"occurred_at"`
	SchemaVersion int       `json:"schema_version"`
}

// Content types of the two formats.
const (
	exportJSONType = "application/json"
	exportCEFType  = "text/plain; charset=utf-8"
)

// RenderExport encodes e in format (json or cef) and returns the body and
// its Content-Type. version is the CEF header's device version. A zero
// OccurredAt is rendered as now.
func RenderExport(e Export, format, version string, now time.Time) ([]byte, string, error) {
	at := e.OccurredAt
	if at.IsZero() {
		at = now
	}
	at = at.UTC()
	switch format {
	case persistence.WebhookFormatJSON:
		body, err := json.Marshal(exportJSON{ID: e.ID, Type: e.Type, Kind: e.Kind, Severity: e.Severity, TenantID: e.TenantID,
			AgentID: e.AgentID, Summary: e.Summary, OccurredAt: at, SchemaVersion: exportSchemaVersion})
		return body, exportJSONType, err
	case persistence.WebhookFormatCEF:
		return []byte(CEFLine(e, version, at)), exportCEFType, nil
	default:
		return nil, "", fmt.Errorf("actors: unknown export format %q", format)
	}
}

// CEFLine renders e as one CEF line:
//
//	CEF:0|svc|gateway|<version>|<rule key or kind>|<summary>|<0-10>|rt=<ms> suser=<agent> cs1Label=tenant cs1=<tenant> externalId=<id> cat=<type>
//
// Header fields escape backslash and pipe, and fold line breaks into
// spaces (a header cannot span lines); extension values escape backslash,
// equals sign and line breaks (\n, \r).
func CEFLine(e Export, version string, at time.Time) string {
	sig := e.RuleKey
	if sig == "" {
		sig = e.Kind
	}
	var b strings.Builder
	b.WriteString("CEF:0|svc|gateway|")
	for _, f := range []string{version, sig, e.Summary} {
		b.WriteString(cefHeader(f))
		b.WriteByte('|')
	}
	b.WriteString(strconv.Itoa(CEFSeverity(e.Severity)))
	b.WriteByte('|')
	ext := [][2]string{{"rt", strconv.FormatInt(at.UnixMilli(), 10)}, {"suser", e.AgentID}, {"cs1Label", "tenant"},
		{"cs1", e.TenantID}, {"externalId", e.ID}, {"cat", e.Type}}
	for i, kv := range ext {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(kv[0])
		b.WriteByte('=')
		b.WriteString(cefExtension(kv[1]))
	}
	return b.String()
}

var (
	cefHeaderEscaper    = strings.NewReplacer(`\`, `\\`, `|`, `\|`, "\r\n", " ", "\n", " ", "\r", " ")
	cefExtensionEscaper = strings.NewReplacer(`\`, `\\`, `=`, `\=`, "\r\n", `\n`, "\n", `\n`, "\r", `\r`)
)

func cefHeader(s string) string    { return cefHeaderEscaper.Replace(s) }
func cefExtension(s string) string { return cefExtensionEscaper.Replace(s) }
