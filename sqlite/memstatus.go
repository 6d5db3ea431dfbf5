package sqlite

/*
// SQLite's own configuration call, compiled in by the driver. Its
// arguments are variadic, which Go cannot pass: the wrappers below can.
int sqlite3_config(int, ...);
long long sqlite3_memory_used(void);

// SQLITE_CONFIG_MEMSTATUS of sqlite3.h.
static int memstatus(int on) { return sqlite3_config(9, on); }
*/
import "C"

// SQLite counts every allocation it makes for sqlite3_memory_used, under
// a mutex of its own, unless told otherwise before its first connection:
// courier reads no such count, and the mutex was 2.5 % of the CPU of a
// delivery. The call fails, and changes nothing, if SQLite is in use
// already.
func init() { C.memstatus(0) }

// memoryUsed is SQLite's count of the memory it holds: 0 while it counts
// nothing.
func memoryUsed() int64 { return int64(C.sqlite3_memory_used()) }
