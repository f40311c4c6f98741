package runstate

// Levels: a trust level's rank plus one, so that 0 means "none seen". Rank
// 0 is trusted_internal_signed and rank 5 malicious_suspected, in the order
// of policy.TrustLevels.
var levelNames = [...]string{"", "trusted_internal_signed", "trusted_internal_unsigned",
	"semi_trusted_customer", "unknown", "untrusted_external", "malicious_suspected"}

const (
	// LevelUntrusted is untrusted_external's level: a run that has seen it
	// (or worse) is tainted.
	LevelUntrusted = 5
	// LevelMalicious is malicious_suspected's level.
	LevelMalicious = 6
)

// Level returns a trust level's level (its rank plus one), 0 for a value
// that is no trust level.
func Level(trust string) int {
	for i := 1; i < len(levelNames); i++ {
		if levelNames[i] == trust {
			return i
		}
	}
	return 0
}

// LevelName is the inverse of [Level]; "" for 0 or a value out of range.
func LevelName(level int) string {
	if level <= 0 || level >= len(levelNames) {
		return ""
	}
	return levelNames[level]
}
