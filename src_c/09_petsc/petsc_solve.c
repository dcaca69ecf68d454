/* petsc_solve: a linear system solved by PETSc's KSP, the C twin of lecture 09_petsc's petsc4py
 * solves: the library learners use next, from the language most of its users write.
 *
 *   usage: mpiexec -n P petsc_solve_c FILE [PETSc options]
 *
 * FILE is a PETSc binary file that holds the matrix, then the right-hand side (the course writes
 * it: course.parallel.petsc.save_system). PETSc reads it on rank 0 and gives every rank a block
 * of consecutive rows: as many as the line of rank r in FILE.rows says, where that file exists
 * (one count per rank: the partition of another program, e.g. fem3d_mpi_c's blocks), else about
 * as many on every rank. The solver is whatever the options choose (-ksp_type, -pc_type, -ksp_norm_type, ...;
 * course.parallel.petsc.options gives the twin of each course solver), from x0 = 0. Rank 0 prints
 * three lines:
 *   petsc_solve: N rows on P ranks, ksp KSP, pc PC, norm NORM
 *   iterations K, reason R (converged|diverged), true relative residual ||b - A x|| / ||b||
 *   solve S s, U us per iteration
 * Every option must be used by the solve: one that PETSc does not know (a misspelt name) is an
 * error, not a silent default. Exit status, the same on every rank: 0 converged, 1 not converged,
 * 2 bad input (a missing or unreadable FILE, a FILE.rows without one count per rank, an unknown
 * option or value). An error is one line on stderr, from rank 0. */
#include <petscksp.h>
#include <stdio.h>

/* one line on stderr from rank 0 (every rank calls it) */
static void fail(const char *what, const char *detail)
{
    int rank;
    MPI_Comm_rank(PETSC_COMM_WORLD, &rank);
    if (rank == 0)
        fprintf(stderr, "petsc_solve_c: %s%s\n", what, detail);
}

/* PETSc's message for an error code it returned */
static const char *petsc_message(PetscErrorCode code)
{
    const char *text = NULL;
    PetscErrorMessage(code, &text, NULL);
    return text ? text : "unknown error";
}

/* 1 when rank 0 can open the file for reading, on every rank: checked before PETSc opens it, so
 * that a missing file is one line, not PETSc's traceback on rank 0 while the others wait */
static int readable_everywhere(const char *path)
{
    int rank, ok = 0;
    MPI_Comm_rank(PETSC_COMM_WORLD, &rank);
    if (rank == 0) {
        FILE *file = fopen(path, "rb");
        ok = file != NULL;
        if (file)
            fclose(file);
    }
    if (MPI_Bcast(&ok, 1, MPI_INT, 0, PETSC_COMM_WORLD) != MPI_SUCCESS)
        ok = 0;
    return ok;
}

/* This rank's count of rows from the file `path` (one count per rank, rank 0's first) into *rows;
 * PETSC_DECIDE (PETSc's own split) where there is no such file. 1 if the file does not hold one
 * count, >= 0, per rank; the same answer on every rank (each reads the same file). */
static int rows_from_file(const char *path, PetscInt *rows)
{
    int rank, ranks, lines = 0;
    long count;
    MPI_Comm_rank(PETSC_COMM_WORLD, &rank);
    MPI_Comm_size(PETSC_COMM_WORLD, &ranks);
    *rows = PETSC_DECIDE;
    FILE *file = fopen(path, "r");
    if (file == NULL)
        return 0;
    while (fscanf(file, "%ld", &count) == 1) {
        if (count < 0)
            lines = ranks + 1;                   /* (no negative counts) */
        else if (lines == rank)
            *rows = (PetscInt)count;
        lines++;
    }
    int bad = !feof(file) || lines != ranks;
    fclose(file);
    return bad;
}

/* [load_system] */
/* A and b from the binary file, `rows` of them on this rank (PETSC_DECIDE: PETSc splits them) */
static PetscErrorCode load_system(const char *path, PetscInt rows, Mat *A, Vec *b)
{
    PetscViewer viewer;
    PetscCall(PetscViewerBinaryOpen(PETSC_COMM_WORLD, path, FILE_MODE_READ, &viewer));
    PetscCall(MatCreate(PETSC_COMM_WORLD, A));
    PetscCall(MatSetSizes(*A, rows, rows, PETSC_DETERMINE, PETSC_DETERMINE));
    PetscCall(MatSetType(*A, MATAIJ));
    PetscCall(MatLoad(*A, viewer));
    PetscCall(MatCreateVecs(*A, NULL, b));
    PetscCall(VecLoad(*b, viewer));
    PetscCall(PetscViewerDestroy(&viewer));
    return 0;
}
/* [load_system] */

/* [solve] */
/* the KSP that the options choose (-ksp_type, -pc_type, -ksp_rtol, ...), set up for A: the
 * preconditioner built, so that the solve's time is the iterations' alone */
static PetscErrorCode configure(KSP ksp, Mat A)
{
    PetscCall(KSPSetOperators(ksp, A, A));
    PetscCall(KSPSetFromOptions(ksp));
    PetscCall(KSPSetUp(ksp));
    return 0;
}

