package architecture

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

const module = "github.com/composite-apiserver/composite-apiserver/"

var printTable = flag.Bool("print-table", false, "print the imports' rows as the module has them, for docs/architecture.md")

// pkg is what go list says of one of the module's packages.
type pkg struct {
	ImportPath string
	Name       string
	GoFiles    []string
	Imports    []string
}

var goList = sync.OnceValues(func() ([]byte, error) {
	cmd := exec.Command("go", "list", "-json", "./...")
	cmd.Dir = "../.."
	return cmd.Output()
})

// modulePackages lists the module's packages with their non-test imports
// of the module, module-relative.
func modulePackages(t *testing.T) []pkg {
	t.Helper()
	out, err := goList()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("go list: %v", err)
		}
		p.ImportPath = strings.TrimPrefix(p.ImportPath, module)
		var own []string
		for _, imp := range p.Imports {
			if rel, ok := strings.CutPrefix(imp, module); ok {
				own = append(own, rel)
			}
		}
		p.Imports = own
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// layered tells whether the table covers the package: the server's and
// the plugin's code (internal/, cmd/) and the API (apis/, pkg/hookapi);
// generated code, tests, tools and examples are not layered.
func layered(path string) bool {
	for _, prefix := range []string{"internal/", "cmd/", "apis/", "pkg/hookapi"} {
		if strings.HasPrefix(path, prefix) {
			return true
		}
	}
	return false
}

// table reads the rows of docs/architecture.md's import table: the
// package, then the module's packages it may import ("pkg/generated/..."
// for any generated one).
func table(t *testing.T) map[string][]string {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows := map[string][]string{}
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			in = line == "## Who may import whom"
			continue
		}
		if !in || !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(line, "|")
		if len(cells) < 4 {
			t.Fatalf("docs/architecture.md: a row with fewer than three cells: %s", line)
		}
		name := strings.Trim(strings.TrimSpace(cells[1]), "`")
		if _, dup := rows[name]; dup {
			t.Errorf("docs/architecture.md: %s has two rows", name)
		}
		rows[name] = backticked(cells[2])
	}
	if len(rows) == 0 {
		t.Fatal("docs/architecture.md has no rows under \"## Who may import whom\"")
	}
	return rows
}

func backticked(cell string) []string {
	var out []string
	parts := strings.Split(cell, "`")
	for i := 1; i < len(parts); i += 2 {
		out = append(out, parts[i])
	}
	return out
}

func allows(allowed []string, imp string) bool {
	for _, a := range allowed {
		if a == imp || (strings.HasSuffix(a, "/...") && strings.HasPrefix(imp, strings.TrimSuffix(a, "..."))) {
			return true
		}
	}
	return false
}

// TestImportsFollowTheTable: every layered package has a row, every row a
// package, and no package imports one of the module's that its row does
// not name. A new import across the floors is a change of the table, made
// on purpose, with its reason.
func TestImportsFollowTheTable(t *testing.T) {
	pkgs := modulePackages(t)
	if *printTable {
		for _, p := range pkgs {
			if layered(p.ImportPath) {
				fmt.Printf("| `%s` | %s | |\n", p.ImportPath, "`"+strings.Join(p.Imports, "`, `")+"`")
			}
		}
	}
	rows := table(t)
	seen := map[string]bool{}
	for _, p := range pkgs {
		if !layered(p.ImportPath) {
			continue
		}
		seen[p.ImportPath] = true
		allowed, ok := rows[p.ImportPath]
		if !ok {
			t.Errorf("%s has no row in docs/architecture.md's table of imports", p.ImportPath)
			continue
		}
		for _, imp := range p.Imports {
			if !allows(allowed, imp) {
				t.Errorf("%s imports %s, which docs/architecture.md does not allow it (allowed: %v)", p.ImportPath, imp, allowed)
			}
		}
	}
	for name := range rows {
		if !seen[name] {
			t.Errorf("docs/architecture.md has a row for %s, which is no package of the module", name)
		}
	}
}

// TestOnlyTheAPIIsImportableFromOutside: outside internal/, the module's
// importable packages are the API types, the generated client, the hook
// SDK, and e2e's framework (the one exception: the e2e packages share it,
// and nothing outside the module has reason to import it).
func TestOnlyTheAPIIsImportableFromOutside(t *testing.T) {
	allowed := []string{"apis/...", "pkg/generated/...", "pkg/hookapi", "e2e/framework"}
	for _, p := range modulePackages(t) {
		if p.Name == "main" || len(p.GoFiles) == 0 || strings.HasPrefix(p.ImportPath, "internal/") {
			continue
		}
		if !allows(allowed, p.ImportPath) && !slices.Contains(allowed, p.ImportPath) {
			t.Errorf("%s is importable from outside the module; move it under internal/ (or make it API and say so in docs/architecture.md)", p.ImportPath)
		}
	}
}
