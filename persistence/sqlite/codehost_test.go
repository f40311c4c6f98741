package sqlite_test

import (
	"path/filepath"
	"testing"

	"svc/persistence"
	"svc/persistence/storetest"
)

func TestCodehostContract(t *testing.T) {
	storetest.RunCodehost(t, func(t *testing.T) persistence.Store { return open(t, filepath.Join(t.TempDir(), "svc.db")) })
}
