! fem3d: 3D steady heat conduction on a box of tri-linear hexahedra, standalone (Fortran twin of
! src_c/02_fem3d/fem3d_main.c).
!
!   usage: fem3d_f INPUT [OUTPUT.vtk]
!
! INPUT, one group of values per line, anything after them is a comment:
!   NX NY NZ        number of elements in x, y, z (> 0)
!   DX DY DZ        element size in x, y, z (> 0)
!   COND QVOL       thermal conductivity (> 0), volumetric heat source, and optionally the word
!                   constant (the default: QVOL everywhere) or nakajima (QVOL |x_c + y_c| on
!                   each element, (x_c, y_c) its centroid: the heat generation of Nakajima's FEM
!                   course code); another word in lowercase there is an error, any other word a
!                   comment
!   QFLUX           heat flux into the body through the face opposite to the fixed one
!   FIXED           the face with T = 0: xmin, xmax, ymin, ymax, zmin or zmax
!   EPS             CG tolerance on ||r|| / ||b|| (> 0)
! The other four faces are insulated. The exact solution depends only on the distance s from the
! flux face (the box is Z thick in that direction):
!   T(s) = QVOL (Z^2 - s^2) / (2 COND) + QFLUX (Z - s) / COND.
! Prints a summary that checks the nodal values against it (with nakajima, which has no exact
! solution: the largest temperature only); with OUTPUT.vtk also writes the
! temperature as a legacy VTK file (ParaView, meshio). Exit status: 0 converged, 1 not converged
! (or out of memory), 2 bad input or output file.
program fem3d
    use, intrinsic :: iso_fortran_env, only: error_unit, output_unit, int64
    use, intrinsic :: iso_c_binding, only: c_int, c_double
    use course_fem3d, only: fem3d_pattern, fem3d_assemble, fem3d_face_flux, fem3d_nakajima_source, &
                            fem3d_element_source_load
    use course_crs, only: crs_dirichlet
    use course_cg, only: pcg_jacobi
    use course_input, only: input_file, input_open, input_close
    use course_fem3d_problem, only: problem => fem3d_problem, FACES, fem3d_read_problem, axis_of, &
                                    opposite, face_index, exact_at, SOURCE_NAKAJIMA
    use course_cformat, only: c_d, c_e, c_g
    implicit none
    integer, parameter :: dp = c_double

    type(problem) :: p
    character(len=:), allocatable :: input_path, output_path
    integer(c_int) :: n, n_elem, nnz, n_quad, flux_face, max_iter, iters, alloc_stat
    real(dp), allocatable :: xyz(:, :), val(:), rhs(:), q(:), g(:), t(:), t_exact(:)
    integer(c_int), allocatable :: elements(:, :), quads(:, :), row_ptr(:), col_idx(:), fixed(:)
    real(dp) :: relres
    logical :: nakajima
    integer :: exit_status

    call read_arguments()
    p = read_input(input_path)
    deallocate(input_path)          ! main-program variables are never freed automatically
    n = (p%nel(1) + 1) * (p%nel(2) + 1) * (p%nel(3) + 1)
    n_elem = p%nel(1) * p%nel(2) * p%nel(3)
    flux_face = opposite(p%fixed_face)
    nnz = (3 * p%nel(1) + 1) * (3 * p%nel(2) + 1) * (3 * p%nel(3) + 1)
    n_quad = n_elem / p%nel(axis_of(flux_face))

    allocate(xyz(3, n), elements(8, n_elem), quads(4, n_quad), row_ptr(n + 1), col_idx(nnz), &
             fixed(n), val(nnz), rhs(n), q(n), g(n), t(n), t_exact(n), stat=alloc_stat)
    if (alloc_stat /= 0) call out_of_memory()
    val = 0.0_dp
    rhs = 0.0_dp
    g = 0.0_dp
    t = 0.0_dp                                           ! initial guess of CG

    call build_mesh(xyz, elements)
    nakajima = p%source == SOURCE_NAKAJIMA
    q = merge(0.0_dp, p%qvol, nakajima)                  ! a constant source, or nakajima's (below)
    call fem3d_pattern(p%nel(1), p%nel(2), p%nel(3), row_ptr, col_idx)
    if (fem3d_assemble(n_elem, elements, xyz, p%cond, q, row_ptr, col_idx, val, rhs) /= 0) &
        call degenerate_elements()
    if (nakajima) then
        if (add_nakajima_load() /= 0) call degenerate_elements()
    end if
    call face_quads(flux_face, quads)
    call fem3d_face_flux(n_quad, quads, xyz, p%qflux, rhs)
    call fixed_nodes(fixed)
    call crs_dirichlet(n, fixed, g, row_ptr, col_idx, val, rhs)    ! g = 0: T = 0 there
    if (10_int64 * n <= huge(n)) then                   ! CG's iteration limit: 10 n, if it fits
        max_iter = 10 * n
    else
        max_iter = huge(n)
    end if
    iters = pcg_jacobi(n, row_ptr, col_idx, val, rhs, t, p%eps, max_iter, relres)
    if (iters < 0) call out_of_memory()

    call exact_solution(t_exact)
    exit_status = merge(0, 1, relres <= p%eps)
    call print_summary()
    if (allocated(output_path)) then
        if (write_vtk(output_path)) then
            write(output_unit, '(a)') '  wrote ' // output_path
        else
            exit_status = 2
        end if
    end if
    deallocate(xyz, elements, quads, row_ptr, col_idx, fixed, val, rhs, q, g, t, t_exact)
    if (allocated(output_path)) deallocate(output_path)
    if (exit_status /= 0) stop exit_status, quiet=.true.

