/* SPDX-License-Identifier: MIT */
/*
 * What reaches a terminal. Function and file names, argument values, stack
 * frames, pod names and messages come from traced programs, their files and
 * the API server; a terminal takes some bytes as commands (ESC starts the
 * sequences that set its title, fill the clipboard or clear the screen, and
 * so does a C1 control such as U+009B). Every such byte is shown instead, as
 * a visible escape:
 *
 *   - C0 controls but tab and newline, and DEL: "\x1b", "\x07", "\x7f";
 *   - C1 controls (U+0080..U+009F): their UTF-8 bytes, "\xc2\x9b";
 *   - a byte that is no part of well-formed UTF-8: "\xff".
 *
 * Other UTF-8 (Go's "·", a name in any script) passes as it is.
 */
#ifndef RETWATCH_TERMSAFE_H
#define RETWATCH_TERMSAFE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include <cjson/cJSON.h>

/* Whether s (n bytes) has a byte that would be escaped. */
bool termsafe__needs(const char *s, size_t n);

/*
 * JSON text (as cJSON prints it: C0 already \u-escaped) whose strings hold no
 * such byte, the same values still: DEL and C1 as \u007f..\u009f; a byte that
 * is no part of well-formed UTF-8, which JSON cannot hold, as \ufffd. A new
 * string (free() it), or NULL when out of memory.
 */
char *termsafe__json(const char *text);

/* v printed as JSON (indented or not) and a newline, through termsafe__json().
 * 0, or -ENOMEM. */
int termsafe__print_json(FILE *f, const cJSON *v, bool indented);

/*
 * A stream that writes what it is given to fd, escaped as above, keeping a
 * UTF-8 sequence cut between two writes whole: the program's stdout and
 * stderr go through it, so that no string printed reaches the terminal raw.
 * NULL and errno when it cannot be made.
 */
FILE *termsafe__stream(int fd);

/* Puts the program's stdout and stderr through termsafe__stream(); they stay
 * as they were where it cannot. */
void termsafe__install(void);

/*
 * Columns s takes on a terminal as termsafe__cell() prints it: 4 for each
 * byte shown as an escape (tab and newline too: a cell stays on its line),
 * 2 for an East Asian wide or fullwidth character, 0 for a combining mark or
 * a zero-width character, 1 for any other: tables of Unicode's ranges in
 * termsafe.c, not the user's locale, so that a table is the same whatever
 * LANG says.
 */
size_t termsafe__width(const char *s);

/*
 * s as a left-aligned table cell of width columns: whole, and padded with
 * spaces to width unless last (a row's last column); when it takes more, cut
 * at a character's end (never inside a UTF-8 sequence or an escape) with
 * "…" (U+2026) as its last column. Escapes are written as the
 * stream above writes them, so a cell takes the same columns on any FILE.
 * width < 0: whole, no padding. Returns the columns written.
 */
size_t termsafe__cell(FILE *f, const char *s, int width, bool last);

/* Writes seq (the program's own terminal control, such as clearing the
 * screen) to f's descriptor as it is, after what f holds. */
void termsafe__control(FILE *f, int fd, const char *seq);

#endif
