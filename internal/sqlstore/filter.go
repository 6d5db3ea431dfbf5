package sqlstore

import (
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	courier "github.com/courier-gw/courier"
)

// Where builds the conditions of a statement and their arguments, with
// the placeholders of the store's database.
type Where struct {
	// Numbered writes the placeholders $1, $2, … (PostgreSQL) instead of
	// ? (SQLite).
	Numbered bool
	// Time turns a time into the argument the store compares it with
	// (default: the time itself).
	Time func(time.Time) any
	// Args are the arguments of the placeholders, in order.
	Args  []any
	conds []string
}

// Arg adds an argument and returns its placeholder.
func (w *Where) Arg(v any) string {
	w.Args = append(w.Args, v)
	if w.Numbered {
		return "$" + strconv.Itoa(len(w.Args))
	}
	return "?"
}

// Add adds a condition whose one "?" stands for v.
func (w *Where) Add(cond string, v any) {
	w.conds = append(w.conds, strings.Replace(cond, "?", w.Arg(v), 1))
}

// Equal adds the condition that column holds v, when v is given (a filter's
// field left empty selects any).
func (w *Where) Equal(column, v string) {
	if v != "" {
		w.Add(column+" = ?", v)
	}
}

// In adds the condition that column holds one of values: one array
// argument on PostgreSQL, one argument each on SQLite, which has no arrays.
func (w *Where) In(column string, values []string) {
	if w.Numbered {
		w.Add(column+" = ANY(?)", values)
		return
	}
	marks := make([]string, len(values))
	for i, v := range values {
		marks[i] = w.Arg(v)
	}
	w.conds = append(w.conds, column+" IN ("+strings.Join(marks, ",")+")")
}

// SQL returns the WHERE clause of the conditions, or "" when there are none.
func (w *Where) SQL() string {
	if len(w.conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(w.conds, " AND ")
}

// Tenant adds the condition that a message is tenant's (is, true) or is
// not (false): a tenant's ids begin with its mark (compared as IDPrefix
// is: a range of ids would follow the database's collation), the default
// tenant's have none.
func (w *Where) Tenant(tenant string, is bool) { w.TenantIDs("id", tenant, is) }

// TenantIDs adds the condition that column, which holds message ids or
// delivery keys, holds tenant's (is, true) or not (false), as Tenant.
func (w *Where) TenantIDs(column, tenant string, is bool) {
	if tenant == courier.DefaultTenant {
		find := "instr(" + column + ", ?)"
		if w.Numbered {
			find = "strpos(" + column + ", ?)"
		}
		w.Add(find+map[bool]string{true: " = 0", false: " > 0"}[is], courier.IDMark)
		return
	}
	w.prefix(column, courier.QualifyID(tenant, ""), is)
}

// OwnedBy adds the condition that column holds a qualified name (of an
// endpoint, route, type) of tenant, one other than the default, whose
// names have no prefix: the names that begin with its name and '/'.
func (w *Where) OwnedBy(column, tenant string) {
	w.prefix(column, courier.Qualify(tenant, ""), true)
}

// prefix adds the condition that column begins with prefix (is) or not:
// by substr, which counts characters on both databases, as a range of
// values would follow the database's collation and LIKE takes '_' and '%'
// as wildcards.
func (w *Where) prefix(column, prefix string, is bool) {
	n := w.Arg(utf8.RuneCountInString(prefix))
	w.Add("substr("+column+", 1, "+n+")"+map[bool]string{true: " = ", false: " <> "}[is]+"?", prefix)
}

// Raw adds a condition that takes no argument.
func (w *Where) Raw(cond string) { w.conds = append(w.conds, cond) }

// Purge adds the conditions of the messages a purge takes, but their
// state and the finish time.
func (w *Where) Purge(p courier.Purge) {
	if p.Tenant != "" {
		w.Tenant(p.Tenant, true)
	}
	for _, t := range p.Except {
		w.Tenant(t, false)
	}
}

// Filter adds the conditions of a message filter's fields, all but its
// cursor and limit.
func (w *Where) Filter(f courier.MessageFilter) {
	w.Equal("state", string(f.State))
	w.Equal("type", f.Type)
	w.Equal("route", f.Route)
	if len(f.Routes) > 0 {
		w.In("route", f.Routes)
	}
	if f.IDPrefix != "" {
		// substr counts characters on both databases; LIKE would need its
		// wildcards escaped and is case-insensitive on SQLite.
		n := w.Arg(utf8.RuneCountInString(f.IDPrefix))
		w.Add("substr(id, 1, "+n+") = ?", f.IDPrefix)
	}
	if f.Tenant != "" {
		w.Tenant(f.Tenant, true)
	}
	w.Equal("endpoint", f.Endpoint)
	w.Equal("subscription", f.Subscription)
	w.Equal("reason", string(f.Reason))
	if len(f.Reasons) > 0 {
		reasons := make([]string, len(f.Reasons))
		for i, r := range f.Reasons {
			reasons[i] = string(r)
		}
		w.In("reason", reasons)
	}
	w.Equal("sender", f.Sender)
	if !f.CreatedAfter.IsZero() {
		w.Add("created_at >= ?", w.time(f.CreatedAfter))
	}
	if !f.CreatedBefore.IsZero() {
		w.Add("created_at < ?", w.time(f.CreatedBefore))
	}
}

func (w *Where) time(t time.Time) any {
	if w.Time == nil {
		return t
	}
	return w.Time(t)
}

// BulkBatch adds the conditions of the next batch of a bulk operation:
// the messages its filter matches, whatever the filter's state, in the
// states the operation acts on, after cursor (the last message of the
// batch before) and up to maxSeq (the newest message when it began).
func (w *Where) BulkBatch(op courier.BulkOp, cursor, maxSeq int64) {
	f := op.Filter
	f.State = ""
	w.Filter(f)
	states := make([]string, 0, 2)
	for _, st := range op.BulkStates() {
		states = append(states, string(st))
	}
	w.In("state", states)
	w.Add("seq > ?", cursor)
	w.Add("seq <= ?", maxSeq)
}
