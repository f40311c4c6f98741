package httpapi

import (
	"fmt"
	"strings"

	"github.com/google/uuid"

	"svc/messages"
)

type ingestReq struct {
	Source    string         `json:"source" openapi:"required,enum=codehost_webhook|modelvendor_trace"`
	EventType *string        `json:"event_type"`
	Payload   map[string]any `json:"payload" openapi:"required"`
}

type ingestView struct {
	EventID string `json:"event_id" openapi:"format=uuid"`
	Kind    string `json:"kind" openapi:"enum=external_event:codehost_webhook|external_event:modelvendor_trace"`
}

// ingestSources maps each accepted source to the system name its events
// carry as `tool` (SPEC 2.2: "source system for ingested events").
var ingestSources = map[string]string{"codehost_webhook": "codehost", "modelvendor_trace": "modelvendor"}

// ingestAction is the event's verb: the code host's event name and its
// payload's action (pull_request.opened), or the trace's own type. Only
// short identifiers are kept; nothing else of the payload reaches the event.
func ingestAction(source string, eventType *string, payload map[string]any) string {
	str := func(k string) string {
		v, _ := payload[k].(string)
		return v
	}
	verb := ""
	if eventType != nil {
		verb = *eventType
	}
	switch source {
	case "codehost_webhook":
		if a := str("action"); a != "" {
			if verb == "" {
				verb = "event"
			}
			verb += "." + a
		}
	case "modelvendor_trace":
		if verb == "" {
			verb = str("type")
		}
	}
	verb = strings.ToLower(strings.TrimSpace(verb))
	if verb == "" || len(verb) > 64 || strings.ContainsAny(verb, " \t\r\n") {
		return "received"
	}
	return verb
}

// ingestResource names the code host's repository (and pull request or
// issue number) when the payload carries them.
func ingestResource(payload map[string]any) *string {
	repo, _ := payload["repository"].(map[string]any)
	name, _ := repo["full_name"].(string)
	if name == "" || len(name) > 200 {
		return nil
	}
	for _, k := range []string{"pull_request", "issue"} {
		if obj, ok := payload[k].(map[string]any); ok {
			if n, ok := obj["number"].(float64); ok {
				name = fmt.Sprintf("%s#%d", name, int64(n))
				break
			}
		}
	}
	return &name
}

func (s *Server) registerIngest() {
	s.register(Route{Method: "POST", Path: "/ingest", Access: AccessAdmin, Tag: "soc", Body: &ingestReq{}, Resp: ingestView{}, Status: 202,
		Summary: "Ingest an external event (SPEC 4.5, 6.1): source codehost_webhook or modelvendor_trace, optional event_type, and " +
			"payload (the raw JSON object). It becomes an external_event:<source> event (agent unknown, decision allow, risk 0; tool " +
			"the source system, action the event's verb, resource the repository when named) that flows through detection and the " +
			"live feed. Only those identifiers are taken from the payload. 202 with event_id.",
		Handle: s.ingestEvent})
}

// ingestEvent serves POST /ingest.
func (s *Server) ingestEvent(c *Call) (any, error) {
	b := bodyOf[ingestReq](c)
	system, ok := ingestSources[b.Source]
	if !ok {
		return nil, invalidField("source", "codehost_webhook or modelvendor_trace")
	}
	if b.Payload == nil {
		return nil, invalidField("payload", "required (a JSON object)")
	}
	ev := messages.AseEvent{EventID: uuid.NewString(), OccurredAt: nowUTC(), TenantID: c.Principal.TenantID,
		Kind: "external_event:" + b.Source, AgentID: messages.UnknownAgent, Decision: "allow", Tool: system,
		Action: ingestAction(b.Source, b.EventType, b.Payload), Resource: ingestResource(b.Payload), RiskScore: 0,
		Reason: "ingested", MatchedPolicies: []string{}, RedactedFields: []string{}, SchemaVersion: messages.SchemaVersion}
	s.Events.Publish(ev)
	return ingestView{EventID: ev.EventID, Kind: ev.Kind}, nil
}
