package config

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// validator collects the problems of step 2.
type validator struct {
	env  environment
	errs []error
	bad  map[string]bool // variables that already have a problem
}

func (v *validator) fail(name, format string, args ...any) {
	v.errs = append(v.errs, &SettingError{Name: name, Problem: fmt.Sprintf(format, args...)})
	v.bad[name] = true
}

// lookup returns the operator's text for name, if set.
func (v *validator) lookup(name string) (string, bool) {
	if _, ok := v.env.settings[name]; !ok {
		panic("config: internal error: " + name + " is read but not listed in Settings()")
	}
	s, ok := v.env.values[name]
	return s, ok
}

// text returns the operator's text for name or, when unset, its documented
// default ("" when that is unset). fromEnv tells which.
func (v *validator) text(name string) (s string, fromEnv bool) {
	if s, ok := v.lookup(name); ok {
		return s, true
	}
	if d := v.env.settings[name].Default; d != unset {
		return d, false
	}
	return "", false
}

// refuse records problem for the operator's value of name. A documented
// default that does not pass its own check is a bug in this package.
func (v *validator) refuse(name string, fromEnv bool, problem string) {
	if !fromEnv {
		panic(fmt.Sprintf("config: internal error: documented default of %s: %s", name, problem))
	}
	v.fail(name, "%s", problem)
}

// integer returns name as a whole number (at least least) that fits in bits.
func (v *validator) integer(name string, least int64, bits int) int64 {
	s, fromEnv := v.text(name)
	n, problem := parseInteger(s, least, bits)
	if problem != "" {
		v.refuse(name, fromEnv, problem)
		return 0
	}
	return n
}

// count is integer sized for an int.
func (v *validator) count(name string, least int64) int {
	return int(v.integer(name, least, strconv.IntSize))
}

// optionalCount is count for a setting whose default Load computes; set is
// false when the variable is unset or invalid.
func (v *validator) optionalCount(name string, least int64) (n int, set bool) {
	s, ok := v.lookup(name)
	if !ok {
		return 0, false
	}
	i, problem := parseInteger(s, least, strconv.IntSize)
	if problem != "" {
		v.fail(name, "%s", problem)
		return 0, false
	}
	return int(i), true
}

// duration returns name as a whole number of units (at least least).
func (v *validator) duration(name string, unit time.Duration, least int64) time.Duration {
	n := v.integer(name, least, 64)
	if n > math.MaxInt64/int64(unit) {
		s, _ := v.text(name)
		v.fail(name, "%q is too large", s)
		return 0
	}
	return time.Duration(n) * unit
}

// seconds is duration in whole seconds.
func (v *validator) seconds(name string, least int64) time.Duration {
	return v.duration(name, time.Second, least)
}

// positiveFloat returns name as a finite number greater than zero.
func (v *validator) positiveFloat(name string) float64 {
	s, fromEnv := v.text(name)
	f, err := strconv.ParseFloat(s, 64)
	switch {
	case err != nil:
		v.refuse(name, fromEnv, fmt.Sprintf("%q is not a number", s))
	case math.IsNaN(f) || math.IsInf(f, 0):
		v.refuse(name, fromEnv, fmt.Sprintf("%q is not a finite number", s))
	case f <= 0:
		v.refuse(name, fromEnv, fmt.Sprintf("%q must be greater than 0", s))
	default:
		return f
	}
	return 0
}

func (v *validator) boolean(name string) bool {
	s, fromEnv := v.text(name)
	b, ok := parseBool(s)
	if !ok {
		v.refuse(name, fromEnv, boolProblem(s))
	}
	return b
}

// optionalBoolean is boolean for a setting whose default Load computes.
func (v *validator) optionalBoolean(name string) (b, set bool) {
	s, ok := v.lookup(name)
	if !ok {
		return false, false
	}
	b, ok = parseBool(s)
	if !ok {
		v.fail(name, "%s", boolProblem(s))
		return false, false
	}
	return b, true
}

// choice returns name in lower case, which must be one of options.
func (v *validator) choice(name string, options ...string) string {
	s, fromEnv := v.text(name)
	lower := strings.ToLower(s)
	for _, o := range options {
		if lower == o {
			return lower
		}
	}
	v.refuse(name, fromEnv, fmt.Sprintf("%q is not one of %s", s, strings.Join(options, ", ")))
	return ""
}

// address returns name as host:port with a numeric port; when loopbackOnly,
// the host must be a loopback address or "localhost".
func (v *validator) address(name string, loopbackOnly bool) string {
	s, fromEnv := v.text(name)
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		v.refuse(name, fromEnv, fmt.Sprintf("%q is not host:port", s))
		return s
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		v.refuse(name, fromEnv, fmt.Sprintf("%q has no valid port number (0 to 65535)", s))
		return s
	}
	if loopbackOnly && !isLoopback(host) {
		v.refuse(name, fromEnv, fmt.Sprintf("%q is not a loopback address (127.0.0.0/8, ::1 or localhost)", s))
	}
	return s
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

