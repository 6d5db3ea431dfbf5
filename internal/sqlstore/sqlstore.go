// Package sqlstore holds what courier's two SQL stores, sqlite and
// postgres, do alike: the common part of running their migrations, the
// conditions of a message filter, list cursors and pages (of messages and
// of the audit log), how headers, step responses and bulk operations are
// kept, how rows of events, actions and topology objects are read (a time
// column of either database through Time), and the flow of a bulk
// operation's batches (RunBulk) and of a payload's erasure (Erase) over the
// reads and writes each store gives. What differs between the databases
// (the statements, placeholders, locking and the classes of their errors)
// stays in each store.
package sqlstore
