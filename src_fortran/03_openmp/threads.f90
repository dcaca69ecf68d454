! The number of threads of the next parallel regions, settable from Python (ctypes): OpenMP reads
! OMP_NUM_THREADS once, when the library loads (Fortran twin of src_c/03_openmp/threads.c).
module course_threads
    use, intrinsic :: iso_c_binding, only: c_int
    use omp_lib, only: omp_set_num_threads
    implicit none
    private
    public :: course_set_threads

contains

! [course_set_threads]
subroutine course_set_threads(n) bind(C, name="course_set_threads")
    integer(c_int), value, intent(in) :: n

    call omp_set_num_threads(n)
end subroutine course_set_threads
! [course_set_threads]

end module course_threads