contains

    ! INPUT and the optional OUTPUT.vtk from the command line; a usage line and exit 2 otherwise
    subroutine read_arguments()
        integer :: arg_len
        character(len=:), allocatable :: prog

        if (command_argument_count() < 1 .or. command_argument_count() > 2) then
            call get_command_argument(0, length=arg_len)
            allocate(character(len=arg_len) :: prog)
            call get_command_argument(0, prog)
            write(error_unit, '(a)') 'usage: ' // prog // ' INPUT [OUTPUT.vtk]'
            deallocate(prog)        ! STOP would leave it allocated (a leak for LeakSanitizer)
            stop 2, quiet=.true.
        end if
        call get_command_argument(1, length=arg_len)
        allocate(character(len=arg_len) :: input_path)
        call get_command_argument(1, input_path)
        if (command_argument_count() == 2) then
            call get_command_argument(2, length=arg_len)
            allocate(character(len=arg_len) :: output_path)
            call get_command_argument(2, output_path)
        end if
    end subroutine read_arguments

    function read_input(path) result(pr)
        character(len=*), intent(in) :: path
        type(problem) :: pr
        type(input_file) :: in

        call input_open(in, 'fem3d', path)
        call fem3d_read_problem(in, pr)
        call input_close(in)
    end function read_input

    ! The load of Nakajima's source, QVOL |x_c + y_c| on each element, added into rhs; nonzero
    ! for a degenerate element.
    integer(c_int) function add_nakajima_load() result(status)
        real(dp), allocatable :: q_elem(:)

        allocate(q_elem(n_elem), stat=alloc_stat)
        if (alloc_stat /= 0) call out_of_memory()
        call fem3d_nakajima_source(n_elem, elements, xyz, p%qvol, q_elem)
        status = fem3d_element_source_load(n_elem, elements, xyz, q_elem, rhs)
        deallocate(q_elem)
    end function add_nakajima_load

    subroutine degenerate_elements()
        write(error_unit, '(a)') 'fem3d: degenerate elements (det J <= 0): DX DY DZ too small'
        stop 1, quiet=.true.
    end subroutine degenerate_elements

    ! The summary: sizes, problem, CG, and the temperature against the exact solution (constant
    ! source), or its maximum alone (nakajima: no exact solution)
    subroutine print_summary()
        character(len=:), allocatable :: status_text, source_text
        real(dp) :: err

        if (relres <= p%eps) then
            status_text = 'converged'
        else
            status_text = 'NOT converged'
        end if
        source_text = c_g(p%qvol, 6)
        if (nakajima) source_text = source_text // ' |x_c + y_c| (nakajima)'
        write(output_unit, '(a)') 'fem3d (Fortran): ' // c_d(p%nel(1)) // ' x ' // &
            c_d(p%nel(2)) // ' x ' // c_d(p%nel(3)) // ' elements, ' // c_d(n) // ' unknowns, ' // &
            c_d(nnz) // ' nonzeros'
        write(output_unit, '(a)') '  T = 0 on ' // FACES(p%fixed_face) // ', heat flux ' // &
            c_g(p%qflux, 6) // ' into ' // FACES(flux_face) // ', source ' // source_text // &
            ', conductivity ' // c_g(p%cond, 6)
        write(output_unit, '(a)') '  CG: ' // c_d(iters) // ' iterations, relative residual ' // &
            c_e(relres, 3) // ' (' // status_text // ')'
        if (nakajima) then
            write(output_unit, '(a)') '  max T = ' // c_g(maxval(t), 10) // &
                '   (no exact solution for this source)'
            return
        end if
        err = maxval(abs(t - t_exact))
        write(output_unit, '(a)') '  max T = ' // c_g(maxval(t), 10) // '   should be ' // &
            c_g(maxval(t_exact), 10)
        write(output_unit, '(a)') '  max nodal error ' // c_e(err, 3) // &
            ' (should be near round-off and the CG tolerance: the elements are nodally exact here)'
    end subroutine print_summary

    ! global number of node (ijk(1), ijk(2), ijk(3)), each index counted from 0
    pure integer function node_number(ijk)
        integer, intent(in) :: ijk(3)

        node_number = 1 + ijk(1) + (p%nel(1) + 1) * (ijk(2) + (p%nel(2) + 1) * ijk(3))
    end function node_number

    ! coordinates xyz(:, n) of every node n, and the 8 corners of every element (local order: the
    ! bottom face k counter-clockwise, then the top face k+1)
    subroutine build_mesh(xyz_out, elements_out)
        real(dp), intent(out) :: xyz_out(:, :)
        integer(c_int), intent(out) :: elements_out(:, :)
        integer, parameter :: CORNER(3, 8) = reshape([0, 0, 0, 1, 0, 0, 1, 1, 0, 0, 1, 0, &
                                                      0, 0, 1, 1, 0, 1, 1, 1, 1, 0, 1, 1], [3, 8])
        integer :: i1, i2, i3, ijk(3), d, a, e

        do i3 = 0, p%nel(3)
            do i2 = 0, p%nel(2)
                do i1 = 0, p%nel(1)
                    ijk = [i1, i2, i3]
                    do d = 1, 3
                        xyz_out(d, node_number(ijk)) = real(ijk(d), dp) * p%size(d)
                    end do
                end do
            end do
        end do
        e = 0
        do i3 = 0, p%nel(3) - 1
            do i2 = 0, p%nel(2) - 1
                do i1 = 0, p%nel(1) - 1
                    e = e + 1
                    do a = 1, 8
                        elements_out(a, e) = node_number([i1, i2, i3] + CORNER(:, a))
                    end do
                end do
            end do
        end do
    end subroutine build_mesh

    ! The boundary quads of `face` in cyclic order, in the plane of the two other axes u, v (cyclic:
    ! x -> (y, z), y -> (z, x), z -> (x, y)).
    subroutine face_quads(face, quads_out)
        integer(c_int), intent(in) :: face
        integer(c_int), intent(out) :: quads_out(:, :)
        integer, parameter :: STEP(2, 4) = reshape([0, 0, 1, 0, 1, 1, 0, 1], [2, 4])
        integer :: axis, u, v, iu, iv, c, f, corner(3)

        axis = axis_of(face)
        u = mod(axis, 3) + 1
        v = mod(axis + 1, 3) + 1
        f = 0
        do iv = 0, p%nel(v) - 1
            do iu = 0, p%nel(u) - 1
                f = f + 1
                do c = 1, 4
                    corner(axis) = face_index(p, face)
                    corner(u) = iu + STEP(1, c)
                    corner(v) = iv + STEP(2, c)
                    quads_out(c, f) = node_number(corner)
                end do
            end do
        end do
    end subroutine face_quads

    ! the exact solution at every node
    subroutine exact_solution(t_out)
        real(dp), intent(out) :: t_out(:)
        integer :: ijk(3), i1, i2, i3

        do i3 = 0, p%nel(3)
            do i2 = 0, p%nel(2)
                do i1 = 0, p%nel(1)
                    ijk = [i1, i2, i3]
                    t_out(node_number(ijk)) = exact_at(p, ijk)
                end do
            end do
        end do
    end subroutine exact_solution

    ! 0/1 flags of the nodes on the fixed face
    subroutine fixed_nodes(flags)
        integer(c_int), intent(out) :: flags(:)
        integer :: axis, on_face, ijk(3), i1, i2, i3

        axis = axis_of(p%fixed_face)
        on_face = face_index(p, p%fixed_face)
        do i3 = 0, p%nel(3)
            do i2 = 0, p%nel(2)
                do i1 = 0, p%nel(1)
                    ijk = [i1, i2, i3]
                    flags(node_number(ijk)) = merge(1, 0, ijk(axis) == on_face)
                end do
            end do
        end do
    end subroutine fixed_nodes

    ! legacy ASCII VTK, unstructured grid of hexahedra (VTK's cell type 12 numbers its corners as
    ! we do; VTK counts nodes from 0) with the temperature as point data. .false. (after a message)
    ! if the file cannot be written.
    logical function write_vtk(path)
        character(len=*), intent(in) :: path
        character(len=512) :: msg
        character(len=:), allocatable :: line
        integer :: unit, ios, k, e, a

        open(newunit=unit, file=path, status='replace', action='write', iostat=ios, iomsg=msg)
        write_vtk = ios == 0
        if (.not. write_vtk) then
            call report_write_error(path, msg)
            return
        end if
        write(unit, '(a)') '# vtk DataFile Version 3.0', 'fem3d temperature', 'ASCII', &
                           'DATASET UNSTRUCTURED_GRID', 'POINTS ' // c_d(n) // ' double'
        do k = 1, n
            write(unit, '(a)') c_g(xyz(1, k), 15) // ' ' // c_g(xyz(2, k), 15) // ' ' // &
                               c_g(xyz(3, k), 15)
        end do
        write(unit, '(a)') 'CELLS ' // c_d(n_elem) // ' ' // c_d(9 * n_elem)
        do e = 1, n_elem
            line = '8'
            do a = 1, 8
                line = line // ' ' // c_d(elements(a, e) - 1)
            end do
            write(unit, '(a)') line
        end do
        write(unit, '(a)') 'CELL_TYPES ' // c_d(n_elem)
        do e = 1, n_elem
            write(unit, '(a)') '12'
        end do
        write(unit, '(a)') 'POINT_DATA ' // c_d(n), 'SCALARS temperature double 1', &
                           'LOOKUP_TABLE default'
        do k = 1, n
            write(unit, '(a)') c_g(t(k), 15)
        end do
        close(unit, iostat=ios, iomsg=msg)
        write_vtk = ios == 0
        if (.not. write_vtk) call report_write_error(path, msg)
    end function write_vtk

    ! "fem3d: PATH: cannot write output file: REASON", REASON as C's strerror(errno) says it
    ! (gfortran's message reads "Cannot open file 'PATH': REASON")
    subroutine report_write_error(path, msg)
        character(len=*), intent(in) :: path, msg
        character(len=:), allocatable :: reason
        integer :: k

        reason = trim(msg)
        k = index(reason, "': ", back=.true.)
        if (k > 0) reason = reason(k + 3:)
        write(error_unit, '(a)') 'fem3d: ' // path // ': cannot write output file: ' // reason
    end subroutine report_write_error

    subroutine out_of_memory()
        write(error_unit, '(a)') 'fem3d: out of memory for NX NY NZ = ' // c_d(p%nel(1)) // ' ' // &
                                 c_d(p%nel(2)) // ' ' // c_d(p%nel(3))
        stop 1, quiet=.true.
    end subroutine out_of_memory

end program fem3d
