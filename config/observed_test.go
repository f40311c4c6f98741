package config_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"svc/config"
)

// seen is a test (or harness function) that observes a setting's effect on
// what the gateway does, and a text its body holds that ties it to the
// setting (the variable's name when mark is empty; otherwise the option or
// field the setting maps to).
type seen struct{ fn, mark string }

// noEffect marks the settings README documents as having no effect here,
// with the words README says it in.
const noEffect = "README"

// observedBy names, for every setting, where a value other than its
// default is seen to change behaviour: a node or store started with it and
// checked for what only that value does (a lockout after two failures, a
// quota window of a second, a takeover within a three-second lease, ...).
// TestEverySettingTakesEffect parses the repository's tests to check that
// each function exists and holds its mark, so a setting cannot lose its
// observing test unnoticed.
var observedBy = map[string][]seen{
	"SVC_LISTEN_ADDR":                      {{"tryStartProcessOn", ""}, {"TestE2EConfig", "SVC_LISTEN_ADDR"}}, // every process test reaches the binary where the harness put it
	"SVC_DEBUG_ADDR":                       {{"TestE2EConfig", "/debug/runtime"}},
	"DATABASE_URL":                         {{"settings", ""}, {"TestE2EConfig", "tenants"}},
	"SVC_DB_READ_REPLICA_URL":              {{"TestE2EReplicaLag", ""}},
	"SVC_VALKEY_URL":                       {{"startCluster", ""}, {"TestE2ECluster", "rate limit"}},
	"SVC_CLUSTER":                          {{"TestE2ECluster", ""}},
	"SVC_ADMIN_TOKEN":                      {{"TestE2EAuth", ""}},
	"SVC_BOOTSTRAP_TENANT":                 {{"TestE2ESettingsLimits", ""}},
	"SVC_SHUTDOWN_TIMEOUT_SECS":            {{"TestE2ESettingsTimeouts", ""}},
	"SVC_DB_POOL_SIZE":                     {{"TestPoolSizeSetting", "PoolSize"}},
	"SVC_DB_MAX_CONNECTIONS":               {{"TestE2ESettingsLimits", ""}},
	"SVC_DB_IDLE_TIMEOUT_SECS":             {{"TestIdleTimeoutSetting", "IdleTimeout"}, {"TestIdleTimeoutAndMaxLifetimeSettings", "IdleTimeout"}},
	"SVC_DB_ACQUIRE_TIMEOUT_SECS":          {{"TestAcquireTimeoutSetting", "AcquireTimeout"}},
	"SVC_DB_MAX_LIFETIME_SECS":             {{"TestMaxLifetimeSetting", "MaxLifetime"}, {"TestIdleTimeoutAndMaxLifetimeSettings", "MaxLifetime"}},
	"SVC_DB_TEST_BEFORE_ACQUIRE":           {{"TestTestBeforeAcquire", "TestBeforeAcquire"}},
	"SVC_SKILL_CACHE_CAPACITY":             {{"TestSkillAndRiskCacheSettings", "SkillCacheCapacity"}},
	"SVC_MCP_SERVER_CACHE_CAPACITY":        {{"TestMCPFactsCaches", "newMCPFacts"}},
	"SVC_MCP_TOOL_CACHE_CAPACITY":          {{"TestMCPFactsCaches", "newMCPFacts"}},
	"SVC_MCP_DISCOVERY_INTERVAL_SECS":      {{"TestE2EMCPRediscovery", ""}},
	"SVC_MCP_MAX_SERVERS_PER_TENANT":       {{"TestE2EMCPServerLimit", ""}},
	"SVC_MCP_DISCOVERY_CONCURRENCY":        {{"TestE2EMCPDiscoverySlots", ""}, {"TestRediscoveryRunsConcurrentlyAndFairly", "NewSlots"}},
	"SVC_CANONICAL_HASH_CACHE_CAPACITY":    {{noEffect, "validated but without effect"}},
	"SVC_REPLAY_NONCE_CACHE_CAPACITY":      {{noEffect, "validated but without effect"}},
	"SVC_RISK_WEIGHTS_CACHE_TTL_SECS":      {{"TestSkillAndRiskCacheSettings", "RiskWeightsTTL"}},
	"SVC_RATE_LIMIT_CAPACITY":              {{"TestE2ESettingsWindows", ""}},
	"SVC_RATE_LIMIT_REFILL_RATE":           {{"TestE2ESettingsWindows", ""}},
	"SVC_QUOTA_LIMIT":                      {{"TestE2ESettingsLimits", ""}},
	"SVC_QUOTA_WINDOW_SECS":                {{"TestE2ESettingsLimits", ""}},
	"SVC_REPLAY_WINDOW_SECS":               {{"TestE2ESettingsWindows", ""}},
	"SVC_APPROVAL_TTL_SECS":                {{"TestE2EApprovalLimits", ""}},
	"SVC_APPROVAL_CALLBACK_IP_LIMIT":       {{"TestE2ESettingsLimits", ""}},
	"SVC_APPROVAL_ATTEMPT_LIMIT":           {{"TestE2ESettingsWindows", ""}},
	"SVC_APPROVAL_ATTEMPT_WINDOW_SECS":     {{"TestE2ESettingsWindows", ""}},
	"SVC_APPROVAL_MAX_WAITERS":             {{"TestE2EApprovalWaitLimits", ""}},
	"SVC_MCP_PROXY_TIMEOUT_SECS":           {{"TestE2EMCPProxyFaults", ""}},
	"SVC_MCP_PROXY_IDLE_SECS":              {{"TestE2EMCPProxyFaults", ""}},
	"SVC_MCP_PROXY_MAX_MESSAGE_BYTES":      {{"TestE2EMCPProxyFaults", ""}},
	"SVC_AUTH_FAILURE_LIMIT":               {{"TestE2ESettingsLimits", ""}},
	"SVC_AUTH_FAILURE_WINDOW_SECS":         {{"TestE2ESettingsLimits", ""}},
	"SVC_MAX_BODY_LIMIT_BYTES":             {{"TestE2EBadInput", ""}},
	"SVC_REQUEST_TIMEOUT_SECS":             {{"TestRequestTimeoutAnswers504", "RequestTimeout"}},
	"SVC_MAX_CONCURRENT_REQUESTS":          {{"TestE2ELoadShedding", ""}},
	"SVC_MAX_CONCURRENT_PER_TENANT":        {{"TestE2EStreamCap", ""}},
	"SVC_HEADER_READ_TIMEOUT_SECS":         {{"TestE2ESettingsTimeouts", ""}},
	"SVC_BODY_READ_TIMEOUT_SECS":           {{"TestE2ESettingsTimeouts", ""}},
	"SVC_AUDIT_BATCH_SIZE":                 {{"TestGroupWriterBuffersAuditBySizeAndTimer", "AuditBatchSize"}},
	"SVC_AUDIT_BATCH_FLUSH_MS":             {{"TestGroupWriterFlushTimerHolds", "AuditBatchFlush"}},
	"SVC_EARLY_ANSWER":                     {{"TestE2EEarlyAnswerSetting", ""}},
	"SVC_EARLY_COMMIT_WAIT_MS":             {{"TestGroupWriterEarlyWritesShareTransactions", "EarlyCommitWait"}},
	"SVC_LEADER_ELECTION_INTERVAL_SECS":    {{"TestE2ELeaderTakeover", ""}},
	"SVC_LEADER_LEASE_SECS":                {{"TestE2ELeaderTakeover", ""}},
	"SVC_RECEIPT_INTEGRITY_INTERVAL_SECS":  {{"TestE2EMaintenanceJobs", ""}},
	"SVC_AUDIT_ARCHIVAL_INTERVAL_SECS":     {{"TestE2EMaintenanceJobs", ""}},
	"SVC_AUDIT_RETENTION_DAYS":             {{"TestAuditArchival", "SVC_AUDIT_RETENTION_DAYS"}},
	"SVC_APPROVAL_CLEANUP_INTERVAL_SECS":   {{"TestApprovalCleaner", "NewApprovalCleaner"}},
	"SVC_APPROVAL_RETENTION_DAYS":          {{"TestApprovalCleaner", ""}},
	"SVC_VACUUM_INTERVAL_SECS":             {{"TestE2EMaintenanceJobs", ""}},
	"SVC_CHECKPOINT_INTERVAL_SECS":         {{"TestE2EReceiptLog", ""}},
	"SVC_LOG_ORIGIN":                       {{"TestE2EReceiptLog", ""}},
	"SVC_POOL_HEALTH_SAMPLE_INTERVAL_SECS": {{"TestPoolSamplerInterval", "NewPoolSampler"}},
	"SVC_HEARTBEAT_FLUSH_INTERVAL_SECS":    {{"TestHeartbeatBufferFlushesLatestAndOnStop", "NewHeartbeatBuffer"}},
	"SVC_WEBHOOK_URL":                      {{"TestE2EChatNotifications", ""}},
	"SVC_WEBHOOK_SECRET":                   {{"TestE2EChatNotifications", ""}},
	"SVC_WEBHOOK_FAILURE_THRESHOLD":        {{"TestE2EChatNotifications", ""}},
	"SVC_WEBHOOK_COOLDOWN_SECS":            {{"TestE2EChatNotifications", ""}},
	"SVC_TLS_CERT":                         {{"TestE2ETLS", ""}},
	"SVC_TLS_KEY":                          {{"TestE2ETLS", ""}},
	"SVC_CHAT_SIGNING_SECRET":              {{"TestE2EApprovalLimits", ""}},
	"SVC_CODEHOST_WEBHOOK_SECRET":          {{"TestE2ECodehostWebhookErrors", ""}},
	"SVC_CODEHOST_APP_TOKEN":               {{"testSecurityGate", ""}},
	"SVC_CODEHOST_API_URL":                 {{"testSecurityGate", ""}},
	"SVC_CODEHOST_TOOL_KEY":                {{"TestE2ESecurityGateToolKey", ""}},
	"SVC_ALLOW_PRIVATE_TARGETS":            {{"TestE2EChatNotifications", ""}, {"TestE2EMCPBadServers", ""}},
	"SVC_POLICY_FILE":                      {{"TestE2EAuthorize", ""}},
	"SVC_RECEIPT_SIGNING_KEY":              {{"TestE2EAuthorize", ""}},
	"SVC_EVENT_BUFFER_SIZE":                {{"TestEventBusNeverBlocks", "NewEventBus"}},
	"SVC_SOC_PIPELINE":                     {{"TestE2ESOCPipelineOff", ""}},
	"SVC_GC_PERCENT":                       {{"TestSetGCPercent", "GCPercent"}},
	"SVC_MEMORY_LIMIT_MIB":                 {{"TestMemoryLimitSetting", "MemoryLimitMiB"}},
	"SVC_LOG_LEVEL":                        {{"TestLogLevelSetting", "LogLevel"}},
	"SVC_LOG_FORMAT":                       {{"TestLogFormatSetting", "LogFormat"}},
	"SVC_NODE_ID":                          {{"TestE2ESettingsLimits", ""}},
}

