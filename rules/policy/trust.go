package policy

// Trust levels (CONTRACT §13), most to least trusted.
const (
	TrustTrustedInternalSigned   = "trusted_internal_signed"
	TrustTrustedInternalUnsigned = "trusted_internal_unsigned"
	TrustSemiTrustedCustomer     = "semi_trusted_customer"
	TrustUnknown                 = "unknown"
	TrustUntrustedExternal       = "untrusted_external"
	TrustMaliciousSuspected      = "malicious_suspected"
)

// TrustLevels returns the trust levels ordered from most to least trusted.
// The slice is new on every call; the caller may keep or change it.
func TrustLevels() []string {
	return []string{
		TrustTrustedInternalSigned,
		TrustTrustedInternalUnsigned,
		TrustSemiTrustedCustomer,
		TrustUnknown,
		TrustUntrustedExternal,
		TrustMaliciousSuspected,
	}
}

// trustRank is the position of a level in TrustLevels (0 = most trusted),
// or -1 for a value that is no level.
func trustRank(s string) int {
	switch s {
	case TrustTrustedInternalSigned:
		return 0
	case TrustTrustedInternalUnsigned:
		return 1
	case TrustSemiTrustedCustomer:
		return 2
	case TrustUnknown:
		return 3
	case TrustUntrustedExternal:
		return 4
	case TrustMaliciousSuspected:
		return 5
	default:
		return -1
	}
}

// ParseTrust validates a trust level. The empty string is "unknown" (a
// missing source_trust, CONTRACT §13); any other value that is no level
// returns ok false.
func ParseTrust(s string) (level string, ok bool) {
	if s == "" {
		return TrustUnknown, true
	}
	if trustRank(s) < 0 {
		return "", false
	}
	return s, true
}

// Tighten combines the chain's root trust with the hop's source trust and
// returns the less trusted of the two (tighten-only: a downstream hop is
// never more trusted than its root, SPEC 4.2 rule 8).
//
// An empty root means there is no upstream hop and leaves source as it is;
// an empty source is "unknown". A value that is no trust level ranks below
// every level, so Tighten answers malicious_suspected for it (fail closed);
// validate with ParseTrust first to reject such values instead. The result is
// always one of TrustLevels.
func Tighten(root, source string) string {
	level := trustRankOrWorst(source)
	if root != "" {
		level = max(level, trustRankOrWorst(root))
	}
	return trustAt(level)
}

// trustAt is the inverse of trustRank for ranks 0 to 5.
func trustAt(rank int) string {
	switch rank {
	case 0:
		return TrustTrustedInternalSigned
	case 1:
		return TrustTrustedInternalUnsigned
	case 2:
		return TrustSemiTrustedCustomer
	case 3:
		return TrustUnknown
	case 4:
		return TrustUntrustedExternal
	default:
		return TrustMaliciousSuspected
	}
}

func trustRankOrWorst(s string) int {
	if s == "" {
		return trustRank(TrustUnknown)
	}
	if r := trustRank(s); r >= 0 {
		return r
	}
	return trustRank(TrustMaliciousSuspected)
}