// database reads DATABASE_URL and derives DBBackend and SQLitePath. The
// value is not echoed: it may carry a password.
func (v *validator) database(c *Config) {
	const name = "DATABASE_URL"
	s, fromEnv := v.text(name)
	c.DatabaseURL = s
	scheme, rest, ok := splitScheme(s)
	if !ok {
		v.refuse(name, fromEnv, "is not a URL; use sqlite://PATH, postgres://... or postgresql://...")
		return
	}
	switch strings.ToLower(scheme) {
	case "sqlite":
		if rest == "" {
			v.refuse(name, fromEnv, "sqlite:// needs a path, e.g. sqlite://./svc.db or sqlite://:memory:")
			return
		}
		c.DBBackend, c.SQLitePath = BackendSQLite, rest
	case "postgres", "postgresql":
		// The rest is pgx's to parse (it accepts forms net/url refuses, such as
		// several hosts); a bad one fails when the pool is constructed.
		c.DBBackend = BackendPostgres
	default:
		v.refuse(name, fromEnv, fmt.Sprintf("unknown scheme %q; use sqlite, postgres or postgresql", scheme))
	}
}

// urlSetting returns name, when set, as a URL with one of schemes (and a
// host when needHost). The value is not echoed: it may carry credentials.
func (v *validator) urlSetting(name string, needHost bool, schemes ...string) string {
	s, fromEnv := v.text(name)
	if s == "" {
		return ""
	}
	want := strings.Join(schemes, ", ")
	scheme, _, ok := splitScheme(s)
	if !ok {
		v.refuse(name, fromEnv, "is not a URL with a scheme ("+want+")")
		return s
	}
	known := false
	for _, k := range schemes {
		known = known || strings.EqualFold(scheme, k)
	}
	if !known {
		v.refuse(name, fromEnv, fmt.Sprintf("unknown scheme %q; use %s", scheme, want))
		return s
	}
	if needHost {
		u, err := url.Parse(s)
		if err != nil || u.Host == "" {
			v.refuse(name, fromEnv, "is not a valid URL with a host")
		}
	}
	return s
}

// splitScheme splits "scheme://rest"; ok is false when s does not start with
// a syntactically valid scheme followed by "://".
func splitScheme(s string) (scheme, rest string, ok bool) {
	scheme, rest, found := strings.Cut(s, "://")
	if !found || scheme == "" {
		return "", "", false
	}
	for i, r := range scheme {
		letter := 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z'
		other := '0' <= r && r <= '9' || r == '+' || r == '-' || r == '.'
		if !letter && (i == 0 || !other) {
			return "", "", false
		}
	}
	return scheme, rest, true
}

// noteName returns name as the prefix of a signed note key's name (C2SP
// signed-note): not empty, no space, no plus sign, nothing unprintable.
func (v *validator) noteName(name string) string {
	s, fromEnv := v.text(name)
	if s == "" || strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r == '+' || r == 0x7f || !unicode.IsPrint(r) }) {
		v.refuse(name, fromEnv, "must be a note key name: not empty, without spaces, plus signs or control characters")
	}
	return s
}

// receiptKey returns name and its decoded Ed25519 seed, when set. The value
// is not echoed: it is a private key.
func (v *validator) receiptKey(name string) (string, []byte) {
	s, ok := v.lookup(name)
	if !ok {
		return "", nil
	}
	seed, err := base64.StdEncoding.Strict().DecodeString(s)
	switch {
	case err != nil:
		v.fail(name, "is not standard base64 (value not shown)")
		return s, nil
	case len(seed) != ed25519.SeedSize:
		v.fail(name, "decodes to %d bytes; want a %d-byte Ed25519 seed", len(seed), ed25519.SeedSize)
		return s, nil
	}
	return s, seed
}

// nodeID returns name or, when unset, hostname-pid.
func (v *validator) nodeID(name string) string {
	if s, ok := v.lookup(name); ok {
		return s
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	return host + "-" + strconv.Itoa(os.Getpid())
}

// parseInteger parses a base-10 whole number, at least least, that fits in
// bits; problem is empty on success.
func parseInteger(s string, least int64, bits int) (n int64, problem string) {
	n, err := strconv.ParseInt(s, 10, bits)
	switch {
	case errors.Is(err, strconv.ErrRange):
		return 0, fmt.Sprintf("%q is out of range", s)
	case err != nil:
		return 0, fmt.Sprintf("%q is not a whole number", s)
	case n < least:
		return 0, fmt.Sprintf("%q must be at least %d", s, least)
	}
	return n, ""
}

// parseBool accepts true, false, 1, 0, yes and no in any case.
func parseBool(s string) (b, ok bool) {
	switch strings.ToLower(s) {
	case "true", "1", "yes":
		return true, true
	case "false", "0", "no":
		return false, true
	}
	return false, false
}

func boolProblem(s string) string {
	return fmt.Sprintf("%q is not a boolean (use true, false, 1, 0, yes or no)", s)
}