// testBodies returns the source of every function declared in the
// repository's test files and in its test kit (testkit/), by name (a name
// declared in several packages gets every body, joined).
func testBodies(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") && path != root {
			return filepath.SkipDir
		}
		kit := strings.Contains(filepath.ToSlash(path), "/testkit/") && strings.HasSuffix(path, ".go")
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") && !kit {
			return nil
		}
		src, err := os.ReadFile(path) //nolint:gosec // the repository's own test files, read by a test
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Body != nil {
				out[fn.Name.Name] += string(src[fset.Position(fn.Body.Pos()).Offset:fset.Position(fn.Body.End()).Offset])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// checkObserved checks observedBy (TestEverySettingTakesEffect runs it):
// every setting has a test that sees its effect on behaviour, that test
// exists and is tied to the setting, or the documentation (README.md and
// docs/) says why the setting has none.
func checkObserved(t *testing.T) {
	bodies := testBodies(t, "..")
	readme := documentation(t)
	documented := map[string]bool{}
	for _, s := range config.Settings() {
		documented[s.Name] = true
		obs := observedBy[s.Name]
		if len(obs) == 0 {
			t.Errorf("%s: no test observes its effect; add one and name it in observedBy", s.Name)
		}
		for _, o := range obs {
			mark := o.mark
			if mark == "" {
				mark = s.Name
			}
			if o.fn == noEffect {
				i := strings.Index(string(readme), "`"+s.Name+"`")
				if i < 0 || !strings.Contains(string(readme[i:min(len(readme), i+600)]), mark) {
					t.Errorf("%s: README does not say %q of it", s.Name, mark)
				}
				continue
			}
			body, ok := bodies[o.fn]
			if !ok {
				t.Errorf("%s: observed by %s, which no test file declares", s.Name, o.fn)
				continue
			}
			if !strings.Contains(body, mark) {
				t.Errorf("%s: %s does not hold %q", s.Name, o.fn, mark)
			}
		}
	}
	for name := range observedBy {
		if !documented[name] {
			t.Errorf("observedBy names %s, which Settings does not list", name)
		}
	}
}

// documentation is README.md followed by every page of docs/, the text in
// which a setting's lack of effect is explained.
func documentation(t *testing.T) []byte {
	t.Helper()
	doc, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	pages, err := filepath.Glob("../docs/*.md")
	if err != nil || len(pages) == 0 {
		t.Fatalf("no docs/*.md pages (%v)", err)
	}
	for _, p := range pages {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		doc = append(append(doc, '\n'), raw...)
	}
	return doc
}
