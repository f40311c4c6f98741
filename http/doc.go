// Package httpapi is svc's HTTP front end (folder http/): httprouter routes,
// the conventions every endpoint shares, and one file per resource family.
//
// # Conventions
//
// Every route is registered once as a [Route], which carries its access
// level, request and response types and documented query parameters. The
// registration mounts it under /v1 and /v2 (with deprecation and sunset
// headers on /v1), wraps it with load shedding, the request timeout,
// authentication and roles, the JSON body checks (415, 400 invalid_json,
// 400 body_too_large, 400 naming a mistyped field), the status envelope for
// every error, and ETag/304 for GET 200, and generates its part of the
// OpenAPI document. A new endpoint gets all of this by being registered.
//
// # Layers
//
// Handlers are thin: decode, authenticate, validate, call the store or send
// a message to an actor, encode. Behaviour over time lives in actors/.
package httpapi
