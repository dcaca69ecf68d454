/* Reading Nakajima-style input files: one group of values per line, anything after the values is a
 * comment. Every error prints one line naming the file, the line and what was expected, and exits
 * with status 2. */
#ifndef COURSE_INPUT_H
#define COURSE_INPUT_H
#include <stdio.h>

typedef struct {
    const char *prog;   /* program name, for messages */
    const char *path;   /* file name, for messages */
    FILE *file;
    int line;           /* number of the line read last */
} input_file;

/* Nonzero: the messages are not printed (the exit status stays 2). An MPI program sets it on every
 * rank but rank 0, so that a bad input file, which every rank reads and rejects alike, gives one
 * line, not one per rank. 0 (print) by default. */
extern int input_quiet;

void input_open(input_file *in, const char *prog, const char *path);
void input_close(input_file *in);
/* read the next line and parse `count` values from it; `what` names them in messages */
void input_ints(input_file *in, int count, int *values, const char *what);
void input_reals(input_file *in, int count, double *values, const char *what);
/* the two halves of input_ints, for a line that may hold other things: read the next line into buf
 * (size bytes; a missing or too long line is an error), then parse `count` integers from it */
void input_line(input_file *in, char *buf, int size, const char *what);
void input_parse_ints(const input_file *in, char *line, int count, int *values, const char *what);
/* the number a word spells, as the functions above take it (an int: base 10, within int; a real:
 * also Fortran's 1.0d-8, not inf, nan or hex): 1, or 0 (and *value unchanged) if it is none */
int input_word_int(const char *tok, int *value);
int input_word_real(const char *tok, double *value);
/* the two halves of input_reals, for a line that may hold a word after the values: parse `count`
 * reals from *cursor (a line read by input_line) and move it past them; then input_next_word
 * takes the next word (blanks, tabs and commas separate words) into word (size bytes) and moves
 * *cursor past it: 1, or 0 if there is none (or it is longer than size - 1 characters) */
void input_parse_reals(const input_file *in, char **cursor, int count, double *values,
                       const char *what);
int input_next_word(char **cursor, char *word, int size);
/* exit with a message unless value > 0 (`what` names it) */
void input_require_positive(const input_file *in, double value, const char *what);
/* read the next line; its first word must be one of the `count` words in `choices`: returns its
 * position there (0-based) */
int input_choice(input_file *in, int count, const char *const *choices, const char *what);
/* print "PROG: PATH:LINE: message" (printf-like) on stderr, unless input_quiet, and exit with
 * status 2 (exit() runs the atexit handlers: an MPI program registers one that finalizes MPI) */
void input_fail(const input_file *in, const char *fmt, ...);

#endif
