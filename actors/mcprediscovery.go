package actors

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/hashicorp/go-hclog"

	"svc/leader"
	"svc/mcpregistry"
	"svc/persistence"
)

// NewMCPRediscovery returns the producer of the job that re-discovers
// every http MCP server every interval, on the leader only
// (SVC_MCP_DISCOVERY_INTERVAL_SECS), so drift is found without anyone
// asking. Each run is one pass of the registry (Registry.RediscoverAll:
// as many discoveries at once as its slots allow, fair across tenants). A
// server that fails is recorded on it and logged; a store that cannot list
// the servers fails the job, which its supervisor restarts. A pass whose
// node stops leading starts no more discoveries.
func NewMCPRediscovery(registry *mcpregistry.Registry, store persistence.MCPStore, every time.Duration, isLeader func() bool,
	stats *mcpregistry.RediscoveryStats, jobs *leader.JobStats, log hclog.Logger) actor.Producer {
	return newLeaderJob(jobSpec{name: JobMCPRediscovery, every: every, isLeader: isLeader, stats: jobs, log: log,
		run: func() (string, error) {
			ctx, cancel := ioContext(time.Minute)
			servers, err := store.ListAllMCPServers(ctx, persistence.MCPTransportHTTP)
			cancel()
			if err != nil {
				return "", err
			}
			ok, failed, err := registry.RediscoverAll(servers, isLeader, log)
			if stats != nil {
				stats.Passes.Add(1)
				stats.Discovered.Add(ok)
				stats.Failed.Add(failed)
			}
			return fmt.Sprintf("%d mcp servers re-discovered, %d failed", ok, failed), err
		}})
}
