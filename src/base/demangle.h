/* SPDX-License-Identifier: MIT */
/*
 * C++ (Itanium ABI) and Rust (legacy and v0) symbol names made readable, by
 * libiberty's demangler. Names come from container-controlled files: the
 * input and the output are bounded, so a hostile name costs at most a few
 * microseconds and no memory.
 */
#ifndef RETWATCH_DEMANGLE_H
#define RETWATCH_DEMANGLE_H

#include <stdbool.h>
#include <stddef.h>

/* Longer mangled names are left as they are (real ones stay far below). */
#define DEMANGLE_MAX_IN 4096
/* A demangled name longer than this is not used. */
#define DEMANGLE_MAX_OUT 4096

/*
 * Writes the demangled name into buf (len bytes, at most DEMANGLE_MAX_OUT
 * used): C++ with its parameter list and qualifiers when params is true,
 * without when false ("shop::Cart::total"); Rust without the hash suffix or
 * crate disambiguators ("main::compute"). False, buf untouched, when name is
 * no mangled C++ or Rust name or exceeds a bound.
 */
bool demangle(const char *name, bool params, char *buf, size_t len);

#endif
