package sqlstore

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
)

func TestMigrations(t *testing.T) {
	tests := []struct {
		name    string
		files   fstest.MapFS
		want    []int  // versions, in order
		wantErr string // part of the error, when one is wanted
	}{
		{
			name: "in the order of versions, not of names",
			files: fstest.MapFS{
				"migrations/10_late.sql":   {Data: []byte("ten")},
				"migrations/2_second.sql":  {Data: []byte("two")},
				"migrations/0001_init.sql": {Data: []byte("one")},
				"migrations/README":        {Data: []byte("not a migration")},
			},
			want: []int{1, 2, 10},
		},
		{name: "none", files: fstest.MapFS{}, want: []int{}},
		{
			name:    "a name without its version",
			files:   fstest.MapFS{"migrations/init.sql": {Data: []byte("x")}},
			wantErr: "init.sql: name must start with its version number",
		},
		{
			name: "two of one version",
			files: fstest.MapFS{
				"migrations/0003_a.sql": {Data: []byte("a")},
				"migrations/0003_b.sql": {Data: []byte("b")},
			},
			wantErr: "same version",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Migrations(tt.files)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			versions := []int{}
			for _, m := range got {
				versions = append(versions, m.Version)
				if m.SQL != string(tt.files["migrations/"+m.Name].Data) {
					t.Errorf("migration %s has SQL %q, want its file's", m.Name, m.SQL)
				}
			}
			if !slices.Equal(versions, tt.want) {
				t.Errorf("versions %v, want %v", versions, tt.want)
			}
		})
	}
}

func TestMigrate(t *testing.T) {
	files := fstest.MapFS{
		"migrations/0001_init.sql":   {Data: []byte("one")},
		"migrations/0002_more.sql":   {Data: []byte("two")},
		"migrations/0003_broken.sql": {Data: []byte("three")},
		"migrations/0004_last.sql":   {Data: []byte("four")},
	}
	tests := []struct {
		name    string
		current int
		failAt  int   // the version whose apply fails (0: none)
		want    []int // the versions applied
		wantErr string
	}{
		{name: "a new database", current: 0, want: []int{1, 2, 3, 4}},
		{name: "only the newer ones", current: 2, want: []int{3, 4}},
		{name: "up to date", current: 4, want: nil},
		{name: "stops at a failure", current: 1, failAt: 3, want: []int{2}, wantErr: "migration 0003_broken.sql: refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var applied []int
			err := Migrate(files, tt.current, func(m Migration) error {
				if m.Version == tt.failAt {
					return errors.New("refused")
				}
				applied = append(applied, m.Version)
				return nil
			})
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || err.Error() != tt.wantErr) {
				t.Fatalf("error %v, want %q", err, tt.wantErr)
			}
			if !slices.Equal(applied, tt.want) {
				t.Errorf("applied %v, want %v", applied, tt.want)
			}
		})
	}
}
