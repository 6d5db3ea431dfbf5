package blobdir_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/blobdir"
)

func nothingReferenced(context.Context, []string) (map[string]bool, error) {
	return map[string]bool{}, nil
}

// What a process that died left (a part file, or a committed blob, that no
// one holds a lock on) is swept; what a writer holds is not; files of
// other names are left alone.
func TestSweepTakesWhatNoOneHolds(t *testing.T) {
	dir := t.TempDir()
	d, err := blobdir.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// Left by a process that died: no lock on them.
	for _, name := range []string{"0123456789abcdef0123456789abcdef.part", "fedcba9876543210fedcba9876543210"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("left"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "README"), []byte("not a blob"), 0o600); err != nil {
		t.Fatal(err)
	}
	held, err := d.Create(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	held.Write([]byte("being written"))

	n, err := d.Sweep(ctx, nothingReferenced)
	if err != nil || n != 2 {
		t.Fatalf("sweep removed %d (%v), want the 2 left by a dead process", n, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "README")); err != nil {
		t.Fatalf("a file of another name was touched: %v", err)
	}
	ref, err := held.Commit()
	if err != nil {
		t.Fatalf("the held blob, after the sweep: %v", err)
	}
	if n, _ := d.Sweep(ctx, nothingReferenced); n != 0 {
		t.Fatalf("a sweep removed a committed blob its writer still holds")
	}
	held.Close()
	if n, _ := d.Sweep(ctx, nothingReferenced); n != 1 {
		t.Fatalf("a sweep left a let-go blob no message refers to")
	}
	if _, err := d.Open(ctx, ref); courier.ErrorCode(err) != courier.CodeNotFound {
		t.Fatalf("the swept blob: %v, want not found", err)
	}
}

// A ref names a blob of the area only: nothing outside it is reached.
func TestOpenRefusesRefsOutsideTheArea(t *testing.T) {
	d, err := blobdir.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"../../etc/passwd", "/etc/passwd", "", "0123456789abcdef0123456789abcdef.part", "0123456789ABCDEF0123456789ABCDEG"} {
		if _, err := d.Open(context.Background(), ref); courier.ErrorCode(err) != courier.CodeNotFound {
			t.Errorf("Open(%q): %v, want not found", ref, err)
		}
	}
}
