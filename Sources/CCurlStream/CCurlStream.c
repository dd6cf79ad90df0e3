#include "CCurlStream.h"

#if defined(__linux__)
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    CURL *handle;
    const ts_stream_callbacks *callbacks;
    int stopped;
} transfer;

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static void global_init(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

static size_t write_body(char *bytes, size_t size, size_t count, void *user) {
    transfer *t = user;
    size_t length = size * count;
    long status = 0;
    curl_easy_getinfo(t->handle, CURLINFO_RESPONSE_CODE, &status);
    if (t->callbacks->on_data(t->callbacks->context, status, bytes, length) != 0
        || t->callbacks->should_stop(t->callbacks->context) != 0) {
        t->stopped = 1;
        return 0;  // a short count ends the transfer (CURLE_WRITE_ERROR)
    }
    return length;
}

static size_t write_header(char *bytes, size_t size, size_t count, void *user) {
    transfer *t = user;
    size_t length = size * count;
    size_t line = length;
    while (line > 0 && (bytes[line - 1] == '\n' || bytes[line - 1] == '\r')) line--;
    if (t->callbacks->on_header(t->callbacks->context, bytes, line) != 0) {
        t->stopped = 1;
        return 0;
    }
    return length;
}

static int progress(void *user, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d) {
    (void)a; (void)b; (void)c; (void)d;
    transfer *t = user;
    if (t->callbacks->should_stop(t->callbacks->context) != 0) {
        t->stopped = 1;
        return 1;  // aborts with CURLE_ABORTED_BY_CALLBACK
    }
    return 0;
}

int ts_stream_get(const char *url, const char *const *headers, int header_count, long idle_seconds,
                  long connect_seconds, const char *ca_file, const ts_stream_callbacks *callbacks,
                  long *status, char *error, size_t error_size) {
    pthread_once(&global_once, global_init);
    *status = 0;
    if (error_size > 0) error[0] = 0;
    CURL *handle = curl_easy_init();
    if (handle == NULL) {
        snprintf(error, error_size, "libcurl: no easy handle");
        return -1;
    }
    char message[CURL_ERROR_SIZE] = {0};
    struct curl_slist *list = NULL;
    for (int i = 0; i < header_count; i++) list = curl_slist_append(list, headers[i]);
    transfer t = {handle, callbacks, 0};
    curl_easy_setopt(handle, CURLOPT_URL, url);
    curl_easy_setopt(handle, CURLOPT_HTTPHEADER, list);
    curl_easy_setopt(handle, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(handle, CURLOPT_ERRORBUFFER, message);
    curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, write_body);
    curl_easy_setopt(handle, CURLOPT_WRITEDATA, &t);
    curl_easy_setopt(handle, CURLOPT_HEADERFUNCTION, write_header);
    curl_easy_setopt(handle, CURLOPT_HEADERDATA, &t);
    curl_easy_setopt(handle, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(handle, CURLOPT_XFERINFOFUNCTION, progress);
    curl_easy_setopt(handle, CURLOPT_XFERINFODATA, &t);
    curl_easy_setopt(handle, CURLOPT_CONNECTTIMEOUT, connect_seconds);
    // No byte for idle_seconds (the server pings every 30 s at least): the stream is dead.
    curl_easy_setopt(handle, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(handle, CURLOPT_LOW_SPEED_TIME, idle_seconds);
    curl_easy_setopt(handle, CURLOPT_TCP_KEEPALIVE, 1L);
    if (ca_file != NULL && ca_file[0] != 0) curl_easy_setopt(handle, CURLOPT_CAINFO, ca_file);
    CURLcode code = curl_easy_perform(handle);
    curl_easy_getinfo(handle, CURLINFO_RESPONSE_CODE, status);
    int result = 0;
    if (t.stopped) {
        result = 1;
    } else if (code != CURLE_OK) {
        snprintf(error, error_size, "%s", message[0] ? message : curl_easy_strerror(code));
        result = -1;
    }
    curl_slist_free_all(list);
    curl_easy_cleanup(handle);
    return result;
}

#else

#include <stdio.h>

int ts_stream_get(const char *url, const char *const *headers, int header_count, long idle_seconds,
                  long connect_seconds, const char *ca_file, const ts_stream_callbacks *callbacks,
                  long *status, char *error, size_t error_size) {
    (void)url; (void)headers; (void)header_count; (void)idle_seconds; (void)connect_seconds;
    (void)ca_file; (void)callbacks;
    *status = 0;
    snprintf(error, error_size, "libcurl streams are used on Linux only");
    return -1;
}

#endif
