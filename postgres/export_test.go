package postgres

// GroupedStatements counts the ingest statements that served more than one
// call, for the tests of group commit.
func (s *Store) GroupedStatements() int64 { return s.grouped.Load() }
