"""An MPI monitor for the check of the learner's halo exchange: a small library of MPI profiling
(PMPI) wrappers, preloaded into every rank of the check job (LD_PRELOAD), that watches the
learner's point-to-point calls while a *window* is open (course.grading.halo_driver opens one
around each call of the learner's halo_exchange):

* requests: every request made (MPI_Isend, MPI_Irecv, MPI_Issend, MPI_Ibsend, MPI_Irsend, and the
  persistent MPI_Send_init, MPI_Recv_init, ... once started) and every one completed or freed
  (MPI_Wait, Waitall, Waitany, Waitsome, MPI_Test and its kin, MPI_Request_free). What is still
  outstanding when the window closes is a request leak: `end()` says how many of each kind. A
  persistent request that has completed is not outstanding (it may be kept for the next call);
* communicators: a point-to-point call on a communicator that is neither the one the learner was
  given nor a copy of it (same ranks in the same order: MPI_Comm_compare says IDENT or CONGRUENT)
  is written at once to stdout as a line `course-mpi-monitor: {"event": "foreign_comm", ...}`
  (once per process); on MPI_COMM_WORLD, the job is then aborted at once (the task forbids it, and
  the job would deadlock or compute wrong values), on another communicator the line is what says
  why the job went wrong, if it does;
* errors: an MPI call that fails in the window (MPI_ERR_TRUNCATE: a receive smaller than its
  message) is written as a line `course-mpi-monitor: {"event": "mpi_error", ...}` that names the
  call, the error and, for a failed request, the call that made it (its peer, count and tag); then
  the whole job is aborted at once (MPI_Abort), instead of waiting for a timeout.

Which calls it sees: C code and mpi4py call the MPI_ functions, which the library defines; Open
MPI's Fortran bindings (mpif.h, mpi and mpi_f08 modules: ompi_isend_f and its kin in
libmpi_mpifh) call the PMPI_ functions, which it defines too (each forwards to the MPI library's
own, found with dlsym(RTLD_NEXT)). Another MPI's Fortran bindings may go around PMPI_ (and a
request made there but completed unseen would look leaked): with it, a Fortran exchange is checked
without the monitor (`fortran_seen()`). Without mpicc the monitor is not built (`library()` gives
None), and where it is not preloaded `Window` does nothing: the check then runs without it (no
request counts; the communicator and MPI errors are still caught by the driver itself).

    lib = library()                         # the shared library, built once per user and MPI
    job = run_watched(..., preload=lib)     # course.parallel.mpi_job
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from .. import cache

LINE = "course-mpi-monitor: "       # what the library's lines on stdout start with
ENVIRONMENT = "COURSE_MPI_MONITOR"  # set in the job to the library's path, for `Window`

SOURCE = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* --- the requests of the window ---------------------------------------------------------- */

/* the calls that make a request (up to STARTED), and the blocking ones (named in errors only) */
enum { ISEND, ISSEND, IBSEND, IRSEND, IRECV, SEND_INIT, SSEND_INIT, BSEND_INIT, RSEND_INIT,
       RECV_INIT, STARTED, SEND, SSEND, BSEND, RSEND, RECV, SENDRECV, SENDRECV_REPLACE, KINDS };
static const char *const KIND[KINDS] = {
    "MPI_Isend", "MPI_Issend", "MPI_Ibsend", "MPI_Irsend", "MPI_Irecv", "MPI_Send_init",
    "MPI_Ssend_init", "MPI_Bsend_init", "MPI_Rsend_init", "MPI_Recv_init", "MPI_Start",
    "MPI_Send", "MPI_Ssend", "MPI_Bsend", "MPI_Rsend", "MPI_Recv", "MPI_Sendrecv",
    "MPI_Sendrecv_replace"};

typedef struct {
    MPI_Request request;
    int kind, persistent, active, peer, count, tag;
    MPI_Datatype type;
} Tracked;

enum { MAX_TRACKED = 8192, MAX_SAVED = 8192 };
static Tracked tracked[MAX_TRACKED];
static int n_tracked, watching, overflow, foreign_calls, foreign_said, in_call, given_rank,
    have_handler;
static MPI_Comm given;
static MPI_Errhandler saved_given, saved_world, on_error_handler;
static MPI_Request saved[MAX_SAVED];      /* the handles a completion call was given */
static MPI_Status own_statuses[MAX_SAVED];

#define REAL(fn) static __typeof__(&fn) real_##fn;                                      \
    if (real_##fn == NULL) real_##fn = (__typeof__(&fn))dlsym(RTLD_NEXT, #fn)

static Tracked *find(MPI_Request request)
{
    for (int i = 0; i < n_tracked; i++)
        if (tracked[i].request == request)
            return &tracked[i];
    return NULL;
}

static void made(int rc, int kind, MPI_Request request, int peer, int count, int tag,
                 MPI_Datatype type)
{
    if (!watching || rc != MPI_SUCCESS)
        return;
    if (n_tracked == MAX_TRACKED) {
        overflow = 1;
        return;
    }
    Tracked t = {request, kind, kind >= SEND_INIT, kind < SEND_INIT, peer, count, tag, type};
    tracked[n_tracked++] = t;
}

static void started(MPI_Request request)
{
    Tracked *t = find(request);
    if (t != NULL)
        t->active = 1;
    else if (watching && n_tracked < MAX_TRACKED) {     /* made before the window */
        Tracked s = {request, STARTED, 1, 1, -1, -1, -1, MPI_DATATYPE_NULL};
        tracked[n_tracked++] = s;
    }
}

static void completed(MPI_Request request, int freed)
{
    Tracked *t = find(request);
    if (t == NULL)
        return;
    if (t->persistent && !freed)
        t->active = 0;
    else
        *t = tracked[--n_tracked];
}

/* the handles a completion call is given (it overwrites them); 0 if there are too many (the
 * counts are then unknown: overflow) */
static int save(int count, const MPI_Request *requests)
{
    if (count < 0 || count > MAX_SAVED) {
        overflow = 1;
        return 0;
    }
    memcpy(saved, requests, (size_t)count * sizeof *requests);
    return 1;
}

/* --- lines on stdout ------------------------------------------------------------------------ */

static void say(const char *json)
{
    char line[1024];
    int n = snprintf(line, sizeof line, "course-mpi-monitor: %s\n", json);
    if (n > 0 && write(1, line, (size_t)(n < (int)sizeof line ? n : (int)sizeof line - 1)) < 0)
        return;
}

static const char *class_name(int class)
{
    static const struct { int class; const char *name; } names[] = {
        {MPI_ERR_TRUNCATE, "MPI_ERR_TRUNCATE"}, {MPI_ERR_COUNT, "MPI_ERR_COUNT"},
        {MPI_ERR_RANK, "MPI_ERR_RANK"}, {MPI_ERR_TAG, "MPI_ERR_TAG"},
        {MPI_ERR_COMM, "MPI_ERR_COMM"}, {MPI_ERR_TYPE, "MPI_ERR_TYPE"},
        {MPI_ERR_BUFFER, "MPI_ERR_BUFFER"}, {MPI_ERR_REQUEST, "MPI_ERR_REQUEST"},
        {MPI_ERR_ARG, "MPI_ERR_ARG"}, {MPI_ERR_IN_STATUS, "MPI_ERR_IN_STATUS"}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].class == class)
            return names[i].name;
    return "MPI_ERR_OTHER";
}

static void clean(char *text)       /* a string fit for JSON */
{
    for (char *c = text; *c; c++)
        if (*c == '"' || *c == '\\' || (unsigned char)*c < ' ')
            *c = '\'';
}

/* the error `code` of `call` on stdout, with the request it concerns (`t`: the call that made
 * it, peer, count, datatype and tag; NULL if not known); then the whole job ends at once */
static void failed(const char *call, int code, const Tracked *t)
{
    int class, length, size = 0;
    char text[MPI_MAX_ERROR_STRING] = "", type[MPI_MAX_OBJECT_NAME] = "", json[1000];
    PMPI_Error_class(code, &class);
    PMPI_Error_string(class, text, &length);
    clean(text);
    if (t != NULL && t->type != MPI_DATATYPE_NULL) {
        PMPI_Type_get_name(t->type, type, &length);
        PMPI_Type_size(t->type, &size);
        clean(type);
    }
    snprintf(json, sizeof json, "{\"event\": \"mpi_error\", \"rank\": %d, \"call\": \"%s\", "
             "\"error\": \"%s\", \"text\": \"%s\", \"request\": \"%s\", \"peer\": %d, "
             "\"count\": %d, \"type\": \"%s\", \"type_size\": %d, \"tag\": %d}",
             given_rank, call, class_name(class), text, t != NULL ? KIND[t->kind] : call,
             t != NULL ? t->peer : -1, t != NULL ? t->count : -1, type, size,
             t != NULL ? t->tag : -1);
    say(json);
    PMPI_Abort(MPI_COMM_WORLD, 3);
}

/* after a completion call over `count` saved requests: the failed one, if there is one */
static void check_statuses(const char *call, int rc, int count, const MPI_Status *statuses)
{
    if (rc == MPI_SUCCESS || !watching)
        return;
    if (rc == MPI_ERR_IN_STATUS && statuses != NULL)
        for (int i = 0; i < count; i++)
            if (statuses[i].MPI_ERROR != MPI_SUCCESS && statuses[i].MPI_ERROR != MPI_ERR_PENDING)
                failed(call, statuses[i].MPI_ERROR, find(saved[i]));
    failed(call, rc, count == 1 ? find(saved[0]) : NULL);
}

/* after a call that is not a completion: its own arguments say what it was */
static void check_call(const char *call, int rc, int kind, int peer, int count, int tag,
                       MPI_Datatype type)
{
    if (rc != MPI_SUCCESS && watching) {
        Tracked t = {MPI_REQUEST_NULL, kind, 0, 0, peer, count, tag, type};
        failed(call, rc, kind >= 0 ? &t : NULL);
    }
}

/* a point-to-point call on `comm`: is it the communicator the learner was given? */
static void on(MPI_Comm comm, const char *call)
{
    if (!watching || comm == given || comm == MPI_COMM_NULL)
        return;
    int result;
    if (PMPI_Comm_compare(comm, given, &result) == MPI_SUCCESS
        && (result == MPI_IDENT || result == MPI_CONGRUENT))
        return;
    foreign_calls++;
    if (foreign_said++)
        return;
    char json[300];
    snprintf(json, sizeof json, "{\"event\": \"foreign_comm\", \"rank\": %d, \"call\": \"%s\", "
             "\"comm\": \"%s\"}", given_rank, call,
             comm == MPI_COMM_WORLD ? "MPI_COMM_WORLD" : comm == MPI_COMM_SELF ? "MPI_COMM_SELF"
             : "another communicator");
    say(json);
    if (comm == MPI_COMM_WORLD)     /* wrong whatever follows: end the job now, not by timeout */
        PMPI_Abort(MPI_COMM_WORLD, 4);
}

/* an error in a call that is not wrapped here (a wrapped one reports it itself) */
static void on_error(MPI_Comm *comm, int *code, ...)
{
    (void)comm;
    if (!in_call)
        failed("an MPI call", *code, NULL);
}

/* --- the window: opened and closed by the driver (ctypes) ----------------------------------- */

int course_monitor_begin(MPI_Fint comm)
{
    given = MPI_Comm_f2c(comm);
    PMPI_Comm_rank(given, &given_rank);
    int kept = 0;               /* persistent requests stay known, not active */
    for (int i = 0; i < n_tracked; i++)
        if (tracked[i].persistent) {
            tracked[kept] = tracked[i];
            tracked[kept++].active = 0;
        }
    n_tracked = kept;
    overflow = foreign_calls = 0;
    if (!have_handler)
        have_handler = PMPI_Comm_create_errhandler(on_error, &on_error_handler) == MPI_SUCCESS;
    PMPI_Comm_get_errhandler(given, &saved_given);
    PMPI_Comm_get_errhandler(MPI_COMM_WORLD, &saved_world);
    if (have_handler) {
        PMPI_Comm_set_errhandler(given, on_error_handler);
        PMPI_Comm_set_errhandler(MPI_COMM_WORLD, on_error_handler);
    }
    watching = 1;
    return 1;
}

/* closes the window; a JSON object: the requests still outstanding, by the call that made them */
const char *course_monitor_end(void)
{
    static char json[1024];
    int outstanding[KINDS] = {0}, n = 0;
    watching = 0;
    PMPI_Comm_set_errhandler(given, saved_given);
    PMPI_Comm_set_errhandler(MPI_COMM_WORLD, saved_world);
    PMPI_Errhandler_free(&saved_given);
    PMPI_Errhandler_free(&saved_world);
    for (int i = 0; i < n_tracked; i++)
        if (tracked[i].active)
            outstanding[tracked[i].kind]++;
    n += snprintf(json + n, sizeof json - (size_t)n, "{\"overflow\": %d, \"foreign\": %d, "
                  "\"outstanding\": {", overflow, foreign_calls);
    for (int k = 0, first = 1; k < KINDS; k++)
        if (outstanding[k]) {
            n += snprintf(json + n, sizeof json - (size_t)n, "%s\"%s\": %d", first ? "" : ", ",
                          KIND[k], outstanding[k]);
            first = 0;
        }
    snprintf(json + n, sizeof json - (size_t)n, "}}");
    return json;
}

/* --- the wrappers: PMPI_x counts and forwards to the library's own; MPI_x calls PMPI_x -------- */

#define CREATE(name, kind, peer_arg, ...)                                                  \
    int PMPI_##name(__VA_ARGS__, MPI_Request *request)                                      \
    {                                                                                       \
        REAL(PMPI_##name);                                                                  \
        on(comm, "MPI_" #name);                                                             \
        in_call++;                                                                          \
        int rc = real_PMPI_##name(buf, count, datatype, peer_arg, tag, comm, request);      \
        in_call--;                                                                          \
        made(rc, kind, *request, peer_arg, count, tag, datatype);                           \
        check_call("MPI_" #name, rc, kind, peer_arg, count, tag, datatype);                 \
        return rc;                                                                          \
    }                                                                                       \
    int MPI_##name(__VA_ARGS__, MPI_Request *request)                                       \
    {                                                                                       \
        return PMPI_##name(buf, count, datatype, peer_arg, tag, comm, request);             \
    }

#define SEND_ARGS const void *buf, int count, MPI_Datatype datatype, int dest, int tag, \
    MPI_Comm comm
#define RECV_ARGS void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm

CREATE(Isend, ISEND, dest, SEND_ARGS)
CREATE(Issend, ISSEND, dest, SEND_ARGS)
CREATE(Ibsend, IBSEND, dest, SEND_ARGS)
CREATE(Irsend, IRSEND, dest, SEND_ARGS)
CREATE(Irecv, IRECV, source, RECV_ARGS)
CREATE(Send_init, SEND_INIT, dest, SEND_ARGS)
CREATE(Ssend_init, SSEND_INIT, dest, SEND_ARGS)
CREATE(Bsend_init, BSEND_INIT, dest, SEND_ARGS)
CREATE(Rsend_init, RSEND_INIT, dest, SEND_ARGS)
CREATE(Recv_init, RECV_INIT, source, RECV_ARGS)

#define BLOCKING_SEND(name, kind)                                                           \
    int PMPI_##name(SEND_ARGS)                                                              \
    {                                                                                       \
        REAL(PMPI_##name);                                                                  \
        on(comm, "MPI_" #name);                                                             \
        in_call++;                                                                          \
        int rc = real_PMPI_##name(buf, count, datatype, dest, tag, comm);                   \
        in_call--;                                                                          \
        check_call("MPI_" #name, rc, kind, dest, count, tag, datatype);                     \
        return rc;                                                                          \
    }                                                                                       \
    int MPI_##name(SEND_ARGS) { return PMPI_##name(buf, count, datatype, dest, tag, comm); }

BLOCKING_SEND(Send, SEND)
BLOCKING_SEND(Ssend, SSEND)
BLOCKING_SEND(Bsend, BSEND)
BLOCKING_SEND(Rsend, RSEND)

int PMPI_Recv(RECV_ARGS, MPI_Status *status)
{
    REAL(PMPI_Recv);
    on(comm, "MPI_Recv");
    in_call++;
    int rc = real_PMPI_Recv(buf, count, datatype, source, tag, comm, status);
    in_call--;
    check_call("MPI_Recv", rc, RECV, source, count, tag, datatype);
    return rc;
}
int MPI_Recv(RECV_ARGS, MPI_Status *status)
{
    return PMPI_Recv(buf, count, datatype, source, tag, comm, status);
}

#define SENDRECV_ARGS const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest,   \
    int sendtag, void *recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag, \
    MPI_Comm comm, MPI_Status *status
int PMPI_Sendrecv(SENDRECV_ARGS)
{
    REAL(PMPI_Sendrecv);
    on(comm, "MPI_Sendrecv");
    in_call++;
    int rc = real_PMPI_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount,
                                recvtype, source, recvtag, comm, status);
    in_call--;
    check_call("MPI_Sendrecv", rc, SENDRECV, source, recvcount, recvtag, recvtype);
    return rc;
}
int MPI_Sendrecv(SENDRECV_ARGS)
{
    return PMPI_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount,
                         recvtype, source, recvtag, comm, status);
}

#define SENDRECV_REPLACE_ARGS void *buf, int count, MPI_Datatype datatype, int dest,        \
    int sendtag, int source, int recvtag, MPI_Comm comm, MPI_Status *status
int PMPI_Sendrecv_replace(SENDRECV_REPLACE_ARGS)
{
    REAL(PMPI_Sendrecv_replace);
    on(comm, "MPI_Sendrecv_replace");
    in_call++;
    int rc = real_PMPI_Sendrecv_replace(buf, count, datatype, dest, sendtag, source, recvtag,
                                        comm, status);
    in_call--;
    check_call("MPI_Sendrecv_replace", rc, SENDRECV_REPLACE, source, count, recvtag, datatype);
    return rc;
}
int MPI_Sendrecv_replace(SENDRECV_REPLACE_ARGS)
{
    return PMPI_Sendrecv_replace(buf, count, datatype, dest, sendtag, source, recvtag, comm,
                                 status);
}

int PMPI_Start(MPI_Request *request)
{
    REAL(PMPI_Start);
    in_call++;
    int rc = real_PMPI_Start(request);
    in_call--;
    if (rc == MPI_SUCCESS && watching)
        started(*request);
    check_call("MPI_Start", rc, -1, -1, -1, -1, MPI_DATATYPE_NULL);
    return rc;
}
int MPI_Start(MPI_Request *request) { return PMPI_Start(request); }

int PMPI_Startall(int count, MPI_Request requests[])
{
    REAL(PMPI_Startall);
    in_call++;
    int rc = real_PMPI_Startall(count, requests);
    in_call--;
    if (rc == MPI_SUCCESS && watching)
        for (int i = 0; i < count; i++)
            started(requests[i]);
    check_call("MPI_Startall", rc, -1, -1, -1, -1, MPI_DATATYPE_NULL);
    return rc;
}
int MPI_Startall(int count, MPI_Request requests[]) { return PMPI_Startall(count, requests); }

int PMPI_Request_free(MPI_Request *request)
{
    REAL(PMPI_Request_free);
    MPI_Request handle = *request;
    in_call++;
    int rc = real_PMPI_Request_free(request);
    in_call--;
    if (rc == MPI_SUCCESS)
        completed(handle, 1);
    check_call("MPI_Request_free", rc, -1, -1, -1, -1, MPI_DATATYPE_NULL);
    return rc;
}
int MPI_Request_free(MPI_Request *request) { return PMPI_Request_free(request); }

/* the statuses a completion call fills: the caller's, or ours where it passed IGNORE */
static MPI_Status *statuses_of(MPI_Status *statuses, int count)
{
    return statuses == MPI_STATUSES_IGNORE && count <= MAX_SAVED ? own_statuses : statuses;
}

int PMPI_Wait(MPI_Request *request, MPI_Status *status)
{
    REAL(PMPI_Wait);
    int known = save(1, request);
    in_call++;
    int rc = real_PMPI_Wait(request, status == MPI_STATUS_IGNORE ? own_statuses : status);
    in_call--;
    if (rc == MPI_SUCCESS && known)
        completed(saved[0], 0);
    check_statuses("MPI_Wait", rc, 1, NULL);
    return rc;
}
int MPI_Wait(MPI_Request *request, MPI_Status *status) { return PMPI_Wait(request, status); }

int PMPI_Test(MPI_Request *request, int *flag, MPI_Status *status)
{
    REAL(PMPI_Test);
    int known = save(1, request);
    in_call++;
    int rc = real_PMPI_Test(request, flag, status == MPI_STATUS_IGNORE ? own_statuses : status);
    in_call--;
    if (rc == MPI_SUCCESS && known && *flag)
        completed(saved[0], 0);
    check_statuses("MPI_Test", rc, 1, NULL);
    return rc;
}
int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status)
{
    return PMPI_Test(request, flag, status);
}

int PMPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[])
{
    REAL(PMPI_Waitall);
    int known = save(count, requests);
    MPI_Status *mine = statuses_of(statuses, count);
    in_call++;
    int rc = real_PMPI_Waitall(count, requests, mine);
    in_call--;
    if (rc == MPI_SUCCESS && known)
        for (int i = 0; i < count; i++)
            completed(saved[i], 0);
    check_statuses("MPI_Waitall", rc, known ? count : 0, mine);
    return rc;
}
int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[])
{
    return PMPI_Waitall(count, requests, statuses);
}

int PMPI_Testall(int count, MPI_Request requests[], int *flag, MPI_Status statuses[])
{
    REAL(PMPI_Testall);
    int known = save(count, requests);
    MPI_Status *mine = statuses_of(statuses, count);
    in_call++;
    int rc = real_PMPI_Testall(count, requests, flag, mine);
    in_call--;
    if (rc == MPI_SUCCESS && known && *flag)
        for (int i = 0; i < count; i++)
            completed(saved[i], 0);
    check_statuses("MPI_Testall", rc, known ? count : 0, mine);
    return rc;
}
int MPI_Testall(int count, MPI_Request requests[], int *flag, MPI_Status statuses[])
{
    return PMPI_Testall(count, requests, flag, statuses);
}

int PMPI_Waitany(int count, MPI_Request requests[], int *index, MPI_Status *status)
{
    REAL(PMPI_Waitany);
    int known = save(count, requests);
    in_call++;
    int rc = real_PMPI_Waitany(count, requests, index,
                               status == MPI_STATUS_IGNORE ? own_statuses : status);
    in_call--;
    if (rc == MPI_SUCCESS && known && *index != MPI_UNDEFINED)
        completed(saved[*index], 0);
    if (rc != MPI_SUCCESS && known && *index >= 0 && *index < count)
        saved[0] = saved[*index];
    check_statuses("MPI_Waitany", rc, 1, NULL);
    return rc;
}
int MPI_Waitany(int count, MPI_Request requests[], int *index, MPI_Status *status)
{
    return PMPI_Waitany(count, requests, index, status);
}

int PMPI_Testany(int count, MPI_Request requests[], int *index, int *flag, MPI_Status *status)
{
    REAL(PMPI_Testany);
    int known = save(count, requests);
    in_call++;
    int rc = real_PMPI_Testany(count, requests, index, flag,
                               status == MPI_STATUS_IGNORE ? own_statuses : status);
    in_call--;
    if (rc == MPI_SUCCESS && known && *flag && *index != MPI_UNDEFINED)
        completed(saved[*index], 0);
    if (rc != MPI_SUCCESS && known && *index >= 0 && *index < count)
        saved[0] = saved[*index];
    check_statuses("MPI_Testany", rc, 1, NULL);
    return rc;
}
int MPI_Testany(int count, MPI_Request requests[], int *index, int *flag, MPI_Status *status)
{
    return PMPI_Testany(count, requests, index, flag, status);
}

#define SOME(name)                                                                          \
    int PMPI_##name(int count, MPI_Request requests[], int *outcount, int indices[],         \
                    MPI_Status statuses[])                                                  \
    {                                                                                       \
        REAL(PMPI_##name);                                                                  \
        int known = save(count, requests);                                                  \
        MPI_Status *mine = statuses_of(statuses, count);                                    \
        in_call++;                                                                          \
        int rc = real_PMPI_##name(count, requests, outcount, indices, mine);                \
        in_call--;                                                                          \
        if (known && *outcount != MPI_UNDEFINED)                                            \
            for (int i = 0; i < *outcount; i++)                                             \
                if (rc == MPI_SUCCESS || mine == MPI_STATUSES_IGNORE                        \
                    || mine[i].MPI_ERROR == MPI_SUCCESS)                                    \
                    completed(saved[indices[i]], 0);                                        \
        if (rc != MPI_SUCCESS && known && mine != MPI_STATUSES_IGNORE                       \
            && *outcount != MPI_UNDEFINED)                                                  \
            for (int i = 0; i < *outcount; i++)                                             \
                if (mine[i].MPI_ERROR != MPI_SUCCESS && mine[i].MPI_ERROR != MPI_ERR_PENDING) \
                    failed("MPI_" #name, mine[i].MPI_ERROR, find(saved[indices[i]]));       \
        check_statuses("MPI_" #name, rc, 0, NULL);                                          \
        return rc;                                                                          \
    }                                                                                       \
    int MPI_##name(int count, MPI_Request requests[], int *outcount, int indices[],          \
                   MPI_Status statuses[])                                                   \
    {                                                                                       \
        return PMPI_##name(count, requests, outcount, indices, statuses);                   \
    }

SOME(Waitsome)
SOME(Testsome)

/* 1: loaded (what the driver asks before it opens a window) */
int course_monitor_loaded(void) { return 1; }
"""


