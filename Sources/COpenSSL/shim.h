#ifndef COPENSSL_SHIM_H
#define COPENSSL_SHIM_H
#include <openssl/sha.h>
#include <openssl/rand.h>
#include <openssl/evp.h>
#endif
