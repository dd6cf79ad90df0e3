#ifndef CARGON2_SHIM_H
#define CARGON2_SHIM_H
#include <argon2.h>
#endif
