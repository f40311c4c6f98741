package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"svc/rules/policy"
)

// policyCmd is `svc policy test DIR` and `svc policy simulate ... DIR`
// (CONTRACT §18's check for pull requests).
func policyCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		_, _ = fmt.Fprintln(stderr, "usage: svc policy test DIR | svc policy simulate [flags] DIR")
		return exitConfig
	}
	switch args[0] {
	case "test":
		return policyTest(args[1:], stdout, stderr)
	case "simulate":
		return policySimulate(args[1:], stdout, stderr)
	}
	_, _ = fmt.Fprintf(stderr, "svc policy: unknown command %q\n", args[0])
	return exitConfig
}

// readRego reads every .rego file under dir, by its path relative to dir
// (through an os.Root: no symbolic link leads outside dir).
func readRego(dir string) (map[string]string, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer func() { _ = root.Close() }()
	files := map[string]string{}
	err = fs.WalkDir(root.FS(), ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".rego") {
			return err
		}
		b, err := fs.ReadFile(root.FS(), path)
		if err != nil {
			return err
		}
		files[path] = string(b)
		return nil
	})
	if err == nil && len(files) == 0 {
		err = fmt.Errorf("%s holds no .rego file", dir)
	}
	return files, err
}

// policyTest runs the Rego unit tests of DIR with the base policy set
// (SVC_POLICY_FILE, or the embedded one) and checks every policy module as
// the gateway would: exit 0 when all pass, 1 otherwise.
func policyTest(args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 {
		_, _ = fmt.Fprintln(stderr, "usage: svc policy test DIR")
		return exitConfig
	}
	files, err := readRego(args[0])
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "svc: %v\n", err)
		return exitConfig
	}
	rep, err := policy.RunTests(context.Background(), policy.Options{PolicyPath: os.Getenv("SVC_POLICY_FILE")}, files, stdout)
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "svc: %v\n", err)
		return exitError
	}
	if !rep.OK() {
		return exitError
	}
	return exitOK
}

// simulation is the answer of POST /v2/policies/simulate as the CLI reads it.
type simulation struct {
	Evaluated      int            `json:"evaluated"`
	Changed        int            `json:"changed"`
	Skipped        int            `json:"skipped"`
	SkippedReasons map[string]int `json:"skipped_reasons"`
	Transitions    map[string]int `json:"transitions"`
	Changes        []struct {
		DecisionID     string   `json:"decision_id"`
		Recorded       string   `json:"recorded"`
		Simulated      string   `json:"simulated"`
		Policies       []string `json:"policies"`
		Counterfactual bool     `json:"counterfactual"`
	} `json:"changes"`
	Mode           string    `json:"mode"`
	From           time.Time `json:"from"`
	To             time.Time `json:"to"`
	WithoutContext int       `json:"without_context"`
	Counterfactual int       `json:"counterfactual"`
}

// policySimulate simulates the policy modules of DIR against a running
// gateway and prints the summary in Markdown; exit 1 when more decisions
// changed than -threshold allows.
func policySimulate(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("svc policy simulate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("url", os.Getenv("SVC_URL"), "the gateway's base URL (default $SVC_URL)")
	token := fs.String("token", "", "an admin operator token (default $SVC_TOKEN)")
	remove := fs.String("remove", "", "tenant policies the change deletes, comma separated")
	from := fs.String("from", "", "start of the range, RFC 3339 (default: 24 hours before -to)")
	to := fs.String("to", "", "end of the range, RFC 3339 (default: now)")
	limit := fs.Int("limit", 0, "the newest this many decisions of the range (default 10,000)")
	mode := fs.String("mode", "as_recorded", "as_recorded or refold")
	threshold := fs.String("threshold", "0", "the most changed decisions allowed before exit 1: a count, or a percentage of those evaluated (\"2.5%\")")
	if err := fs.Parse(args); err != nil {
		return exitConfig
	}
	if fs.NArg() != 1 || *url == "" {
		_, _ = fmt.Fprintln(stderr, "usage: svc policy simulate -url URL [-token TOKEN] [-remove a,b] [-from T] [-to T] [-limit N] [-mode M] [-threshold N|P%] DIR")
		return exitConfig
	}
	if *token == "" {
		*token = os.Getenv("SVC_TOKEN")
	}
	allowed, err := parseThreshold(*threshold)
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "svc: -threshold: %v\n", err)
		return exitConfig
	}
	files, err := readRego(fs.Arg(0))
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "svc: %v\n", err)
		return exitConfig
	}
	mods, err := policy.CandidateModules(files)
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "svc: %v\n", err)
		return exitConfig
	}
	body := map[string]any{"mode": *mode, "policies": modulesJSON(mods)}
	if *remove != "" {
		body["remove"] = strings.Split(*remove, ",")
	}
	for k, v := range map[string]string{"from": *from, "to": *to} {
		if v != "" {
			body[k] = v
		}
	}
	if *limit > 0 {
		body["limit"] = *limit
	}
	sim, err := postSimulation(strings.TrimSuffix(*url, "/")+"/v2/policies/simulate", *token, body)
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "svc: %v\n", err)
		return exitError
	}
	writeSummary(stdout, sim, mods, *remove)
	if limitFor := allowed(sim.Evaluated); float64(sim.Changed) > limitFor {
		_, _ = fmt.Fprintf(stdout, "\n**%d decisions changed, more than the threshold (%s): the check fails.**\n", sim.Changed, *threshold)
		return exitError
	}
	return exitOK
}

