package sqlstore

import (
	"database/sql"

	courier "github.com/courier-gw/courier"
)

// ActionColumns are the columns of table actions that ScanAction reads, in
// its order.
const ActionColumns = `seq, at, who, kind, subject, detail, object, before, after, version`

// ScanAction reads a row of ActionColumns into an action.
func ScanAction(row Scanner) (courier.Action, error) {
	var a courier.Action
	var at Time
	var detail, before, after sql.NullString
	err := row.Scan(&a.Seq, &at, &a.Who, &a.Kind, &a.Subject, &detail, &a.Object, &before, &after, &a.Version)
	a.At, a.Detail, a.Before, a.After = at.Time, detail.String, before.String, after.String
	return a, err
}

// AuditQuery returns the statement that reads a page of the audit log
// (columns of table actions) that f selects, newest first, with its
// arguments in w, and the size of the page. Like ListQuery it reads one row
// more than the page holds.
func AuditQuery(w *Where, columns string, f courier.AuditFilter) (query string, limit int, err error) {
	w.Equal("who", f.Who)
	w.Equal("kind", string(f.Kind))
	w.Equal("object", string(f.Object))
	w.Equal("subject", f.Subject)
	if !f.Since.IsZero() {
		w.Add("at >= ?", w.time(f.Since))
	}
	if !f.Until.IsZero() {
		w.Add("at < ?", w.time(f.Until))
	}
	return pageQuery(w, columns, "actions", f.Cursor, f.Limit)
}

// Audit reads the page of the audit log that f selects, newest first, as
// AuditQuery makes it: w has the placeholders of the store's database,
// query runs the statement with its arguments, and scan reads a row of the
// columns into an action, its Seq set.
func Audit(w Where, columns string, f courier.AuditFilter, query QueryFunc,
	scan func(Scanner) (courier.Action, error)) (courier.AuditPage, error) {
	q, limit, err := AuditQuery(&w, columns, f)
	if err != nil {
		return courier.AuditPage{}, err
	}
	actions, next, err := readPage(q, w.Args, limit, query, scan, func(a courier.Action) int64 { return a.Seq })
	return courier.AuditPage{Actions: actions, Next: next}, err
}
