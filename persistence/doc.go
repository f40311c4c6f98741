// Package persistence is the storage contract of svc: the records the gateway
// keeps, the interfaces that read and write them, and the errors they return.
//
// # Implementations
//
// Two implementations satisfy [Store]: persistence/sqlite (modernc.org/sqlite,
// the embedded single-node default) and persistence/postgres (pgx/v5, for
// several nodes). Both share their SQL through persistence/sqlstore and pass
// the one contract suite in persistence/storetest. Shared, rebuildable state
// between nodes (counters, nonces, invalidations) lives behind
// persistence/sharedstate, in process or in Valkey.
//
// # Tenancy
//
// Every method that reads or writes a tenant's rows takes the tenant id and
// scopes its query by it; there is no way to read another tenant's row by id.
// The only lookups without a tenant are by token hash, which is how the tenant
// is learned in the first place.
//
// # Errors
//
// Methods return the sentinel errors of this package (wrapped), so callers
// test them with errors.Is: [ErrNotFound], [ErrConflict], [ErrStateConflict],
// [ErrBusy] and [ErrUnavailable].
package persistence
