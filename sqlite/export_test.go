package sqlite

import (
	"context"

	"github.com/courier-gw/courier/storetest"
)

// Rows returns every row of every table, each as the text of its columns,
// by table; a payload's with the id of its message (storetest.Inspector).
func (s *Store) Rows(ctx context.Context) (map[string][]string, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT name FROM sqlite_master WHERE type = 'table'`)
	tables, err := collect(nil, rows, err, "list tables", func(row scanner) (string, error) {
		var name string
		return name, row.Scan(&name)
	})
	if err != nil {
		return nil, err
	}
	return storetest.InspectRows(tables, func(table string) string { return `"` + table + `"` },
		func(query string) ([][]any, error) {
			rows, err := s.rdb.QueryContext(ctx, query)
			if err != nil {
				return nil, err
			}
			cols, err := rows.Columns()
			if err != nil {
				rows.Close()
				return nil, err
			}
			return collect(nil, rows, nil, "read", func(row scanner) ([]any, error) {
				vals := make([]any, len(cols))
				ptrs := make([]any, len(cols))
				for i := range vals {
					ptrs[i] = &vals[i]
				}
				return vals, row.Scan(ptrs...)
			})
		})
}

// BlobsLeft returns those of refs the blob area still holds
// (storetest.Inspector).
func (s *Store) BlobsLeft(ctx context.Context, refs []string) ([]string, error) {
	return storetest.BlobsOpened(ctx, s.blobs, refs)
}
