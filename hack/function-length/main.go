// Command function-length lists the project's longest hand-written functions
// and fails when one is longer than -max lines, so that a function stays
// something a reader can hold (shared/STYLE.md; issue 30 set the bar at 120).
//
// It reads every non-test, non-generated .go file below the folders it is
// given (default: internal, pkg, apis, cmd), measuring a function from its "func"
// line to its closing brace.
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

type function struct {
	name  string
	where string
	lines int
}

func main() {
	max := flag.Int("max", 120, "fail when a function is longer than this many lines (0: only list)")
	top := flag.Int("top", 10, "list this many of the longest functions")
	flag.Parse()
	roots := flag.Args()
	if len(roots) == 0 {
		roots = []string{"internal", "pkg", "apis", "cmd"}
	}
	var all []function
	for _, root := range roots {
		found, err := functionsBelow(root)
		if err != nil {
			fmt.Fprintf(os.Stderr, "can't read %s: %v\n", root, err)
			os.Exit(2)
		}
		all = append(all, found...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].lines > all[j].lines })
	for i := 0; i < *top && i < len(all); i++ {
		fmt.Printf("%5d  %s  (%s)\n", all[i].lines, all[i].name, all[i].where)
	}
	var over []function
	for _, f := range all {
		if *max > 0 && f.lines > *max {
			over = append(over, f)
		}
	}
	if len(over) > 0 {
		fmt.Printf("\n%d function(s) longer than %d lines: split them.\n", len(over), *max)
		os.Exit(1)
	}
}

func functionsBelow(root string) ([]function, error) {
	var found []function
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		if strings.HasPrefix(filepath.Base(path), "zz_generated") || strings.Contains(path, "/generated/") {
			return nil
		}
		file, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		if ast.IsGenerated(file) {
			return nil
		}
		for _, decl := range file.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			start, end := fset.Position(fn.Pos()), fset.Position(fn.End())
			found = append(found, function{
				name:  file.Name.Name + "." + funcName(fn),
				where: fmt.Sprintf("%s:%d", path, start.Line),
				lines: end.Line - start.Line + 1,
			})
		}
		return nil
	})
	return found, err
}

// funcName spells a method as Type.Method, as the reviews do.
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	t := fn.Recv.List[0].Type
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
			continue
		case *ast.IndexExpr:
			t = x.X
			continue
		case *ast.IndexListExpr:
			t = x.X
			continue
		case *ast.Ident:
			return x.Name + "." + fn.Name.Name
		}
		return fn.Name.Name
	}
}
