package policy

import (
	"slices"
	"testing"
)

func TestTighten(t *testing.T) {
	tests := []struct {
		name, root, source, want string
	}{
		{"both signed", TrustTrustedInternalSigned, TrustTrustedInternalSigned, TrustTrustedInternalSigned},
		{"root tighter than source", TrustSemiTrustedCustomer, TrustTrustedInternalSigned, TrustSemiTrustedCustomer},
		{"source tighter than root", TrustTrustedInternalSigned, TrustUntrustedExternal, TrustUntrustedExternal},
		{"never loosens from malicious", TrustMaliciousSuspected, TrustTrustedInternalSigned, TrustMaliciousSuspected},
		{"unknown root beats trusted source", TrustUnknown, TrustTrustedInternalUnsigned, TrustUnknown},
		{"untrusted below unknown", TrustUnknown, TrustUntrustedExternal, TrustUntrustedExternal},
		{"unsigned vs signed", TrustTrustedInternalUnsigned, TrustTrustedInternalSigned, TrustTrustedInternalUnsigned},
		{"empty root: no upstream hop", "", TrustTrustedInternalSigned, TrustTrustedInternalSigned},
		{"empty source is unknown", TrustTrustedInternalSigned, "", TrustUnknown},
		{"both empty", "", "", TrustUnknown},
		{"invalid source fails closed", TrustTrustedInternalSigned, "root_of_all_trust", TrustMaliciousSuspected},
		{"invalid root fails closed", "bogus", TrustSemiTrustedCustomer, TrustMaliciousSuspected},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Tighten(tc.root, tc.source); got != tc.want {
				t.Errorf("Tighten(%q, %q) = %q, want %q", tc.root, tc.source, got, tc.want)
			}
		})
	}
}

func TestTightenIsTheLowerOfTwo(t *testing.T) {
	levels := TrustLevels()
	for i, a := range levels {
		for j, b := range levels {
			want := levels[max(i, j)]
			if got := Tighten(a, b); got != want {
				t.Errorf("Tighten(%q, %q) = %q, want %q", a, b, got, want)
			}
		}
	}
}

func TestParseTrust(t *testing.T) {
	tests := []struct {
		name, in, want string
		ok             bool
	}{
		{"empty is unknown", "", TrustUnknown, true},
		{"valid", TrustSemiTrustedCustomer, TrustSemiTrustedCustomer, true},
		{"malicious", TrustMaliciousSuspected, TrustMaliciousSuspected, true},
		{"invalid", "trusted", "", false},
		{"case matters", "Unknown", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := ParseTrust(tc.in)
			if got != tc.want || ok != tc.ok {
				t.Errorf("ParseTrust(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestTrustLevelsOrderAndCopy(t *testing.T) {
	want := []string{"trusted_internal_signed", "trusted_internal_unsigned", "semi_trusted_customer",
		"unknown", "untrusted_external", "malicious_suspected"}
	got := TrustLevels()
	if !slices.Equal(got, want) {
		t.Fatalf("TrustLevels() = %q", got)
	}
	got[0] = "changed"
	if TrustLevels()[0] != want[0] {
		t.Error("TrustLevels shares its slice")
	}
}