/* x = A^-1 b from x0 = 0; the seconds of KSPSolve in *seconds */
static PetscErrorCode solve(KSP ksp, Vec b, Vec x, double *seconds)
{
    PetscCall(VecSet(x, 0.0));
    PetscCall(PetscBarrier(NULL));
    double start = MPI_Wtime();
    PetscCall(KSPSolve(ksp, b, x));
    *seconds = MPI_Wtime() - start;
    return 0;
}
/* [solve] */

/* the first option given and not used (an unknown name), or NULL: its name into name */
static const char *unused_option(char *name, size_t room)
{
    PetscInt n = 0;
    char **names = NULL, **values = NULL;
    if (PetscOptionsLeftGet(NULL, &n, &names, &values) != 0 || n == 0)
        return NULL;
    snprintf(name, room, "-%s", names[0]);
    PetscOptionsLeftRestore(NULL, &n, &names, &values);
    return name;
}

/* ||b - A x|| / ||b||, recomputed from x (not the solver's recursive residual) */
static PetscErrorCode true_residual(Mat A, Vec b, Vec x, PetscReal *relative)
{
    Vec r;
    PetscReal rnorm, bnorm;
    PetscCall(VecDuplicate(b, &r));
    PetscCall(MatMult(A, x, r));
    PetscCall(VecAYPX(r, -1.0, b));          /* r = b - A x */
    PetscCall(VecNorm(r, NORM_2, &rnorm));
    PetscCall(VecNorm(b, NORM_2, &bnorm));
    *relative = bnorm > 0 ? rnorm / bnorm : rnorm;
    PetscCall(VecDestroy(&r));
    return 0;
}

/* the solve's summary on rank 0; the exit status: 0 converged, 1 not */
static int report(KSP ksp, Mat A, Vec b, Vec x, double seconds)
{
    KSPType ksp_type;
    PCType pc_type;
    PC pc;
    KSPNormType norm;
    KSPConvergedReason reason;
    PetscInt rows, iterations;
    PetscMPIInt ranks;
    PetscReal relative = 0.0;
    KSPGetType(ksp, &ksp_type);
    KSPGetPC(ksp, &pc);
    PCGetType(pc, &pc_type);
    KSPGetNormType(ksp, &norm);
    KSPGetConvergedReason(ksp, &reason);
    KSPGetIterationNumber(ksp, &iterations);
    MatGetSize(A, &rows, NULL);
    MPI_Comm_size(PETSC_COMM_WORLD, &ranks);
    true_residual(A, b, x, &relative);
    PetscPrintf(PETSC_COMM_WORLD, "petsc_solve: %d rows on %d ranks, ksp %s, pc %s, norm %s\n",
                (int)rows, ranks, ksp_type, pc_type, KSPNormTypes[norm]);
    PetscPrintf(PETSC_COMM_WORLD, "iterations %d, reason %d (%s), true relative residual %.3e\n",
                (int)iterations, (int)reason, reason > 0 ? "converged" : "diverged",
                (double)relative);
    PetscPrintf(PETSC_COMM_WORLD, "solve %.6f s, %.2f us per iteration\n", seconds,
                iterations > 0 ? 1e6 * seconds / (double)iterations : 0.0);
    return reason > 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    /* PETSc takes its options from the command line; its errors come back as codes, each
     * reported here in one line (not PETSc's traceback) */
    PetscCall(PetscInitialize(&argc, &argv, NULL, NULL));
    PetscCall(PetscPushErrorHandler(PetscReturnErrorHandler, NULL));
    int status = 2;
    Mat A = NULL;
    Vec b = NULL, x = NULL;
    KSP ksp = NULL;
    double seconds = 0.0;
    char name[256], rows_path[4096];
    PetscInt rows = PETSC_DECIDE;
    PetscErrorCode code;
    if (argc > 1)
        snprintf(rows_path, sizeof rows_path, "%s.rows", argv[1]);
    if (argc < 2 || argv[1][0] == '-') {
        fail("usage: mpiexec -n P petsc_solve_c FILE [PETSc options]", "");
    } else if (!readable_everywhere(argv[1])) {
        fail("cannot read the system file ", argv[1]);
    } else if (rows_from_file(rows_path, &rows) != 0) {
        fail("does not hold one count of rows per rank, each >= 0: ", rows_path);
    } else if ((code = load_system(argv[1], rows, &A, &b)) != 0) {
        fail("not a PETSc binary file with a matrix and a vector: ", petsc_message(code));
    } else if ((code = KSPCreate(PETSC_COMM_WORLD, &ksp)) != 0 || (code = configure(ksp, A)) != 0) {
        fail("PETSc refused the options: ", petsc_message(code));
    } else if (unused_option(name, sizeof name) != NULL) {
        fail("an option PETSc did not use (misspelt?): ", name);
    } else if ((code = VecDuplicate(b, &x)) != 0 || (code = solve(ksp, b, x, &seconds)) != 0) {
        fail("the solve failed: ", petsc_message(code));
    } else {
        status = report(ksp, A, b, x, seconds);
    }
    KSPDestroy(&ksp);
    VecDestroy(&x);
    VecDestroy(&b);
    MatDestroy(&A);
    PetscPopErrorHandler();
    PetscFinalize();
    return status;
}
