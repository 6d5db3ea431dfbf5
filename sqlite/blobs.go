package sqlite

import (
	"context"
	"database/sql"
	"strings"

	courier "github.com/courier-gw/courier"
)

// Blobs is where payloads larger than courier.InlineMax are kept: the
// directory beside the database, or Options.Blobs when given.
func (s *Store) Blobs() courier.Blobs { return s.blobs }

// ReferencedBlobs reports which of refs a stored message names, on the
// partial index of messages with a blob.
func (s *Store) ReferencedBlobs(ctx context.Context, refs []string) (map[string]bool, error) {
	known := make(map[string]bool, len(refs))
	for len(refs) > 0 {
		n := min(len(refs), 500)
		args := make([]any, n)
		for i, r := range refs[:n] {
			args[i] = r
		}
		rows, err := s.rdb.QueryContext(ctx, `SELECT DISTINCT blob FROM messages WHERE blob IN (?`+strings.Repeat(`, ?`, n-1)+`)`, args...)
		if err != nil {
			return nil, classify("look up blobs", err)
		}
		for rows.Next() {
			var ref string
			if err := rows.Scan(&ref); err != nil {
				rows.Close()
				return nil, classify("look up blobs", err)
			}
			known[ref] = true
		}
		if err := rows.Close(); err != nil {
			return nil, classify("look up blobs", err)
		}
		refs = refs[n:]
	}
	return known, nil
}

// Secret returns the named secret, made of 32 random bytes by the first
// call.
func (s *Store) Secret(ctx context.Context, name string) ([]byte, error) {
	return s.secrets.Get(name, func() ([]byte, error) { return s.readSecret(ctx, name) })
}

// readSecret reads the named secret, making it if it is not there.
func (s *Store) readSecret(ctx context.Context, name string) ([]byte, error) {
	var value []byte
	err := s.rdb.QueryRowContext(ctx, `SELECT value FROM settings WHERE name = ?`, name).Scan(&value)
	if err == nil {
		return value, nil
	}
	if err != sql.ErrNoRows {
		return nil, classify("read secret "+name, err)
	}
	err = s.write(ctx, func(tx *sql.Tx) error {
		if _, err := tx.Exec(`INSERT INTO settings (name, value) VALUES (?, randomblob(32)) ON CONFLICT (name) DO NOTHING`, name); err != nil {
			return err
		}
		return tx.QueryRow(`SELECT value FROM settings WHERE name = ?`, name).Scan(&value)
	})
	if err != nil {
		return nil, classify("make secret "+name, err)
	}
	return value, nil
}
