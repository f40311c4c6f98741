package node

import (
	"runtime/debug"
	"testing"

	"github.com/hashicorp/go-hclog"

	"svc/config"
)

// SVC_GC_PERCENT becomes the collector's target, unless GOGC is set.
func TestSetGCPercent(t *testing.T) {
	orig := debug.SetGCPercent(100)
	defer debug.SetGCPercent(orig)

	t.Setenv("GOGC", "")
	setGCPercent(&config.Config{GCPercent: 250}, hclog.NewNullLogger())
	if got := debug.SetGCPercent(100); got != 250 {
		t.Fatalf("GC percent = %d with GOGC unset, want SVC_GC_PERCENT's 250", got)
	}

	t.Setenv("GOGC", "150")
	setGCPercent(&config.Config{GCPercent: 250}, hclog.NewNullLogger())
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("GC percent = %d with GOGC set, want it left alone (100)", got)
	}
}
