package sqlstore

import (
	courier "github.com/courier-gw/courier"
)

// AuditQuery returns the statement that reads a page of the audit log
// (columns of table actions) that f selects, newest first, with its
// arguments in w, and the size of the page. Like ListQuery it reads one row
// more than the page holds.
func AuditQuery(w *Where, columns string, f courier.AuditFilter) (query string, limit int, err error) {
	limit = pageSize(f.Limit)
	if f.Who != "" {
		w.Add("who = ?", f.Who)
	}
	if f.Kind != "" {
		w.Add("kind = ?", string(f.Kind))
	}
	if f.Object != "" {
		w.Add("object = ?", string(f.Object))
	}
	if f.Subject != "" {
		w.Add("subject = ?", f.Subject)
	}
	if !f.Since.IsZero() {
		w.Add("at >= ?", w.time(f.Since))
	}
	if !f.Until.IsZero() {
		w.Add("at < ?", w.time(f.Until))
	}
	if f.Cursor != "" {
		seq, err := DecodeCursor(f.Cursor)
		if err != nil {
			return "", 0, err
		}
		w.Add("seq < ?", seq)
	}
	return `SELECT ` + columns + ` FROM actions` + w.SQL() + ` ORDER BY seq DESC LIMIT ` + w.Arg(limit+1), limit, nil
}

// Audit reads the page of the audit log that f selects, newest first, as
// AuditQuery makes it: w has the placeholders of the store's database,
// query runs the statement with its arguments, and scan reads a row of the
// columns into an action, its Seq set.
func Audit(w Where, columns string, f courier.AuditFilter, query func(q string, args ...any) (Rows, error),
	scan func(Scanner) (courier.Action, error)) (courier.AuditPage, error) {
	q, limit, err := AuditQuery(&w, columns, f)
	if err != nil {
		return courier.AuditPage{}, err
	}
	rows, err := query(q, w.Args...)
	actions, err := Collect([]courier.Action{}, rows, err, scan)
	if err != nil {
		return courier.AuditPage{}, err
	}
	if len(actions) <= limit {
		return courier.AuditPage{Actions: actions}, nil
	}
	return courier.AuditPage{Actions: actions[:limit], Next: EncodeCursor(actions[limit-1].Seq)}, nil
}
