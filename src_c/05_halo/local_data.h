/* The local data of one rank, GeoFEM style (course/parallel/local.py, LocalData): fem3d_mpi_c
 * builds it from PX x PY x PZ blocks or reads it from the file PREFIX.RANK that
 *   python -m course partition ... --out PREFIX
 * writes for any partition (the format: FILE_FORMAT in course/parallel/local.py; text, one group of
 * values per line, blocks of numbers 10 to a line, every local index and offset 0-based).
 *
 * Local numbering: the n_internal internal (owned) nodes first, then the external ones grouped by
 * owner; the import and export tables are those of halo.h. */
#ifndef COURSE_LOCAL_DATA_H
#define COURSE_LOCAL_DATA_H
#include <mpi.h>

typedef struct {
    int rank, size;          /* this rank, and the ranks of the partition */
    int n_internal, n_local, n_elem, n_neighbours;
    int *global_ids;         /* n_local: the global node number of each local node */
    int *element_ids;        /* n_elem: the global element number of each local element */
    int *elements;           /* 8 n_elem: the LOCAL corners of each local element, fem3d's order */
    int *neighbours;         /* n_neighbours ranks, ascending */
    int *import_ptr, *import_index, *export_ptr, *export_index;   /* halo.h */
} local_data;

/* what the functions below return: 0, or the program's exit status for the failure */
enum { LOCAL_OK = 0, LOCAL_NO_MEMORY = 1, LOCAL_BAD = 2 };

/* frees the arrays of d (those that are not NULL) and sets them to NULL */
void local_data_free(local_data *d);

/* Reads the local data file `path` of rank `rank` of `n_ranks` into d (zeroed by the caller) and
 * checks it against the mesh of the input (nel elements of size `size` along x, y, z): every count
 * before it is allocated, every index against its range. Returns LOCAL_OK, or LOCAL_BAD with a
 * one-line message in msg ("PATH:LINE: what was expected"; never a crash on a bad file), or
 * LOCAL_NO_MEMORY. d must be freed with local_data_free in every case. */
int read_local_data(const char *path, const int nel[3], const double size[3], int rank,
                    int n_ranks, local_data *d, char *msg, int msg_size);

/* Collective: the tables of all ranks fit together, so that the halo exchange can neither hang
 * nor truncate a message (q is a neighbour of r exactly when r is a neighbour of q, and r imports
 * from q as many values as q exports to r). `name` names d in the message. LOCAL_OK, or the
 * status and message of this rank (LOCAL_BAD if it found a mismatch). */
int check_local_tables(const local_data *d, const char *name, MPI_Comm comm, char *msg,
                       int msg_size);

/* Collective, after check_local_tables: one halo exchange of the global node numbers, which must
 * arrive where import_index puts them (x, send_buf and recv_buf: the work arrays of the exchange,
 * n_local, export and import entries). LOCAL_OK, or LOCAL_BAD with a message. */
int check_local_halo(const local_data *d, double *restrict x, double *restrict send_buf,
                     double *restrict recv_buf, const char *name, MPI_Comm comm, char *msg,
                     int msg_size);

#endif
