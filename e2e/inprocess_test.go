package e2e

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// readOnlyPackageVars are the package-level variables of the server's
// code, each a table, a compiled pattern or an identifier that nothing
// writes after init. Two nodes in this test process (cluster mode) share
// them; they may, because no request or node changes them.
var readOnlyPackageVars = []string{
	// Tables, settings and descriptors nothing writes after init.
	"actors.onDemandGuardian", "actors.dispatcherExtension", "actors.entityMailbox", "actors.cefHeaderEscaper", "actors.cefExtensionEscaper",
	"control.reservedUpstreamHeaders", "httpapi.riskTiers", "httpapi.roleRank", "httpapi.refusalReasons", "httpapi.dashboardFiles",
	"httpapi.contentTypes", "httpapi.shadowOutcomesDesc", "httpapi.shadowFailedDesc", "httpapi.docsFiles", "httpapi.reasonStatus", "httpapi.ingestSources", "httpapi.jobRunsDesc",
	"httpapi.jobLastRunDesc", "httpapi.jobLastDurationDesc", "httpapi.jobLastOKDesc", "httpapi.proxyStatuses", "httpapi.routeErrors",
	"httpapi.fieldRules", "httpapi.namedPatterns", "httpapi.pageQuery", "httpapi.methodOrder", "httpapi.watchParam",
	"httpapi.apiVersions", "mcpclient.DefaultLimits", "mcpclient.dataField", "mcpproxy.DefaultLimits", "mcpproxy.SupportedVersions",
	"mcpproxy.forwarded", "mcpproxy.sessionAAD", "outbound.sharedRange", "postgres.migrationFiles", "postgres.vacuumTables",
	"sqlite.checkpointInterval", "sqlite.checkpointRewindAt", "sqlite.backstopPages", "sqlite.bulkIndexes", "sqlite.migrationFiles",
	"sqlite.progressQuery", "sqlstore.insertTexts", "sqlstore.dueCallbackQuery", "persistence.rawJSONType", "detect.defaultRules",
	"detect.systemRules", "inspect.keyHeads", "inspect.keyPrefixes", "inspect.injections", "inspect.directives",
	"inspect.injectionPhrases", "inspect.directivePhrases", "policy.baseFiles", "sharedstate.runLua", "runstate.levelNames", "runstate.runMembers", "runstate.agentMembers", "runstate.AllFields",
	"runstate.trustMembers", "runstate.toolLeaves", "runstate.seenSeed", "policy.collectPackage", "policy.inputRoot", "policy.callTool", "policy.callAction", "risk.trustScore", "risk.skillScore", "risk.tierScore",
	// Written, but the memo of a pure function (a query's text rewritten
	// for SQLite): what one node stores the other would compute alike.
	"sqlite.rewritten", "sqlite.rewrittenCount",
}

// TestNodesShareNoPackageState guards the premise of running two
// clustered nodes in one test process: every node holds its own state
// (store, shared-state connection, actor system, caches), so a package-
// level variable the server writes would be shared by the two nodes here
// and not by two processes, hiding a cross-node bug. Every package-level
// variable of the server's code (besides errors, patterns and embedded
// files) is either listed above as read-only, or this test fails.
func TestNodesShareNoPackageState(t *testing.T) {
	root := ".."
	skip := []string{"sdk", "testkit", "e2e", "cmd", "bench", "scripts", "testdata", "node_modules", "storetest", "packtest", "mcptest", "witnesstest"}
	fset := token.NewFileSet()
	var found []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || slices.Contains(skip, d.Name())) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path) //nolint:gosec // the repository's own source files, read by a test
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(fset, path, src, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			g, ok := decl.(*ast.GenDecl)
			if !ok || g.Tok != token.VAR {
				continue
			}
			for _, spec := range g.Specs {
				v := spec.(*ast.ValueSpec)
				for i, name := range v.Names {
					if name.Name == "_" || (i < len(v.Values) && immutable(v.Values[i])) {
						continue
					}
					found = append(found, f.Name.Name+"."+name.Name)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) < len(readOnlyPackageVars)/2 {
		t.Fatalf("found %d package-level variables; the walk missed the server's code", len(found))
	}
	for _, v := range found {
		if !slices.Contains(readOnlyPackageVars, v) {
			t.Errorf("package-level variable %s: if the server writes it, two in-process nodes share it (keep state in the node); "+
				"if nothing writes it after init, add it to readOnlyPackageVars", v)
		}
	}
}

// immutable reports whether a package-level value is an error, a compiled
// pattern or a similar constant-like value.
func immutable(e ast.Expr) bool {
	call, ok := e.(*ast.CallExpr)
	if !ok {
		return false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	pkg, _ := sel.X.(*ast.Ident)
	if pkg == nil {
		return false
	}
	switch pkg.Name + "." + sel.Sel.Name {
	case "errors.New", "fmt.Errorf", "regexp.MustCompile", "netip.MustParsePrefix", "template.Must":
		return true
	}
	return false
}
