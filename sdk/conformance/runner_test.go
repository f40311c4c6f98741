package conformance_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// recorder is a reporter that keeps what the runner reports, so that the
// runner itself can be tested against drivers that are wrong on purpose.
type recorder struct {
	errors []string
}

type fatal struct{ msg string }

func (r *recorder) Helper()             {}
func (r *recorder) Logf(string, ...any) {}
func (r *recorder) Failed() bool        { return len(r.errors) > 0 }
func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}
func (r *recorder) Fatalf(format string, args ...any) {
	panic(fatal{fmt.Sprintf(format, args...)})
}

// TestRunnerCatchesFaultyDrivers runs the reference driver behind shell
// wrappers that damage its answers or its exit, and requires the runner to
// report each fault, by vector name, and to come back in time from a
// driver that hangs.
func TestRunnerCatchesFaultyDrivers(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh to write faulty drivers with")
	}
	if _, err := exec.LookPath("awk"); err != nil {
		t.Skip("no awk to write faulty drivers with")
	}
	ref := goBuild(t, "svc/sdk/conformance/refdriver", "refdriver")
	cases := driverCases(t)
	// Where the malformed lines are, and the first redaction vector that
	// expects an error.
	firstMalformed, refusedRedaction := -1, -1
	for i, c := range cases {
		if c.want == nil && firstMalformed < 0 {
			firstMalformed = i
		}
		if strings.HasPrefix(c.what, "sdk/redaction.json refused:") && refusedRedaction < 0 {
			refusedRedaction = i
		}
	}
	if firstMalformed < 0 || refusedRedaction < 0 {
		t.Fatal("the cases hold no malformed line or no refused redaction")
	}
	dir := t.TempDir()
	driver := func(name, script string) string {
		p := filepath.Join(dir, name)
		body := "#!" + sh + "\nREF='" + ref + "'\n" + script + "\n"
		if err := os.WriteFile(p, []byte(body), 0o700); err != nil { //nolint:gosec // a test driver must be executable
			t.Fatal(err)
		}
		return p
	}
	run := func(path string, timeout time.Duration) (rec *recorder, elapsed time.Duration) {
		rec = &recorder{}
		start := time.Now()
		func() {
			defer func() {
				if p := recover(); p != nil {
					f, ok := p.(fatal)
					if !ok {
						panic(p)
					}
					rec.errors = append(rec.errors, "FATAL "+f.msg)
				}
			}()
			runDriver(rec, path, dir, cases, timeout)
		}()
		return rec, time.Since(start)
	}
	mentions := func(rec *recorder, what string) bool {
		for _, e := range rec.errors {
			if strings.Contains(e, what) {
				return true
			}
		}
		return false
	}

	t.Run("the reference driver passes", func(t *testing.T) {
		rec, _ := run(driver("ok", `exec "$REF"`), time.Minute)
		if len(rec.errors) > 0 {
			t.Fatalf("errors: %q", rec.errors)
		}
	})
	t.Run("wrong answers are reported one by one, by name", func(t *testing.T) {
		// Answers 1 and 3 replaced; the malformed line answered as if it
		// were fine; a refused redaction answered with parameters.
		script := fmt.Sprintf(`"$REF" | awk 'NR==1 {print "{\"canonical\":\"wrong\"}"; next}
NR==3 {print "{\"canonical\":\"also wrong\"}"; next}
NR==%d {print "{\"ok\":true}"; next}
NR==%d {print "{\"parameters\":{}}"; next}
{print}'`, firstMalformed+1, refusedRedaction+1)
		rec, _ := run(driver("wrong", script), time.Minute)
		for _, i := range []int{0, 2, firstMalformed, refusedRedaction} {
			if !mentions(rec, cases[i].what+":") {
				t.Errorf("no report names %q; reports: %q", cases[i].what, rec.errors)
			}
		}
		if len(rec.errors) != 4 {
			t.Errorf("want 4 reports, got %d: %q", len(rec.errors), rec.errors)
		}
	})
	t.Run("a driver that stops early", func(t *testing.T) {
		rec, _ := run(driver("short", `"$REF" | head -n 5`), time.Minute)
		if !mentions(rec, "stopped answering after 5 of") {
			t.Errorf("reports: %q", rec.errors)
		}
	})
	t.Run("a driver that exits non-zero", func(t *testing.T) {
		rec, _ := run(driver("exit3", `"$REF"; exit 3`), time.Minute)
		if !mentions(rec, "exit status 3") {
			t.Errorf("reports: %q", rec.errors)
		}
	})
	t.Run("a driver that writes too much", func(t *testing.T) {
		rec, _ := run(driver("extra", `"$REF"; echo '{"extra":1}'`), time.Minute)
		if !mentions(rec, "more lines than it was given") {
			t.Errorf("reports: %q", rec.errors)
		}
	})
	t.Run("a driver that hangs is stopped at the deadline", func(t *testing.T) {
		rec, elapsed := run(driver("hang", `"$REF" | head -n 3; sleep 600`), 2*time.Second)
		if !mentions(rec, "stopped answering after 3 of") || !mentions(rec, "deadline") {
			t.Errorf("reports: %q", rec.errors)
		}
		if elapsed > 20*time.Second {
			t.Errorf("the runner came back after %s", elapsed)
		}
	})
	t.Run("a driver that hangs after its last answer", func(t *testing.T) {
		rec, elapsed := run(driver("linger", `"$REF"; sleep 600`), 2*time.Second)
		if !mentions(rec, "did not exit") {
			t.Errorf("reports: %q", rec.errors)
		}
		if elapsed > 20*time.Second {
			t.Errorf("the runner came back after %s", elapsed)
		}
	})
}
