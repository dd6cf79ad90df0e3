import TodoSyncServer

// The shipping responder: no test hooks are linked in (`todosync-test` has them).
TodoSyncCommand.main()
