// One long-lived HTTP GET through libcurl's easy interface, for the client's live stream on Linux.
//
// Why not URLSession there: FoundationNetworking (swift-corelibs-foundation) keeps the libdispatch
// write source it created while the request was being sent until the transfer ends, and a
// connected socket is always writable, so an open stream spins a core (measured: 8 s of CPU in
// 10 s for an idle `watch`; docs/CLIENT.md). libcurl itself (which FoundationNetworking is built
// on) waits in poll(2) and costs nothing while the stream is idle.
#ifndef CCURLSTREAM_H
#define CCURLSTREAM_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Callbacks of one transfer; `context` is passed back to each.
typedef struct {
    void *context;
    /// A received header line (without CR LF). Return 0 to go on.
    int (*on_header)(void *context, const char *line, size_t length);
    /// Received body bytes, with the response's status. Return 0 to go on, non-zero to stop.
    int (*on_data)(void *context, long status, const char *bytes, size_t length);
    /// Polled about once a second and on every chunk: non-zero stops the transfer.
    int (*should_stop)(void *context);
} ts_stream_callbacks;

/// Runs the GET until the server ends it, the connection breaks, `idle_seconds` pass without a
/// byte, or a callback stops it. `headers`: "Name: value" strings, `header_count` of them.
/// `ca_file`: a CA bundle to trust instead of the system's (NULL: the system's). Returns 0 when
/// the server ended the response, 1 when a callback stopped it, -1 for a failure described in
/// `error` (at least 256 bytes). `status` receives the HTTP status (0 if none arrived).
int ts_stream_get(const char *url, const char *const *headers, int header_count, long idle_seconds,
                  long connect_seconds, const char *ca_file, const ts_stream_callbacks *callbacks,
                  long *status, char *error, size_t error_size);

#ifdef __cplusplus
}
#endif

#endif
