package node

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"svc/config"
)

// logLines logs one Info and one Error line through the logger the binary
// builds from cfg and returns the non-empty lines written.
func logLines(t *testing.T, cfg *config.Config) []string {
	t.Helper()
	var buf bytes.Buffer
	log := NewLogger(cfg, &buf)
	log.Info("info-line", "k", "v")
	log.Error("error-line", "k", "v")
	var lines []string
	for l := range strings.SplitSeq(buf.String(), "\n") {
		if l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// SVC_LOG_LEVEL filters what is written: at error an Info line is dropped
// and an Error line kept; at info (the default) both are written.
func TestLogLevelSetting(t *testing.T) {
	for _, c := range []struct {
		level    string
		wantInfo bool
	}{{"error", false}, {"info", true}} {
		lines := strings.Join(logLines(t, &config.Config{LogLevel: c.level, LogFormat: "text"}), "\n")
		if got := strings.Contains(lines, "info-line"); got != c.wantInfo {
			t.Errorf("SVC_LOG_LEVEL %s: Info line written = %v, want %v; output:\n%s", c.level, got, c.wantInfo, lines)
		}
		if !strings.Contains(lines, "error-line") {
			t.Errorf("SVC_LOG_LEVEL %s: Error line missing; output:\n%s", c.level, lines)
		}
	}
}

// SVC_LOG_FORMAT chooses the line format: with json every line is a JSON
// object carrying the message and its fields; with text (the default) no
// line is JSON.
func TestLogFormatSetting(t *testing.T) {
	lines := logLines(t, &config.Config{LogLevel: "info", LogFormat: "json"})
	if len(lines) != 2 {
		t.Fatalf("SVC_LOG_FORMAT json: %d lines, want 2: %q", len(lines), lines)
	}
	for _, l := range lines {
		var obj map[string]any
		if err := json.Unmarshal([]byte(l), &obj); err != nil {
			t.Fatalf("SVC_LOG_FORMAT json: line is not a JSON object (%v): %s", err, l)
		}
		if obj["@message"] == nil || obj["k"] != "v" {
			t.Errorf("SVC_LOG_FORMAT json: line lacks the message or the field k=v: %s", l)
		}
	}

	lines = logLines(t, &config.Config{LogLevel: "info", LogFormat: "text"})
	if len(lines) != 2 {
		t.Fatalf("SVC_LOG_FORMAT text: %d lines, want 2: %q", len(lines), lines)
	}
	for _, l := range lines {
		var obj map[string]any
		if json.Unmarshal([]byte(l), &obj) == nil {
			t.Errorf("SVC_LOG_FORMAT text: line parses as JSON: %s", l)
		}
		if !strings.Contains(l, "k=v") {
			t.Errorf("SVC_LOG_FORMAT text: line lacks the field as k=v: %s", l)
		}
	}
}
