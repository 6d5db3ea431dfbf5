package postgres

import (
	"context"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/sqlstore"
	"github.com/jackc/pgx/v5"
)

// insertActionSQL records an action, an operator's or a topology change,
// with the arguments actionArgs makes of it.
const insertActionSQL = `INSERT INTO actions (at, who, kind, subject, detail, object, before, after, version)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`

func actionArgs(a courier.Action) []any {
	return []any{a.At, a.Who, string(a.Kind), a.Subject, nullString(a.Detail),
		string(a.Object), nullString(a.Before), nullString(a.After), a.Version}
}

// insertAction records an action in tx.
func insertAction(ctx context.Context, tx pgx.Tx, a courier.Action) error {
	if _, err := tx.Exec(ctx, insertActionSQL, actionArgs(a)...); err != nil {
		return classify("record action", err)
	}
	return nil
}

// Actions returns the actions on a subject, oldest first.
func (s *Store) Actions(ctx context.Context, subject string) ([]courier.Action, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+sqlstore.ActionColumns+` FROM actions WHERE subject = $1 ORDER BY seq`, subject)
	return collect([]courier.Action{}, rows, err, "list actions", sqlstore.ScanAction)
}

// Audit lists the actions that f selects, newest first; the cursor is the
// seq of the last action of the previous page.
func (s *Store) Audit(ctx context.Context, f courier.AuditFilter) (courier.AuditPage, error) {
	page, err := sqlstore.Audit(sqlstore.Where{Numbered: true}, sqlstore.ActionColumns, f, s.readRows(ctx), sqlstore.ScanAction)
	return page, classify("read the audit log", err)
}
