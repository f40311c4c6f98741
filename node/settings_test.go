package node

import (
	"math"
	"runtime/debug"
	"testing"

	"github.com/hashicorp/go-hclog"

	"svc/config"
)

// SVC_MEMORY_LIMIT_MIB becomes the Go runtime's soft memory limit, unless
// GOMEMLIMIT is set; 0 (the off value) removes any limit. The limit is read
// back with debug.SetMemoryLimit(-1), which changes nothing.
func TestMemoryLimitSetting(t *testing.T) {
	origLimit := debug.SetMemoryLimit(-1)
	origGC := debug.SetGCPercent(-1)
	debug.SetGCPercent(origGC)
	t.Cleanup(func() {
		debug.SetMemoryLimit(origLimit)
		debug.SetGCPercent(origGC)
	})
	// setGCPercent also applies SVC_GC_PERCENT; a set GOGC keeps it from
	// touching the collector's percentage here.
	t.Setenv("GOGC", "100")
	log := hclog.NewNullLogger()

	t.Setenv("GOMEMLIMIT", "")
	setGCPercent(&config.Config{MemoryLimitMiB: 64}, log)
	if got := debug.SetMemoryLimit(-1); got != 64<<20 {
		t.Fatalf("memory limit = %d with GOMEMLIMIT unset, want SVC_MEMORY_LIMIT_MIB's 64 MiB (%d)", got, 64<<20)
	}
	setGCPercent(&config.Config{MemoryLimitMiB: 0}, log)
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Fatalf("memory limit = %d with SVC_MEMORY_LIMIT_MIB 0, want none (math.MaxInt64)", got)
	}

	// With GOMEMLIMIT set the runtime has applied it at start; the setting
	// leaves the current limit alone.
	const sentinel = 3 << 30
	debug.SetMemoryLimit(sentinel)
	t.Setenv("GOMEMLIMIT", "3GiB")
	setGCPercent(&config.Config{MemoryLimitMiB: 64}, log)
	if got := debug.SetMemoryLimit(-1); got != sentinel {
		t.Fatalf("memory limit = %d with GOMEMLIMIT set, want it left alone (%d)", got, int64(sentinel))
	}
	if got := debug.SetGCPercent(origGC); got != origGC {
		t.Fatalf("GC percent = %d with GOGC set, want it left alone (%d)", got, origGC)
	}
}
