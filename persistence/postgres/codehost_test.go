package postgres_test

import (
	"testing"

	"svc/persistence"
	"svc/persistence/storetest"
)

func TestCodehostContract(t *testing.T) {
	storetest.RunCodehost(t, func(t *testing.T) persistence.Store { return open(t, storetest.PostgresURL(t)) })
}
