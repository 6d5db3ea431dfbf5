package cpustat

import "testing"

func TestPostgresTicks(t *testing.T) {
	for _, tc := range []struct {
		stat string
		want int64
		ok   bool
	}{
		{"1234 (postgres) S 1 1234 1234 0 -1 4194560 500 0 0 0 7 3 20 10 20 0 1 0 100 1000 100", 40, true},
		{"99 (pg worker) (x)) S 1 1 1 0 -1 0 0 0 0 0 7 3 20 10 20 0 1 0 100 1000 100", 0, false},
		{"1 (postgres) S 1", 0, false},
		{"5 (bash) S 1 5 5 0 -1 4194560 500 0 0 0 7 3 20 10 20 0 1 0 100 1000 100", 0, false},
	} {
		got, ok := postgresTicks([]byte(tc.stat))
		if got != tc.want || ok != tc.ok {
			t.Errorf("postgresTicks(%q) = %d, %v; want %d, %v", tc.stat, got, ok, tc.want, tc.ok)
		}
	}
}

func TestLocalDatabase(t *testing.T) {
	for dsn, want := range map[string]bool{
		"postgres://postgres@127.0.0.1:5432/test":      true,
		"postgres://postgres@localhost/test":           true,
		"postgres://postgres@[::1]:5432/test":          true,
		"host=/var/run/postgresql dbname=test":         true,
		"postgres://postgres@db.example.org:5432/test": false,
		"postgres://postgres@10.1.2.3/test":            false,
	} {
		if got := LocalDatabase(dsn); got != want {
			t.Errorf("LocalDatabase(%q) = %v, want %v", dsn, got, want)
		}
	}
}
