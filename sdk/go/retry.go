package svcsdk

import (
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ShouldRetry reports whether an answer with this HTTP status is sent again
// (same request_id, fresh nonce, inside the deadline): true for 429, 502,
// 503 and 504 only. Network errors and timeouts are retried too.
func ShouldRetry(status int) bool {
	switch status {
	case 429, 502, 503, 504:
		return true
	}
	return false
}

// RetryAfter reads a Retry-After value (delta-seconds or an HTTP date) as a
// duration from now; ok is false when it is absent or malformed.
func RetryAfter(value string, now time.Time) (time.Duration, bool) {
	v := strings.TrimSpace(value)
	if v == "" {
		return 0, false
	}
	allDigits := true
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			allDigits = false
			break
		}
	}
	if allDigits {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n > 1<<31 {
			return time.Duration(1<<31) * time.Second, true
		}
		return time.Duration(n) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d := t.Sub(now)
	if d < 0 {
		d = 0
	}
	return d, true
}

// Backoff is full jitter: a uniform delay in [0, min(maxDelay, base*2^attempt)].
func Backoff(attempt int, base, maxDelay time.Duration) time.Duration {
	if attempt < 0 {
		attempt = 0
	}
	if attempt > 30 {
		attempt = 30
	}
	hi := base << attempt
	if hi > maxDelay || hi <= 0 {
		hi = maxDelay
	}
	return time.Duration(rand.Float64() * float64(hi)) //nolint:gosec // jitter, not a secret
}
