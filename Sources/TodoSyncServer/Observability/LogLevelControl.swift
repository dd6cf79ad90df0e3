import Logging
import Synchronization

/// The process's log level, read by every log handler at each call, so that a reload (SIGHUP,
/// `todosync serve`) changes it for loggers that already exist. One atomic load per log call.
enum LogLevelControl {
    private static let current = Atomic<UInt8>(Logger.Level.info.index)

    static var level: Logger.Level {
        get { Logger.Level.allCases[Int(current.load(ordering: .relaxed))] }
        set { current.store(newValue.index, ordering: .relaxed) }
    }
}

private extension Logger.Level {
    var index: UInt8 { UInt8(Logger.Level.allCases.firstIndex(of: self)!) }
}

/// Wraps the chosen handler so that its level is ``LogLevelControl/level`` (setting a logger's
/// level sets the process's).
struct ProcessLevelLogHandler: LogHandler {
    var wrapped: any LogHandler

    var logLevel: Logger.Level {
        get { LogLevelControl.level }
        set { LogLevelControl.level = newValue }
    }

    var metadata: Logger.Metadata {
        get { wrapped.metadata }
        set { wrapped.metadata = newValue }
    }

    var metadataProvider: Logger.MetadataProvider? {
        get { wrapped.metadataProvider }
        set { wrapped.metadataProvider = newValue }
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { wrapped[metadataKey: key] }
        set { wrapped[metadataKey: key] = newValue }
    }

    func log(event: LogEvent) {
        wrapped.log(event: event)
    }
}
