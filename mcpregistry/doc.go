// Package mcpregistry is the MCP registry's discovery service (CONTRACT
// §8): it lists an MCP server's tools, pins or compares the manifest,
// records drift and tells the rest of the gateway about it.
//
// # Discovery
//
// [Registry] runs a discovery on the caller's goroutine: an operator's
// (through the control plane), the MCP proxy's when a server says its
// tools changed, or one of the leader's re-discovery passes
// ([Registry.RediscoverAll], run every interval by the leader job
// actors.NewMCPRediscovery). It is no actor: it keeps no state between
// calls except the node's slot budget, and every discovery is one
// transaction of the store.
//
// # Slots
//
// [Slots] bounds the discoveries over MCP in flight on the node and hands
// freed slots out fairly across tenants.
//
// # Dependencies
//
// The registry takes the narrow roles it uses: a [Fetch] that speaks MCP
// (the node builds it over mcpclient and the outbound client; this package
// makes no HTTP call), an [Events] sink for drift events and an
// [Invalidator] that drops the authorize path's caches on every node.
package mcpregistry
