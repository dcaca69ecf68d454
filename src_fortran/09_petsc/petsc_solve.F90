! petsc_solve: a linear system solved by PETSc's KSP, the Fortran twin of petsc_solve_c (see
! src_c/09_petsc/petsc_solve.c for the whole description): the same file, the same options, the
! same three lines on rank 0, the same exit status (0 converged, 1 not converged, 2 bad input),
! the same FILE.rows (the rows of each rank, where that file exists).
!
!   usage: mpiexec -n P petsc_solve_f FILE [PETSc options]
!
! PETSc's Fortran interface has no PetscErrorMessage and no PetscOptionsLeftGet: an error names the
! step that failed and PETSc's error code, and an unused option is counted (-options_left names it).
! The file is preprocessed (.F90): PETSc's Fortran types (Mat, Vec, KSP, ...) are macros.
#include <petsc/finclude/petscksp.h>
module petsc_solve_steps
  use petscksp
  implicit none
  private
  public :: fail, readable_everywhere, rows_from_file, load_system, configure, solve, report

contains

  ! one line on stderr from rank 0 (every rank calls it)
  subroutine fail(message)
    use, intrinsic :: iso_fortran_env, only: error_unit
    character(len=*), intent(in) :: message
    PetscMPIInt :: rank
    PetscErrorCode :: ierr
    call MPI_Comm_rank(PETSC_COMM_WORLD, rank, ierr)
    if (rank == 0) write(error_unit, '(2a)') 'petsc_solve_f: ', message
  end subroutine fail

  ! .true. on every rank when rank 0 can open the file: checked before PETSc opens it
  logical function readable_everywhere(path) result(ok)
    character(len=*), intent(in) :: path
    PetscMPIInt :: rank
    PetscErrorCode :: ierr
    call MPI_Comm_rank(PETSC_COMM_WORLD, rank, ierr)
    ok = .false.
    if (rank == 0) inquire(file=path, exist=ok)
    call MPI_Bcast(ok, 1, MPI_LOGICAL, 0, PETSC_COMM_WORLD, ierr)
  end function readable_everywhere

  ! This rank's count of rows from the file `path` (one count per rank, rank 0's first) into rows;
  ! PETSC_DECIDE (PETSc's own split) where there is no such file. .true. if the file does not hold
  ! one count, >= 0, per rank; the same answer on every rank (each reads the same file).
  logical function rows_from_file(path, rows) result(bad)
    character(len=*), intent(in) :: path
    PetscInt, intent(out) :: rows
    PetscMPIInt :: rank, ranks
    PetscErrorCode :: ierr
    integer :: unit, status, lines
    integer(kind=8) :: count
    logical :: exists
    call MPI_Comm_rank(PETSC_COMM_WORLD, rank, ierr)
    call MPI_Comm_size(PETSC_COMM_WORLD, ranks, ierr)
    rows = PETSC_DECIDE
    bad = .false.
    inquire(file=path, exist=exists)
    if (.not. exists) return
    open(newunit=unit, file=path, status='old', action='read', iostat=status)
    if (status /= 0) return
    lines = 0
    do
      read(unit, *, iostat=status) count
      if (status /= 0) exit
      if (count < 0) bad = .true.
      if (lines == rank) rows = int(count, kind=kind(rows))
      lines = lines + 1
    end do
    bad = bad .or. .not. is_iostat_end(status) .or. lines /= ranks
    close(unit)
  end function rows_from_file

  ! [load_system]
  ! A and b from the binary file, `rows` of them on this rank (PETSC_DECIDE: PETSc splits them)
  subroutine load_system(path, rows, A, b, ierr)
    character(len=*), intent(in) :: path
    PetscInt, intent(in) :: rows
    Mat, intent(out) :: A
    Vec, intent(out) :: b
    PetscErrorCode, intent(out) :: ierr
    PetscViewer :: viewer
    PetscErrorCode :: ignored
    call PetscViewerBinaryOpen(PETSC_COMM_WORLD, path, FILE_MODE_READ, viewer, ierr)
    if (ierr /= 0) return
    call MatCreate(PETSC_COMM_WORLD, A, ierr)
    if (ierr == 0) call MatSetSizes(A, rows, rows, PETSC_DETERMINE, PETSC_DETERMINE, ierr)
    if (ierr == 0) call MatSetType(A, MATAIJ, ierr)
    if (ierr == 0) call MatLoad(A, viewer, ierr)
    if (ierr == 0) call MatCreateVecs(A, PETSC_NULL_VEC, b, ierr)
    if (ierr == 0) call VecLoad(b, viewer, ierr)
    call PetscViewerDestroy(viewer, ignored)
  end subroutine load_system
  ! [load_system]

  ! [solve]
  ! the KSP that the options choose (-ksp_type, -pc_type, -ksp_rtol, ...), set up for A: the
  ! preconditioner built, so that the solve's time is the iterations' alone
  subroutine configure(ksp, A, ierr)
    KSP, intent(inout) :: ksp
    Mat, intent(in) :: A
    PetscErrorCode, intent(out) :: ierr
    call KSPSetOperators(ksp, A, A, ierr)
    if (ierr == 0) call KSPSetFromOptions(ksp, ierr)
    if (ierr == 0) call KSPSetUp(ksp, ierr)
  end subroutine configure

  ! x = A^-1 b from x0 = 0; the seconds of KSPSolve in seconds
  subroutine solve(ksp, b, x, seconds, ierr)
    KSP, intent(inout) :: ksp
    Vec, intent(in) :: b
    Vec, intent(inout) :: x
    double precision, intent(out) :: seconds
    PetscErrorCode, intent(out) :: ierr
    double precision :: start
    call VecSet(x, 0.0d0, ierr)
    call PetscBarrier(PETSC_NULL_VEC, ierr)
    start = MPI_Wtime()
    call KSPSolve(ksp, b, x, ierr)
    seconds = MPI_Wtime() - start
  end subroutine solve
  ! [solve]

  ! ||b - A x|| / ||b||, recomputed from x (not the solver's recursive residual)
  PetscReal function true_residual(A, b, x) result(relative)
    Mat, intent(in) :: A
    Vec, intent(in) :: b, x
    Vec :: r
    PetscReal :: rnorm, bnorm
    PetscErrorCode :: ierr
    call VecDuplicate(b, r, ierr)
    call MatMult(A, x, r, ierr)
    call VecAYPX(r, -1.0d0, b, ierr)         ! r = b - A x
    call VecNorm(r, NORM_2, rnorm, ierr)
    call VecNorm(b, NORM_2, bnorm, ierr)
    relative = rnorm
    if (bnorm > 0) relative = rnorm / bnorm
    call VecDestroy(r, ierr)
  end function true_residual

  ! the solve's summary on rank 0, as petsc_solve_c prints it; the exit status: 0 converged, 1 not
  integer function report(ksp, A, b, x, seconds) result(status)
    KSP, intent(in) :: ksp
    Mat, intent(in) :: A
    Vec, intent(in) :: b, x
    double precision, intent(in) :: seconds
    character(len=64) :: ksp_type, pc_type
    character(len=160) :: line
    character(len=16) :: number(2)
    character(len=16), parameter :: norms(0:3) = [character(len=16) :: 'NONE', &
        'PRECONDITIONED', 'UNPRECONDITIONED', 'NATURAL']
    PC :: pc
    KSPNormType :: norm
    KSPConvergedReason :: reason
    PetscInt :: rows, columns, iterations
    PetscMPIInt :: ranks
    PetscReal :: relative
    PetscErrorCode :: ierr
    double precision :: per_iteration
    call KSPGetType(ksp, ksp_type, ierr)
    call KSPGetPC(ksp, pc, ierr)
    call PCGetType(pc, pc_type, ierr)
    call KSPGetNormType(ksp, norm, ierr)
    call KSPGetConvergedReason(ksp, reason, ierr)
    call KSPGetIterationNumber(ksp, iterations, ierr)
    call MatGetSize(A, rows, columns, ierr)
    call MPI_Comm_size(PETSC_COMM_WORLD, ranks, ierr)
    relative = true_residual(A, b, x)
    per_iteration = 0
    if (iterations > 0) per_iteration = 1d6 * seconds / iterations
    write(line, '(a, i0, a, i0, a)') 'petsc_solve: ', rows, ' rows on ', ranks, ' ranks'
    call PetscPrintf(PETSC_COMM_WORLD, trim(line) // ', ksp ' // trim(ksp_type) // ', pc ' // &
                     trim(pc_type) // ', norm ' // trim(norms(norm)) // new_line('a'), ierr)
    status = 1
    if (reason > 0) status = 0
    write(line, '(a, i0, a, i0, 3a, es9.3)') 'iterations ', iterations, ', reason ', reason, &
        ' (', trim(merge('converged', 'diverged ', reason > 0)), '), true relative residual ', &
        relative
    call PetscPrintf(PETSC_COMM_WORLD, trim(line) // new_line('a'), ierr)
    write(number(1), '(f16.6)') seconds
    write(number(2), '(f16.2)') per_iteration
    call PetscPrintf(PETSC_COMM_WORLD, 'solve ' // trim(adjustl(number(1))) // ' s, ' // &
                     trim(adjustl(number(2))) // ' us per iteration' // new_line('a'), ierr)
  end function report

end module petsc_solve_steps


program petsc_solve
  use petscksp
  use petsc_solve_steps
  implicit none
  character(len=4096) :: path
  character(len=80) :: message
  Mat :: A
  Vec :: b, x
  KSP :: ksp
  PetscErrorCode :: ierr
  PetscInt :: unused, rows
  integer :: status
  double precision :: seconds

  ! PETSc takes its options from the command line; its errors come back as codes (no traceback),
  ! each reported here in one line
  call PetscInitialize(PETSC_NULL_CHARACTER, ierr)
  if (ierr /= 0) stop 2
  call PetscPushErrorHandler(PetscIgnoreErrorHandler, PETSC_NULL_INTEGER, ierr)
  status = 2
  path = ''
  if (command_argument_count() >= 1) call get_command_argument(1, path)
  if (len_trim(path) == 0 .or. path(1:1) == '-') then
    call fail('usage: mpiexec -n P petsc_solve_f FILE [PETSc options]')
  else if (.not. readable_everywhere(trim(path))) then
    call fail('cannot read the system file ' // trim(path))
  else if (rows_from_file(trim(path) // '.rows', rows)) then
    call fail('does not hold one count of rows per rank, each >= 0: ' // trim(path) // '.rows')
  else
    call load_system(trim(path), rows, A, b, ierr)
    if (ierr /= 0) then
      write(message, '(a, i0, a)') ' (PETSc error ', ierr, ')'
      call fail('not a PETSc binary file with a matrix and a vector' // trim(message))
    else
      call KSPCreate(PETSC_COMM_WORLD, ksp, ierr)
      if (ierr == 0) call configure(ksp, A, ierr)
      unused = 0
      if (ierr == 0) call PetscOptionsAllUsed(PETSC_NULL_OPTIONS, unused, ierr)
      if (ierr /= 0) then
        write(message, '(a, i0, a)') ' (PETSc error ', ierr, ')'
        call fail('PETSc refused the options' // trim(message))
      else if (unused > 0) then
        write(message, '(a, i0, a)') 'PETSc did not use ', unused, &
            ' option(s) (misspelt?): -options_left names them'
        call fail(trim(message))
      else
        call VecDuplicate(b, x, ierr)
        if (ierr == 0) call solve(ksp, b, x, seconds, ierr)
        if (ierr /= 0) then
          write(message, '(a, i0, a)') ' (PETSc error ', ierr, ')'
          call fail('the solve failed' // trim(message))
        else
          status = report(ksp, A, b, x, seconds)
        end if
      end if
    end if
  end if
  call KSPDestroy(ksp, ierr)
  call VecDestroy(x, ierr)
  call VecDestroy(b, ierr)
  call MatDestroy(A, ierr)
  call PetscPopErrorHandler(ierr)
  call PetscFinalize(ierr)
  call exit(status)
end program petsc_solve
