// Package testkit_test checks what the folder promises: its packages serve
// tests only, so that a reader can tell at a glance what courier ships.
package testkit_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// kitPath is the import path below which the test kits live.
const kitPath = "github.com/courier-gw/courier/internal/testkit/"

// TestOnlyTestsImportTheKits: no file that is built into courier imports a
// package of internal/testkit; only _test.go files and the kits
// themselves do.
func TestOnlyTestsImportTheKits(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	kits := filepath.Join(root, "internal", "testkit")
	checked := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && (path == kits || strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata"):
			return fs.SkipDir
		case d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go"):
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		checked++
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(p, kitPath) {
				rel, _ := filepath.Rel(root, path)
				t.Errorf("%s imports the test kit %s: production code must not", rel, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("checked %d production files; the walk did not find the tree", checked)
	}
}
