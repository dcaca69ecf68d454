#include "input.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

int input_quiet = 0;

void input_fail(const input_file *in, const char *fmt, ...)
{
    if (!input_quiet) {
        va_list ap;
        fprintf(stderr, "%s: %s:%d: ", in->prog, in->path, in->line);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
    }
    exit(2);
}

void input_open(input_file *in, const char *prog, const char *path)
{
    in->prog = prog;
    in->path = path;
    in->line = 0;
    in->file = fopen(path, "r");
    if (in->file == NULL) {
        if (!input_quiet)
            fprintf(stderr, "%s: %s: cannot open input file: %s\n", prog, path,
                    strerror(errno));
        exit(2);
    }
}

void input_close(input_file *in)
{
    fclose(in->file);
    in->file = NULL;
}

void input_line(input_file *in, char *buf, int size, const char *what)
{
    in->line++;
    if (fgets(buf, size, in->file) == NULL)
        input_fail(in, "missing line, expected %s", what);
    if (strchr(buf, '\n') == NULL && !feof(in->file))
        input_fail(in, "line longer than %d characters", size - 2);
}

/* The next whitespace-separated token of *cursor (copied into tok), or a message. */
static int next_token(char **cursor, char *tok, int size)
{
    char *s = *cursor + strspn(*cursor, " \t\r\n,");
    size_t len = strcspn(s, " \t\r\n,");
    if (len == 0 || len >= (size_t)size)
        return 0;
    memcpy(tok, s, len);
    tok[len] = '\0';
    *cursor = s + len;
    return 1;
}

int input_word_int(const char *tok, int *value)
{
    char *end;
    errno = 0;
    long v = strtol(tok, &end, 10);
    if (end == tok || *end != '\0' || errno != 0 || v < INT_MIN || v > INT_MAX)
        return 0;
    *value = (int)v;
    return 1;
}

int input_word_real(const char *tok, double *value)
{
    char num[128];                        /* a copy: Fortran's 1.0d-8 becomes 1.0e-8 */
    if (strlen(tok) >= sizeof num)
        return 0;
    strcpy(num, tok);
    for (char *c = num; *c; c++)
        if (*c == 'd' || *c == 'D')
            *c = 'e';
    char *end;
    errno = 0;
    double v = strtod(num, &end);         /* reject inf, nan and hex, which strtod takes */
    if (end == num || *end != '\0' || errno != 0 || !isfinite(v) || strpbrk(tok, "xX") != NULL)
        return 0;
    *value = v;
    return 1;
}

void input_ints(input_file *in, int count, int *values, const char *what)
{
    char buf[1024];
    input_line(in, buf, sizeof buf, what);
    input_parse_ints(in, buf, count, values, what);
}

void input_parse_ints(const input_file *in, char *line, int count, int *values, const char *what)
{
    char tok[128];
    char *cursor = line;
    for (int i = 0; i < count; i++) {
        if (!next_token(&cursor, tok, sizeof tok))
            input_fail(in, "expected %d integer(s) (%s), found %d", count, what, i);
        if (!input_word_int(tok, values + i))
            input_fail(in, "expected an integer (%s), got '%s'", what, tok);
    }
}

void input_reals(input_file *in, int count, double *values, const char *what)
{
    char buf[1024];
    input_line(in, buf, sizeof buf, what);
    char *cursor = buf;
    input_parse_reals(in, &cursor, count, values, what);
}

void input_parse_reals(const input_file *in, char **cursor, int count, double *values,
                       const char *what)
{
    char tok[128];
    for (int i = 0; i < count; i++) {
        if (!next_token(cursor, tok, sizeof tok))
            input_fail(in, "expected %d real number(s) (%s), found %d", count, what, i);
        if (!input_word_real(tok, values + i))
            input_fail(in, "expected a real number (%s), got '%s'", what, tok);
    }
}

int input_next_word(char **cursor, char *word, int size)
{
    return next_token(cursor, word, size);
}

void input_require_positive(const input_file *in, double value, const char *what)
{
    if (!(value > 0.0))
        input_fail(in, "%s must be positive, got %g", what, value);
}

int input_choice(input_file *in, int count, const char *const *choices, const char *what)
{
    char buf[1024], tok[128];
    input_line(in, buf, sizeof buf, what);
    char *cursor = buf;
    if (!next_token(&cursor, tok, sizeof tok))
        input_fail(in, "expected a word (%s), found none", what);
    for (int i = 0; i < count; i++)
        if (strcmp(tok, choices[i]) == 0)
            return i;
    char list[512] = "";                  /* "xmin, xmax, ..." for the message */
    for (int i = 0; i < count; i++) {
        if (i > 0)
            strncat(list, ", ", sizeof list - strlen(list) - 1);
        strncat(list, choices[i], sizeof list - strlen(list) - 1);
    }
    input_fail(in, "expected one of %s (%s), got '%s'", list, what, tok);
    return -1;                            /* not reached: input_fail exits */
}
