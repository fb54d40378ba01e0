// SQLite calls that Swift cannot make directly: sqlite3_db_config is variadic. The same libsqlite3 that GRDB
// links (GRDBSQLite); this module only adds static inline shims.
#include <sqlite3.h>

/// Keeps the write-ahead log when the last connection closes, instead of checkpointing it into the database and
/// truncating it. Why (see StateDatabase.swift): the close-time checkpoint flushes the log and the database, and
/// the next run's first commit writes a new log header and flushes it and its folder: four flushes a run, which
/// cost a no-change run more than all its other work whenever the disk is busy. Returns an SQLite result code.
static inline int folio_sqlite3_keep_wal_on_close(sqlite3 *db) {
    return sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, (int *)0);
}
