package sqlstore

import (
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
)

// Migration is one schema change embedded in a store: the file
// migrations/NNNN_name.sql, applied once, in the order of its version NNNN.
type Migration struct {
	Version int
	Name    string // the file's name, for errors
	SQL     string
}

// Migrations reads the migrations of fsys (migrations/*.sql) in the order
// of their versions.
func Migrations(fsys fs.FS) ([]Migration, error) {
	names, err := fs.Glob(fsys, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	out := make([]Migration, 0, len(names))
	for _, name := range names {
		base := path.Base(name)
		version, err := strconv.Atoi(strings.SplitN(base, "_", 2)[0])
		if err != nil {
			return nil, fmt.Errorf("migration %s: name must start with its version number", base)
		}
		body, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		out = append(out, Migration{Version: version, Name: base, SQL: string(body)})
	}
	slices.SortFunc(out, func(a, b Migration) int { return a.Version - b.Version })
	for i := 1; i < len(out); i++ {
		// Only one of them would be recorded, and the other never applied.
		if out[i].Version == out[i-1].Version {
			return nil, fmt.Errorf("migrations %s and %s have the same version", out[i-1].Name, out[i].Name)
		}
	}
	return out, nil
}

// Migrate applies the migrations of fsys newer than current, the version
// recorded last, in order, each through apply, which runs it and records
// its version all or nothing (in one transaction). It stops at the first
// that fails.
func Migrate(fsys fs.FS, current int, apply func(Migration) error) error {
	migrations, err := Migrations(fsys)
	if err != nil {
		return err
	}
	for _, m := range migrations {
		if m.Version <= current {
			continue
		}
		if err := apply(m); err != nil {
			return fmt.Errorf("migration %s: %w", m.Name, err)
		}
	}
	return nil
}
