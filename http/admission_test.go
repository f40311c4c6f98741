package httpapi

import (
	"fmt"
	"testing"
)

// Tenants that keep taking slots stop short of the node's last tenth once
// they hold more than an even split among the tenants at work and one
// more: however many of them fill the node (two or ten), a tenant that
// holds no slot still finds one.
func TestAdmissionKeepsSlotsForAnotherTenant(t *testing.T) {
	for _, hogs := range []int{1, 2, 10} {
		t.Run(fmt.Sprintf("%d tenants", hogs), func(t *testing.T) {
			a := newAdmission(1000, 500)
			held := 0
			// The tenants take slots in turn until every one is refused.
			for more := true; more; {
				more = false
				for h := range hogs {
					if a.enter(fmt.Sprintf("hog-%d", h)) {
						held++
						more = true
					}
				}
			}
			if held >= 1000 {
				t.Fatalf("%d tenants took all %d slots", hogs, held)
			}
			if !a.enter("newcomer") {
				t.Fatalf("%d tenants hold %d slots and a tenant holding none is refused", hogs, held)
			}
			t.Logf("%d tenants held %d of 1000 slots; the newcomer got one", hogs, held)
			// Below the reserve every tenant is served as before.
			a.leave("newcomer")
			for range 200 {
				a.leave("hog-0")
			}
			if !a.enter("hog-0") {
				t.Error("a tenant is refused while more than a tenth of the slots are free")
			}
		})
	}
	// A super-admin call (no tenant) is not held to the split, and the
	// node's total still binds everyone.
	a := newAdmission(10, 10)
	for i := range 10 {
		if !a.enter("") {
			t.Fatalf("super-admin call %d refused", i)
		}
	}
	if a.enter("") || a.enter("someone") {
		t.Error("a full node admitted another call")
	}
}

// An agent token has at most its limit of calls in flight; each that ends
// frees a place.
func TestAdmissionAgentInFlight(t *testing.T) {
	a := newAdmission(1000, 500)
	for i := range 3 {
		if !a.enterAgent("agent", 3) {
			t.Fatalf("call %d refused", i)
		}
	}
	if a.enterAgent("agent", 3) {
		t.Fatal("a fourth call in flight admitted with a limit of 3")
	}
	if !a.enterAgent("other", 3) {
		t.Fatal("another agent refused")
	}
	a.leaveAgent("agent")
	if !a.enterAgent("agent", 3) {
		t.Fatal("refused after a call ended")
	}
}
