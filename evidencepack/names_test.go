package evidencepack_test

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"svc/evidencepack"
	"svc/evidencepack/packtest"
	"svc/receipt"
)

// member is one file of a crafted pack.
type member struct{ Name, Content string }

// craft writes a pack by hand (packtest.Craft).
func craft(t *testing.T, kind string, s *receipt.Signer, members ...member) []byte {
	t.Helper()
	ms := make([]packtest.Member, len(members))
	for i, m := range members {
		ms[i] = packtest.Member(m)
	}
	return packtest.Craft(t, kind, s, ms...)
}

func kindFiles(t *testing.T, kind string) []member {
	t.Helper()
	names, ok := evidencepack.RequiredFiles(kind)
	if !ok {
		t.Fatalf("kind %s unknown", kind)
	}
	var ms []member
	for _, n := range names {
		ms = append(ms, member{n, "[]\n"})
	}
	return ms
}

func problems(rep evidencepack.Report) string { return strings.Join(rep.Problems, "\n") }

// Issue 35 item 6: an unsigned pack whose members climb out of the
// directory it is unpacked into, and which holds none of its kind's files,
// was VALID.
func TestVerifyRefusesTheIssuesPack(t *testing.T) {
	hostile := []member{{"../../x", "x"}, {"/abs", "x"}, {`..\..\x`, "x"}, {"a/../../b", "x"}}
	for _, s := range []*receipt.Signer{nil, signer(t, 1)} {
		rep := verify(t, craft(t, evidencepack.KindIncident, s, hostile...), nil)
		if rep.Valid() {
			t.Fatalf("signed %v: valid", s != nil)
		}
		for _, f := range hostile {
			if !strings.Contains(problems(rep), f.Name+": unsafe file name") && !strings.Contains(problems(rep), `"`+strings.ReplaceAll(f.Name, `\`, `\\`)+`": unsafe file name`) {
				t.Errorf("signed %v: no problem names %s as unsafe:\n%s", s != nil, f.Name, problems(rep))
			}
		}
		for _, name := range []string{"incident.json", "alerts.json", "narrative.md"} {
			if !strings.Contains(problems(rep), name+": missing (a pack of kind incident holds it") {
				t.Errorf("signed %v: %s not reported missing:\n%s", s != nil, name, problems(rep))
			}
		}
	}
}

// Every name that could leave the directory a pack is unpacked into, on
// any system, is refused, even listed with its true hash beside every file
// the kind requires; ordinary names are not.
func TestVerifyRefusesUnsafeNames(t *testing.T) {
	for _, name := range []string{
		"", "a\x00b", "a\nVALID", "\xff.json",
		"/etc/passwd", `\abs`, "../x", "..", "a/..", "./x", "a/./b", `a\.\b`, "a//b", "a/", `a\`,
		`..\..\x`, `a\..\..\b`, "a/../../b", "...", ". .", "a/.. /b", "a/... /b",
		`C:\x`, "C:x", "x.json:stream", `\\server\share\x`,
	} {
		t.Run(strings.ReplaceAll(name, "/", "|"), func(t *testing.T) {
			content := "x"
			if strings.HasSuffix(name, "/") {
				content = ""
			}
			raw := craft(t, evidencepack.KindIncident, nil, append(kindFiles(t, evidencepack.KindIncident), member{name, content})...)
			rep := verify(t, raw, nil)
			if rep.Valid() || !strings.Contains(problems(rep), ": unsafe file name (") {
				t.Errorf("%q: problems %q, want it refused as unsafe", name, rep.Problems)
			}
			for _, p := range rep.Problems {
				if strings.ContainsAny(p, "\n\x00") {
					t.Errorf("a problem prints the name raw: %q", p)
				}
			}
			if err := evidencepack.CheckName(name); !errors.Is(err, evidencepack.ErrUnsafeName) {
				t.Errorf("CheckName(%q) = %v", name, err)
			}
		})
	}
	for _, name := range []string{"extra.json", "dir/x.json", "a..b", ".hidden", "notes 1.md", "é.json"} {
		raw := craft(t, evidencepack.KindIncident, nil, append(kindFiles(t, evidencepack.KindIncident), member{name, "x"})...)
		if rep := verify(t, raw, nil); !rep.Valid() {
			t.Errorf("%q: problems %q, want valid", name, rep.Problems)
		}
		if err := evidencepack.CheckName(name); err != nil {
			t.Errorf("CheckName(%q) = %v", name, err)
		}
	}
}

// A pack lacking any one of its kind's files is invalid, signed or not;
// a kind Verify does not know is invalid.
func TestVerifyRequiresTheKindsFiles(t *testing.T) {
	s := signer(t, 1)
	for _, kind := range []string{evidencepack.KindIncident, evidencepack.KindCompliance} {
		all := kindFiles(t, kind)
		for _, sg := range []*receipt.Signer{nil, s} {
			if rep := verify(t, craft(t, kind, sg, all...), nil); !rep.Valid() || rep.Signed != (sg != nil) {
				t.Errorf("%s, signed %v, every file: %+v", kind, sg != nil, rep)
			}
			for i, f := range all {
				without := slices.Delete(slices.Clone(all), i, i+1)
				rep := verify(t, craft(t, kind, sg, without...), nil)
				want := f.Name + ": missing (a pack of kind " + kind + " holds it"
				if rep.Valid() || !strings.Contains(problems(rep), want) {
					t.Errorf("%s, signed %v, without %s: problems %q", kind, sg != nil, f.Name, rep.Problems)
				}
			}
		}
	}
	for _, kind := range []string{"", "other", "Incident"} {
		rep := verify(t, craft(t, kind, nil, kindFiles(t, evidencepack.KindIncident)...), nil)
		if rep.Valid() || !strings.Contains(problems(rep), "unknown kind") {
			t.Errorf("kind %q: problems %q", kind, rep.Problems)
		}
	}
}

// Two names that differ only in case are one file on macOS and Windows.
func TestVerifyRefusesNamesEqualButForCase(t *testing.T) {
	raw := craft(t, evidencepack.KindIncident, nil, append(kindFiles(t, evidencepack.KindIncident), member{"Incident.JSON", "x"})...)
	if rep := verify(t, raw, nil); rep.Valid() || !strings.Contains(problems(rep), "differs only in case") {
		t.Errorf("problems %q", rep.Problems)
	}
}

// The writer refuses what the verifier refuses: an unsafe name, an
// unknown kind, a pack closed without its kind's files.
func TestWriterRefusesWhatVerifyRefuses(t *testing.T) {
	now := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	p := evidencepack.NewWriter(io.Discard, evidencepack.KindIncident, "t1", nil, now)
	for _, name := range []string{"../x", `..\x`, "/abs", "", "a\x00"} {
		if _, err := p.Create(name); !errors.Is(err, evidencepack.ErrUnsafeName) {
			t.Errorf("Create(%q) = %v, want ErrUnsafeName", name, err)
		}
	}
	if err := p.WriteJSON("incident.json", 1); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err == nil || !strings.Contains(err.Error(), "alerts.json") {
		t.Errorf("Close without alerts.json: %v", err)
	}
	if _, err := evidencepack.NewWriter(io.Discard, "other", "t1", nil, now).Create("x.json"); err == nil {
		t.Error("a pack of an unknown kind was started")
	}
	// A compliance pack with its files closes and verifies.
	var buf bytes.Buffer
	p = evidencepack.NewWriter(&buf, evidencepack.KindCompliance, "t1", signer(t, 1), now)
	for _, f := range kindFiles(t, evidencepack.KindCompliance) {
		w, err := p.Create(f.Name)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(w, f.Content)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if rep := verify(t, buf.Bytes(), nil); !rep.Valid() || !rep.Signed || rep.Kind != evidencepack.KindCompliance {
		t.Errorf("compliance pack: %+v", rep)
	}
}
