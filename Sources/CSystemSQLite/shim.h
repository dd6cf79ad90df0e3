#ifndef CSYSTEMSQLITE_SHIM_H
#define CSYSTEMSQLITE_SHIM_H
// The system's SQLite (libsqlite3-dev), for the server's snapshot files (docs/SNAPSHOT.md).
// Named apart from GRDB's own SQLite module (GRDBSQLite, the client's): two modules over one
// header in one package build would clash.
#include <sqlite3.h>
#endif
