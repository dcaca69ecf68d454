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
/* exit with a message unless value > 0 (`what` names it) */
void input_require_positive(const input_file *in, double value, const char *what);
/* read the next line; its first word must be one of the `count` words in `choices`: returns its
 * position there (0-based) */
int input_choice(input_file *in, int count, const char *const *choices, const char *what);
/* print "PROG: PATH:LINE: message" (printf-like) on stderr, unless input_quiet, and exit with
 * status 2 (exit() runs the atexit handlers: an MPI program registers one that finalizes MPI) */
void input_fail(const input_file *in, const char *fmt, ...);

#endif
