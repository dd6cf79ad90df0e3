#ifndef CISAL_SHIM_H
#define CISAL_SHIM_H
#include <isa-l/igzip_lib.h>
/// igzip's default level-1 buffer size (an expression macro, which Swift does not import).
static const unsigned int cisal_level1_buffer_size = ISAL_DEF_LVL1_DEFAULT;
#endif
