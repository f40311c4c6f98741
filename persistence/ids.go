package persistence

import "github.com/google/uuid"

// NewRecordID is the id of a record appended in time order: a decision,
// a receipt, an audit event, an alert. It is a UUID v7 (RFC 9562, allowed
// by CONTRACT §10), so the indexes on these ids grow at one end instead of
// dirtying a random page per row. Other ids, security event ids among
// them, stay v4.
func NewRecordID() string {
	id, err := uuid.NewV7()
	if err != nil {
		// No time or entropy: a v4 id is still unique, only unordered.
		return uuid.NewString()
	}
	return id.String()
}
