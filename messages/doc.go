// Package messages is the wire contract between the layers of svc and
// between its nodes: the typed messages that http/ sends to actors and
// actors send to each other, and the security-event schema ([AseEvent]) that
// crosses nodes as JSON.
//
// # Rules
//
// Messages carry values only: no http.ResponseWriter, no contexts, no
// connections. Anything an actor needs to answer travels as a reply
// channel or the requester's PID.
//
// # Event schema
//
// AseEvent is schema version 1 (SPEC 2.2). New optional fields and new kinds
// need no version bump; consumers ignore what they do not know, and a
// missing schema_version reads as 1.
package messages
