package sqlite

import (
	"context"
	"database/sql"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/sqlstore"
)

// insertAction records an action, an operator's or a topology change, in
// tx.
func insertAction(tx *sql.Tx, a courier.Action) error {
	_, err := tx.Exec(`INSERT INTO actions (at, who, kind, subject, detail, object, before, after, version)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		micros(a.At), a.Who, string(a.Kind), a.Subject, nullString(a.Detail),
		string(a.Object), nullString(a.Before), nullString(a.After), a.Version)
	if err != nil {
		return classify("record action", err)
	}
	return nil
}

// Actions returns the actions on a subject, oldest first.
func (s *Store) Actions(ctx context.Context, subject string) ([]courier.Action, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT `+sqlstore.ActionColumns+` FROM actions WHERE subject = ? ORDER BY seq`, subject)
	return collect([]courier.Action{}, rows, err, "list actions", sqlstore.ScanAction)
}

// Audit lists the actions that f selects, newest first; the cursor is the
// seq of the last action of the previous page.
func (s *Store) Audit(ctx context.Context, f courier.AuditFilter) (courier.AuditPage, error) {
	page, err := sqlstore.Audit(sqlstore.Where{Time: micros}, sqlstore.ActionColumns, f, s.readRows(ctx), sqlstore.ScanAction)
	return page, classify("read the audit log", err)
}
