// Package sqlstore holds what courier's two SQL stores, sqlite and
// postgres, do alike: the common part of running their migrations, the
// conditions of a message filter, list cursors and pages (of messages and
// of the audit log), and how headers and bulk operations are kept. What
// differs between the databases (the statements, placeholders, locking and
// the classes of their errors) stays in each store.
package sqlstore
