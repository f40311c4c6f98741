package httpapi

import (
	"context"
	"time"

	"svc/persistence"
)

// Reads is all of the store that http/ may use: reads. Every change goes
// through the control plane (control.Plane, Deps.Control), so a handler
// that writes to the store does not compile (issue 39). The methods are
// the persistence role interfaces' read halves that the handlers call.
type Reads interface {
	AgentDecisions(ctx context.Context, tenantID, agentID string, limit int) ([]persistence.Decision, error)
	AgentRisk(ctx context.Context, tenantID string, agentIDs []string, from, split, to time.Time) ([]persistence.AgentRiskSums, error)
	AlertsBySourceEvents(ctx context.Context, tenantID string, eventIDs []string) ([]persistence.Alert, error)
	Backend() string
	ChainCheck(ctx context.Context, tenantID string) (persistence.ChainCheckState, error)
	ChainHead(ctx context.Context, tenantID string) (persistence.ChainHead, error)
	CodehostWebhookSecret(ctx context.Context, tenantID string) (string, error)
	CountPendingApprovals(ctx context.Context, tenantID string, now time.Time) (int64, error)
	DecisionStats(ctx context.Context, tenantID string, from, to time.Time) (persistence.DecisionStats, error)
	DecisionsBetween(ctx context.Context, tenantID string, from, to time.Time, limit int) ([]persistence.Decision, error)
	EventDecisions(ctx context.Context, tenantID, agentID string, eventIDs []string, from, to time.Time) ([]persistence.Decision, error)
	GetAgent(ctx context.Context, tenantID, id string) (persistence.Agent, error)
	GetApproval(ctx context.Context, tenantID, id string) (persistence.Approval, error)
	GetDecision(ctx context.Context, tenantID, id string) (persistence.Decision, error)
	GetIncident(ctx context.Context, tenantID, id string) (persistence.Incident, error)
	GetMCPServer(ctx context.Context, tenantID, key string) (persistence.MCPServer, error)
	GetPolicy(ctx context.Context, tenantID, name string) (persistence.Policy, error)
	GetReceipt(ctx context.Context, tenantID, id string) (persistence.Receipt, error)
	GetRiskSettings(ctx context.Context, tenantID string) (persistence.RiskSettings, error)
	GetSkill(ctx context.Context, tenantID, key string) (persistence.Skill, error)
	GetTenant(ctx context.Context, id string) (persistence.Tenant, error)
	GetWebhook(ctx context.Context, tenantID, id string) (persistence.WebhookSubscription, error)
	JobRuns(ctx context.Context) ([]persistence.JobRunRecord, error)
	LatestCheckpoint(ctx context.Context, tenantID string) (persistence.Checkpoint, error)
	ListWitnesses(ctx context.Context, tenantID string) ([]persistence.ReceiptWitness, error)
	LogHashes(ctx context.Context, tenantID string, indexes []int64) ([][32]byte, error)
	LogSize(ctx context.Context, tenantID string) (leaves, hashes int64, err error)
	Lease(ctx context.Context, name string) (persistence.Lease, error)
	ListAgents(ctx context.Context, tenantID string, f persistence.AgentFilter, p persistence.Page) ([]persistence.Agent, error)
	ListAlerts(ctx context.Context, tenantID string, f persistence.AlertFilter, p persistence.Page) ([]persistence.Alert, error)
	ListApprovals(ctx context.Context, tenantID, agentID string, p persistence.Page) ([]persistence.Approval, error)
	ListAudit(ctx context.Context, tenantID string, f persistence.AuditFilter, p persistence.Page) ([]persistence.AuditEvent, error)
	ListDecisions(ctx context.Context, tenantID, query string, p persistence.Page) ([]persistence.Decision, error)
	ListIncidents(ctx context.Context, tenantID string, f persistence.IncidentFilter, p persistence.Page) ([]persistence.Incident, error)
	ListMCPHistory(ctx context.Context, tenantID, serverKey string, p persistence.Page) ([]persistence.MCPManifestEntry, error)
	ListMCPServers(ctx context.Context, tenantID string) ([]persistence.MCPServer, error)
	ListMCPTools(ctx context.Context, tenantID, serverKey string) ([]persistence.MCPTool, error)
	ListOperatorTokens(ctx context.Context, tenantID string) ([]persistence.OperatorToken, error)
	ListPermissions(ctx context.Context, tenantID, agentID string) ([]persistence.Permission, error)
	ListPolicies(ctx context.Context, tenantID string) ([]persistence.Policy, error)
	ListReceipts(ctx context.Context, tenantID string, p persistence.Page) ([]persistence.Receipt, error)
	ListRules(ctx context.Context, tenantID string) ([]persistence.CustomRule, error)
	ListSkills(ctx context.Context, tenantID string) ([]persistence.Skill, error)
	ListTenants(ctx context.Context) ([]persistence.Tenant, error)
	ListWebhooks(ctx context.Context, tenantID string, p persistence.Page) ([]persistence.WebhookSubscription, error)
	LookupAgentToken(ctx context.Context, hash []byte) (persistence.Agent, error)
	LookupOperatorToken(ctx context.Context, hash []byte) (persistence.OperatorToken, error)
	Ping(ctx context.Context) error
	PolicyVersion(ctx context.Context, tenantID string) (int64, error)
	PoolStats() persistence.PoolStats
	ReceiptRange(ctx context.Context, tenantID string, fromSeq, toSeq int64, limit int) ([]persistence.Receipt, error)
	ReceiptsByID(ctx context.Context, tenantID string, ids []string) ([]persistence.Receipt, error)
	RunDecisions(ctx context.Context, tenantID, runID string, limit int) ([]persistence.Decision, error)
	SOCSummary(ctx context.Context, tenantID string) (persistence.SOCSummary, error)
	TenantStats(ctx context.Context, tenantID string) (persistence.TenantStats, error)
	UsableApproval(ctx context.Context, tenantID, agentID, actionHash string, now time.Time) (persistence.Approval, error)
}

var _ Reads = persistence.Store(nil)