def fortran_seen() -> bool:
    """Whether this MPI's Fortran bindings reach the monitor's wrappers (Open MPI's call the
    PMPI_ functions); for another MPI, a Fortran exchange is checked without the monitor."""
    from mpi4py import MPI

    return MPI.Get_library_version().startswith("Open MPI")


def library() -> Path | None:
    """The monitor's shared library, compiled with mpicc into this user's cache folder (once per
    source and MPI); None where it cannot be built (no mpicc; an MPI it does not compile with)."""
    mpicc = shutil.which("mpicc")
    if mpicc is None:
        return None
    try:
        show = subprocess.run([mpicc, "--showme"], capture_output=True, text=True,
                              timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        show = ""
    digest = hashlib.sha1("\0".join([SOURCE, mpicc, show]).encode()).hexdigest()[:16]
    lib = cache.private_dir("mpi-monitor") / f"course_mpi_monitor-{digest}.so"
    if lib.exists():
        return lib
    built = lib.with_name(f".{lib.name}.{os.getpid()}")   # then renamed: never seen half-written
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "course_mpi_monitor.c"
        source.write_text(SOURCE)
        try:
            result = subprocess.run([mpicc, "-std=c99", "-O1", "-Wall", "-fPIC", "-shared",
                                     str(source), "-o", str(built), "-ldl"],
                                    capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.SubprocessError):
            result = None
    if result is None or result.returncode != 0:
        built.unlink(missing_ok=True)
        return None
    os.replace(built, lib)
    return lib


# --- in the job: the window around one call of the learner's code ---------------------------------

class Window:
    """The monitor as the driver sees it: begin(comm) before the learner's call, end() after it
    (a dict: requests still outstanding by the call that made them, calls on a foreign
    communicator). Where the monitor is not loaded (or, for Fortran, cannot see the calls), both
    do nothing and end() gives None."""

    def __init__(self, fortran: bool = False):
        self.lib = None
        path = os.environ.get(ENVIRONMENT)
        if not path or (fortran and not fortran_seen()):
            return
        try:          # the preloaded library itself (RTLD_NOLOAD: fails if it was not preloaded)
            lib = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_NOW)
            if lib.course_monitor_loaded() != 1:
                return
        except (OSError, AttributeError):
            return
        lib.course_monitor_begin.argtypes = [ctypes.c_int]
        lib.course_monitor_end.restype = ctypes.c_char_p
        self.lib = lib

    @property
    def active(self) -> bool:
        return self.lib is not None

    def begin(self, comm) -> None:
        if self.lib is not None:
            self.lib.course_monitor_begin(comm.py2f())

    def end(self) -> dict | None:
        if self.lib is None:
            return None
        found = json.loads(self.lib.course_monitor_end().decode())
        return None if found["overflow"] else found


def lines(output: str) -> list[dict]:
    """The monitor's events in a job's output (one per line it wrote)."""
    found = []
    for line in output.splitlines():
        at = line.find(LINE)
        if at < 0:
            continue
        try:
            found.append(json.loads(line[at + len(LINE):]))
        except json.JSONDecodeError:
            continue
    return found
