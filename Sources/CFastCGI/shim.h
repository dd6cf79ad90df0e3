#ifndef CFASTCGI_SHIM_H
#define CFASTCGI_SHIM_H
#include <fcgiapp.h>
#include <fastcgi.h>
/* epoll, which Glibc's Swift module map leaves out: the FastCGI connection dispatcher. */
#include <sys/epoll.h>
#endif
