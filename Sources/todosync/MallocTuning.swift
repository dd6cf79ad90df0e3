#if canImport(Glibc)
import Glibc
#endif

/// glibc malloc settings the responder needs, owned here rather than by each script or unit that
/// starts it (the dev stack, the systemd units). An operator's MALLOC_ARENA_MAX or
/// MALLOC_MMAP_THRESHOLD_ in the environment wins.
///
/// Two arenas: glibc otherwise gives each busy worker thread its own arena and keeps what it
/// frees, which grows RSS by tens of MB under load. A fixed 1 MiB mmap threshold: Argon2's
/// 19 MiB blocks are then always mmapped and returned on free (glibc's dynamic threshold would
/// keep ~19 MiB per worker after its first login). Call before the worker threads start.
enum MallocTuning {
    static func apply(environment: [String: String]) {
        #if canImport(Glibc)
        // mallopt(3) is not in Swift's Glibc module: look it up in the process (glibc is always
        // linked dynamically). The parameters are glibc's <malloc.h> constants.
        typealias Mallopt = @convention(c) (Int32, Int32) -> Int32
        guard let handle = dlopen(nil, RTLD_NOW), let symbol = dlsym(handle, "mallopt") else { return }
        let mallopt = unsafeBitCast(symbol, to: Mallopt.self)
        let arenaMax: Int32 = -8, mmapThreshold: Int32 = -3 // M_ARENA_MAX, M_MMAP_THRESHOLD
        if environment["MALLOC_ARENA_MAX"] == nil { _ = mallopt(arenaMax, 2) }
        if environment["MALLOC_MMAP_THRESHOLD_"] == nil { _ = mallopt(mmapThreshold, 1 << 20) }
        #endif
    }
}