// parseThreshold reads a count or a percentage; the result gives the most
// changes allowed among n evaluated decisions.
func parseThreshold(s string) (func(n int) float64, error) {
	if p, ok := strings.CutSuffix(s, "%"); ok {
		f, err := strconv.ParseFloat(p, 64)
		if err != nil || f < 0 || f > 100 {
			return nil, fmt.Errorf("%q is not a percentage", s)
		}
		return func(n int) float64 { return f / 100 * float64(n) }, nil
	}
	c, err := strconv.Atoi(s)
	if err != nil || c < 0 {
		return nil, fmt.Errorf("%q is not a count or a percentage", s)
	}
	return func(int) float64 { return float64(c) }, nil
}

func modulesJSON(mods []policy.Module) []map[string]string {
	out := make([]map[string]string, len(mods))
	for i, m := range mods {
		out[i] = map[string]string{"name": m.Name, "rego": m.Rego}
	}
	return out
}

func postSimulation(url, token string, body any) (simulation, error) {
	var sim simulation
	b, err := json.Marshal(body)
	if err != nil {
		return sim, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b)) //nolint:gosec // the operator names the gateway to ask
	if err != nil {
		return sim, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req) //nolint:gosec // the operator names the gateway to ask
	if err != nil {
		return sim, err
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return sim, err
	}
	if resp.StatusCode != http.StatusOK {
		return sim, fmt.Errorf("the gateway answered %d: %s", resp.StatusCode, bytes.TrimSpace(raw))
	}
	return sim, json.Unmarshal(raw, &sim)
}

// writeSummary prints the simulation as Markdown (a pull request comment).
func writeSummary(w io.Writer, sim simulation, mods []policy.Module, remove string) {
	p := func(format string, args ...any) { _, _ = fmt.Fprintf(w, format, args...) }
	names := make([]string, len(mods))
	for i, m := range mods {
		names[i] = "`" + m.Name + "`"
	}
	p("### svc policy simulation\n\n")
	p("Candidate: %s", strings.Join(names, ", "))
	if remove != "" {
		p("; removed: `%s`", strings.ReplaceAll(remove, ",", "`, `"))
	}
	p(". Decisions from %s to %s, mode `%s`.\n\n", sim.From.Format(time.RFC3339), sim.To.Format(time.RFC3339), sim.Mode)
	pct := 0.0
	if sim.Evaluated > 0 {
		pct = 100 * float64(sim.Changed) / float64(sim.Evaluated)
	}
	p("| evaluated | changed | skipped |\n|---:|---:|---:|\n| %d | %d (%.1f%%) | %d |\n\n", sim.Evaluated, sim.Changed, pct, sim.Skipped)
	if len(sim.Transitions) > 0 {
		p("| recorded → simulated | decisions |\n|---|---:|\n")
		keys := make([]string, 0, len(sim.Transitions))
		for k := range sim.Transitions {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p("| %s | %d |\n", strings.Replace(k, "->", " → ", 1), sim.Transitions[k])
		}
		p("\n")
	}
	if sim.Skipped > 0 {
		p("Skipped (no policy decided them alone): %v.\n\n", sim.SkippedReasons)
	}
	if sim.WithoutContext > 0 {
		p("%d decisions were evaluated without the run context the candidate reads (recorded before it was kept).\n\n", sim.WithoutContext)
	}
	if len(sim.Changes) > 0 {
		const shown = 20
		p("<details><summary>Changed decisions (%d of %d)</summary>\n\n| decision | recorded | simulated | policies |\n|---|---|---|---|\n",
			min(shown, len(sim.Changes)), sim.Changed)
		for _, c := range sim.Changes[:min(shown, len(sim.Changes))] {
			mark := ""
			if c.Counterfactual {
				mark = " (counterfactual)"
			}
			p("| `%s` | %s | %s%s | %s |\n", c.DecisionID, c.Recorded, c.Simulated, mark, strings.Join(c.Policies, ", "))
		}
		p("\n</details>\n")
	}
}
