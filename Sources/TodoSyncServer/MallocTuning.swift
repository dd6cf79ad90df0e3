#if canImport(Glibc)
import Glibc
#endif

/// glibc malloc settings the responder needs, owned here rather than by each script or unit that
/// starts it (the dev stack, the systemd units). An operator's MALLOC_ARENA_MAX or
/// MALLOC_MMAP_THRESHOLD_ or MALLOC_TRIM_THRESHOLD_ in the environment wins.
///
/// Two arenas: glibc otherwise gives each busy worker thread its own arena and keeps what it
/// frees, which grows RSS by tens of MB under load. A fixed 1 MiB mmap threshold: Argon2's
/// 19 MiB blocks are then always mmapped and returned on free (glibc's dynamic threshold would
/// keep ~19 MiB per worker after its first login). An 8 MiB trim threshold: with glibc's 128 KiB
/// each response of a few hundred KB (a pull page's arrays and body) gave its memory back to the
/// kernel when freed and faulted it in again on the next request (measured: 25–29 page faults
/// and ~110 µs of system CPU per pull page of 500, a sixth of the responder's CPU for it); at
/// most 8 MiB stay free at the top of each of the two arenas. Call before the worker threads start.
enum MallocTuning {
    static func apply(environment: [String: String]) {
        #if canImport(Glibc)
        // mallopt(3) is not in Swift's Glibc module: look it up in the process (glibc is always
        // linked dynamically). The parameters are glibc's <malloc.h> constants.
        typealias Mallopt = @convention(c) (Int32, Int32) -> Int32
        guard let handle = dlopen(nil, RTLD_NOW), let symbol = dlsym(handle, "mallopt") else { return }
        let mallopt = unsafeBitCast(symbol, to: Mallopt.self)
        let arenaMax: Int32 = -8, mmapThreshold: Int32 = -3, trimThreshold: Int32 = -1 // M_ARENA_MAX, M_MMAP_THRESHOLD, M_TRIM_THRESHOLD
        if environment["MALLOC_ARENA_MAX"] == nil { _ = mallopt(arenaMax, 2) }
        if environment["MALLOC_MMAP_THRESHOLD_"] == nil { _ = mallopt(mmapThreshold, 1 << 20) }
        if environment["MALLOC_TRIM_THRESHOLD_"] == nil { _ = mallopt(trimThreshold, 8 << 20) }
        #endif
    }
}
