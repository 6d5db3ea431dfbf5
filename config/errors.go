package config

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/courier-gw/courier"
)

// Error is one problem in a configuration, located so that a person can go
// straight to it: the file, the line, and the field's path in the schema
// (endpoints.acme.url). An environment override is located by its variable
// name in Field, with no file and no line.
type Error struct {
	File    string
	Line    int
	Field   string
	Message string
	// Undefined is the object Field names that is not defined, when that
	// is the problem: a change that takes the object away can then say
	// what uses it, rather than that it is not defined.
	Undefined *Reference
}

// Reference is a topology object by kind and name.
type Reference struct {
	Kind courier.TopologyKind
	Name string
}

// Error formats e as FILE:LINE: FIELD: message, leaving out what is unknown.
func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteString(":")
	}
	if e.Line > 0 {
		if e.File == "" {
			b.WriteString("line ")
		}
		fmt.Fprintf(&b, "%d:", e.Line)
	}
	if b.Len() > 0 {
		b.WriteString(" ")
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Message)
	return b.String()
}

// Errors is every problem found in one configuration, so that a person fixes
// them in one go instead of one start at a time.
type Errors []*Error

// Error lists the problems one per line.
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap gives errors.As and errors.Is access to each problem.
func (es Errors) Unwrap() []error {
	errs := make([]error, len(es))
	for i, e := range es {
		errs[i] = e
	}
	return errs
}

// sorted orders the problems as they appear in the file; problems without a
// line (environment overrides) come last.
func (es Errors) sorted() Errors {
	slices.SortStableFunc(es, func(a, b *Error) int {
		switch {
		case a.Line == b.Line:
			return 0
		case a.Line == 0:
			return 1
		case b.Line == 0:
			return -1
		}
		return cmp.Compare(a.Line, b.Line)
	})
	return es
}

// err returns es as an error, or nil when there are none: a nil Errors in a
// non-nil error interface would read as a failure.
func (es Errors) err() error {
	if len(es) == 0 {
		return nil
	}
	return es.sorted()
}
