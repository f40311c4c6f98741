package gateway

import (
	"strings"
	"testing"

	"svc/cmd/svc/cli"
)

// RunCLI runs the svc command line in this process (cli.Run), as the
// binary would, for the commands that read no environment: verify-receipts,
// verify-pack, version. RunSvc runs the binary.
func RunCLI(args ...string) (code int, stdout, stderr string) {
	var out, errb strings.Builder
	code = cli.Run("dev", args, &out, &errb)
	return code, out.String(), errb.String()
}

// VerifyPackCLI runs svc verify-pack and checks its verdict.
func VerifyPackCLI(t testing.TB, path string, valid bool, wantOut string, args ...string) {
	t.Helper()
	code, out, errOut := RunCLI(append(append([]string{"verify-pack"}, args...), path)...)
	want := 1
	if valid {
		want = 0
	}
	if code != want || (valid && !strings.Contains(out, "\nVALID")) || (!valid && !strings.Contains(out, "INVALID")) || !strings.Contains(out, wantOut) {
		t.Errorf("svc verify-pack %v: exit %d (want %d)\n%s%s\nwant output containing %q", args, code, want, out, errOut, wantOut)
	}
}
