import TodoSyncServer
import TodoSyncTestHooks

// `todosync` with the test hooks linked in: `serve --enable-test-hooks` installs them. Built by
// `scripts/stack.sh build` when TODOSYNC_ENABLE_TEST_HOOKS=1 (the test stack, the benchmarks);
// never shipped (Tests/integration/test_release_binary.py checks the release binary has none).
TodoSyncCommand.testHooks = TestHooks()
TodoSyncCommand.main()
