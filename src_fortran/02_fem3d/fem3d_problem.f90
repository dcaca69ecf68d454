! fem3d's problem (Fortran twin of src_c/02_fem3d/fem3d_problem.c): the six lines of its input file
! (see fem3d_main.f90), read for fem3d_f and for fem3d_mpi_f, which reads a 7th line after them; the
! faces of the box and the exact solution.
!
! Faces are numbered 1..6 as in FACES: the axis of face f is (f + 1) / 2, the max side if f is even.
module course_fem3d_problem
    use, intrinsic :: iso_c_binding, only: c_int, c_double
    use course_input, only: input_file, input_ints, input_reals, input_require_positive, &
                            input_choice, input_fail, input_line, input_parse_reals, input_next_word
    use course_cformat, only: c_d
    implicit none
    private
    public :: FACES, fem3d_problem, fem3d_read_problem, axis_of, opposite, face_index, exact_at
    public :: SOURCES, SOURCE_CONSTANT, SOURCE_NAKAJIMA

    integer, parameter :: dp = c_double
    character(len=4), parameter :: FACES(6) = ['xmin', 'xmax', 'ymin', 'ymax', 'zmin', 'zmax']
    ! the heat sources that line 3 may name after COND QVOL, in the order of fem3d_problem%source:
    ! QVOL everywhere (the default), or Nakajima's QVOL |x_c + y_c| on each element (fem3d.f90's
    ! fem3d_nakajima_source), which has no exact solution
    character(len=8), parameter :: SOURCES(2) = ['constant', 'nakajima']
    integer, parameter :: SOURCE_CONSTANT = 1, SOURCE_NAKAJIMA = 2

    type :: fem3d_problem
        integer :: nel(3)           ! elements in x, y, z
        real(dp) :: size(3)         ! element size in x, y, z
        real(dp) :: cond, qvol, qflux, eps
        integer :: source           ! index into SOURCES
        integer :: fixed_face       ! index into FACES: axis (face + 1) / 2, the max side if even
    end type fem3d_problem

contains

! Reads lines 1-6 (NX NY NZ, DX DY DZ, COND QVOL [SOURCE], QFLUX, FIXED, EPS) from the open file
! `in` and checks them; a bad line stops with status 2 through the reader. Leaves `in` open.
! SOURCE: a third word on line 3 that starts with a lowercase letter names the source (constant or
! nakajima; another such word is an error); anything else there is a comment, as on every line.
subroutine fem3d_read_problem(in, pr)
    type(input_file), intent(inout) :: in
    type(fem3d_problem), intent(out) :: pr
    real(dp) :: one(1), nnz_estimate

    call input_ints(in, pr%nel, 'NX NY NZ: number of elements')
    call input_require_positive(in, real(pr%nel(1), dp), 'NX')
    call input_require_positive(in, real(pr%nel(2), dp), 'NY')
    call input_require_positive(in, real(pr%nel(3), dp), 'NZ')
    ! the nonzeros, in floating point: the product could overflow any integer
    nnz_estimate = (3.0_dp * pr%nel(1) + 1) * (3.0_dp * pr%nel(2) + 1) * (3.0_dp * pr%nel(3) + 1)
    if (nnz_estimate > huge(1_c_int)) &
        call input_fail(in, 'mesh too large: more than ' // c_d(huge(1_c_int)) // ' nonzeros')
    call input_reals(in, pr%size, 'DX DY DZ: element size')
    call input_require_positive(in, pr%size(1), 'DX')
    call input_require_positive(in, pr%size(2), 'DY')
    call input_require_positive(in, pr%size(3), 'DZ')
    call read_material(in, pr)
    call input_reals(in, one, 'QFLUX: heat flux through the face opposite to the fixed one')
    pr%qflux = one(1)
    pr%fixed_face = input_choice(in, FACES, 'FIXED: the face with T = 0')
    call input_reals(in, one, 'EPS: CG tolerance')
    call input_require_positive(in, one(1), 'EPS')
    pr%eps = one(1)
end subroutine fem3d_read_problem

! Line 3, COND QVOL [SOURCE]: the optional third word is SOURCE if it starts with a lowercase
! letter (the words of the choices do), else a comment (files written before the word existed say
! "COND QVOL" there).
subroutine read_material(in, pr)
    type(input_file), intent(inout) :: in
    type(fem3d_problem), intent(inout) :: pr
    character(len=*), parameter :: WHAT = 'COND QVOL: conductivity, heat source'
    character(len=:), allocatable :: line, word
    real(dp) :: material(2)
    integer :: pos, k

    call input_line(in, line, WHAT)
    pos = 1
    call input_parse_reals(in, line, pos, material, WHAT)
    call input_require_positive(in, material(1), 'COND')
    pr%cond = material(1)
    pr%qvol = material(2)
    pr%source = SOURCE_CONSTANT
    if (.not. input_next_word(line, pos, word)) return
    if (word(1:1) < 'a' .or. word(1:1) > 'z') return
    do k = 1, size(SOURCES)
        if (word == trim(SOURCES(k))) then
            pr%source = k
            return
        end if
    end do
    call input_fail(in, "unknown heat source '" // word // &
                        "': expected constant or nakajima (COND QVOL SOURCE)")
end subroutine read_material

! the coordinate axis (1, 2, 3) normal to a face
pure integer function axis_of(face)
    integer(c_int), intent(in) :: face

    axis_of = (face + 1) / 2
end function axis_of

pure integer function opposite(face)
    integer(c_int), intent(in) :: face

    if (mod(face, 2) == 0) then
        opposite = face - 1
    else
        opposite = face + 1
    end if
end function opposite

! index of a node along the axis of `face` at which the face lies: 0 or nel(axis)
pure integer function face_index(pr, face)
    class(fem3d_problem), intent(in) :: pr
    integer(c_int), intent(in) :: face

    if (mod(face, 2) == 0) then
        face_index = pr%nel(axis_of(face))
    else
        face_index = 0
    end if
end function face_index

! The exact solution (of the constant source) at node ijk (indices from 0). s is the distance from
! the flux face, opposite to the fixed one, across a box of thickness Z.
pure real(dp) function exact_at(pr, ijk)
    class(fem3d_problem), intent(in) :: pr
    integer, intent(in) :: ijk(3)
    integer :: axis, nel
    real(dp) :: h, z, s

    axis = axis_of(pr%fixed_face)
    nel = pr%nel(axis)
    h = pr%size(axis)
    z = real(nel, dp) * h
    if (mod(pr%fixed_face, 2) == 0) then                    ! fixed on the max side: flux at 0
        s = real(ijk(axis), dp) * h
    else
        s = real(nel - ijk(axis), dp) * h
    end if
    exact_at = pr%qvol * (z * z - s * s) / (2.0_dp * pr%cond) + pr%qflux * (z - s) / pr%cond
end function exact_at

end module course_fem3d_problem
