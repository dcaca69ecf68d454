! iccg_f: the finite-volume Poisson problem of lecture 03 solved by ICCG with a reordering
! (lecture 04_iccg), standalone: the ordering, IC(0) and the colored parallel substitution all in
! Fortran (twin of src_c/04_iccg/iccg_main.c: the same input, the same lines, the same errors).
!
!   usage: iccg_f [INPUT.DAT] [NCOLORtot]      (defaults: INPUT.DAT, 1)
!
! INPUT.DAT is the file of solf (lecture 03): NX NY NZ / DX DY DZ / EPSICCG, one group per line.
! NCOLORtot chooses the ordering as in Nakajima's ICCG codes: > 1 multicolor (MC) with that many
! colors as a target, 1 natural (sequential substitution), 0 Cuthill-McKee, -1 reverse
! Cuthill-McKee, <= -2 CM-RCM with |NCOLORtot| colors. The threads: OMP_NUM_THREADS. Prints the
! colors, the iterations, the times and phi's largest value and sum in the original numbering
! (cells numbered from 0 in the output, as in C). Exit status: 0 converged, 1 not converged (or out
! of memory, or IC(0) broke down), 2 bad input or command line.
program iccg_f
    use, intrinsic :: iso_fortran_env, only: error_unit, output_unit
    use, intrinsic :: iso_c_binding, only: c_int, c_double
    use omp_lib, only: omp_get_wtime, omp_get_max_threads
    use course_poisson, only: poi_gen_crs
    use course_ordering, only: cuthill_mckee, wavefronts, multicolor, cyclic_colors, &
                               color_permutation
    use course_ic0, only: ic0_factor, ic0_transpose, iccg
    use course_input, only: parse_int
    use course_poisson_input, only: poisson_problem, poisson_input_path, poisson_argument, &
                                    poisson_read_input, poisson_nnz, poisson_max_iter, &
                                    poisson_threads_ok, poisson_out_of_memory
    use course_cformat, only: c_d, c_e
    implicit none
    integer, parameter :: dp = c_double

    character(len=:), allocatable :: input_path, name, status_text
    integer(c_int) :: ncolortot, n, nnz, nl, ncolor, i, k, old, j, nlow, nup, pos
    integer(c_int) :: incompatible, status, max_iter, iters, imax
    integer :: alloc_stat
    real(dp) :: relres, total, t0, t1, t2, t3, per_iteration
    type(poisson_problem) :: pr
    real(dp), allocatable :: d(:), b(:), amat(:), diag(:), bn(:), lower_val(:), upper_val(:)
    real(dp), allocatable :: fac_diag(:), fac_lower(:), fac_upper(:), x(:)
    integer(c_int), allocatable :: index(:), item(:), perm(:), iperm(:), color_ptr(:)
    integer(c_int), allocatable :: lower_ptr(:), upper_ptr(:), lower_col(:), upper_col(:)

    call read_arguments()
    if (.not. poisson_threads_ok('iccg_f')) then
        deallocate(input_path)
        stop 2, quiet=.true.
    end if
    ! the CRS arrays hold up to 7 N entries, N = NX NY NZ
    pr = poisson_read_input('iccg_f', input_path, 7)
    deallocate(input_path)
    n = pr%nx * pr%ny * pr%nz
    nnz = poisson_nnz(pr)
    nl = nnz / 2                                         ! entries of each triangle
    allocate(d(n), b(n), index(n + 1), item(max(nnz, 1)), amat(max(nnz, 1)), stat=alloc_stat)
    if (alloc_stat /= 0) call poisson_out_of_memory('iccg_f')

    t0 = omp_get_wtime()
    call poi_gen_crs(pr%nx, pr%ny, pr%nz, pr%dx, pr%dy, pr%dz, 1, d, index, item, amat, b)
    t1 = omp_get_wtime()

    ! the ordering, then A, b in the new numbering split into D, L_A, U_A (columns rising)
    allocate(perm(n), iperm(n), stat=alloc_stat)
    if (alloc_stat /= 0) call poisson_out_of_memory('iccg_f')
    call make_ordering()
    do i = 1, n
        iperm(perm(i)) = i
    end do
    allocate(diag(n), bn(n), lower_ptr(n + 1), upper_ptr(n + 1), lower_col(max(nl, 1)), &
             upper_col(max(nl, 1)), lower_val(max(nl, 1)), upper_val(max(nl, 1)), stat=alloc_stat)
    if (alloc_stat /= 0) call poisson_out_of_memory('iccg_f')
    lower_ptr(1) = 1
    upper_ptr(1) = 1
    incompatible = 0
    do i = 1, n
        old = perm(i)
        nlow = lower_ptr(i)
        nup = upper_ptr(i)
        diag(i) = d(old)
        bn(i) = b(old)
        do k = index(old), index(old + 1) - 1
            j = iperm(item(k))
            if (j < i) then                              ! insertion: columns rising
                pos = nlow
                nlow = nlow + 1
                do while (pos > lower_ptr(i))
                    if (lower_col(pos - 1) <= j) exit
                    lower_col(pos) = lower_col(pos - 1)
                    lower_val(pos) = lower_val(pos - 1)
                    pos = pos - 1
                end do
                lower_col(pos) = j
                lower_val(pos) = amat(k)
            else
                pos = nup
                nup = nup + 1
                do while (pos > upper_ptr(i))
                    if (upper_col(pos - 1) <= j) exit
                    upper_col(pos) = upper_col(pos - 1)
                    upper_val(pos) = upper_val(pos - 1)
                    pos = pos - 1
                end do
                upper_col(pos) = j
                upper_val(pos) = amat(k)
            end if
        end do
        lower_ptr(i + 1) = nlow
        upper_ptr(i + 1) = nup
        if (nlow == lower_ptr(i)) incompatible = incompatible + 1
    end do
    allocate(fac_diag(n), fac_lower(max(nl, 1)), fac_upper(max(nl, 1)), x(n), stat=alloc_stat)
    if (alloc_stat /= 0) call poisson_out_of_memory('iccg_f')
    status = ic0_factor(n, lower_ptr, lower_col, lower_val, diag, fac_lower, fac_diag)
    if (status < 0) then
        write(error_unit, '(a)') 'iccg_f: IC(0) broke down at row ' // c_d(-status - 1)
        stop 1, quiet=.true.
    end if
    if (ic0_transpose(n, lower_ptr, lower_col, fac_lower, upper_ptr, fac_upper) < 0) &
        call poisson_out_of_memory('iccg_f')
    !$omp parallel do schedule(static)
    do i = 1, n
        x(i) = 0.0_dp
    end do
    !$omp end parallel do
    t2 = omp_get_wtime()

    max_iter = poisson_max_iter(n)
    relres = 0.0_dp
    iters = iccg(n, ncolor, color_ptr, diag, lower_ptr, lower_col, lower_val, upper_ptr, &
                 upper_col, upper_val, fac_diag, fac_lower, fac_upper, bn, x, pr%eps, max_iter, &
                 relres)
    t3 = omp_get_wtime()
    if (iters < 0) call poisson_out_of_memory('iccg_f')

    imax = 1                       ! phi in the original numbering: phi(old) = x(iperm(old))
    total = 0.0_dp
    do i = 1, n
        if (x(iperm(i)) > x(iperm(imax))) imax = i
        total = total + x(iperm(i))
    end do
    if (relres <= pr%eps) then
        status_text = 'converged'
    else
        status_text = 'NOT converged'
    end if
    per_iteration = 0.0_dp
    if (iters > 0) per_iteration = (t3 - t2) / iters
    write(output_unit, '(a)') 'iccg (Fortran): ' // c_d(pr%nx) // ' x ' // c_d(pr%ny) // &
        ' x ' // c_d(pr%nz) // ' cells, N = ' // c_d(n)
    write(output_unit, '(a)') '  ordering ' // name // ', NCOLORtot ' // c_d(ncolortot) // &
        ', colors ' // c_d(ncolor) // ', incompatible nodes ' // c_d(incompatible) // &
        ', threads ' // c_d(omp_get_max_threads())
    write(output_unit, '(a)') '  ICCG: ' // c_d(iters) // ' iterations, relative residual ' // &
        c_e(relres, 3) // ' (' // status_text // ')'
    write(output_unit, '(a)') '  time: generate ' // c_e(t1 - t0, 3) // ' s, order+factor ' // &
        c_e(t2 - t1, 3) // ' s, solve ' // c_e(t3 - t2, 3) // ' s, ' // c_e(per_iteration, 3) // &
        ' s per iteration'
    write(output_unit, '(a)') '  phi(max) = ' // c_e(x(iperm(imax)), 15) // ' at cell ' // &
        c_d(imax - 1)
    write(output_unit, '(a)') '  phi(checksum) = ' // c_e(total, 15)
    deallocate(d, b, index, item, amat, perm, iperm, color_ptr, diag, bn, lower_ptr, upper_ptr)
    deallocate(lower_col, upper_col, lower_val, upper_val, fac_diag, fac_lower, fac_upper, x)
    deallocate(name)
    deallocate(status_text)
    if (relres > pr%eps) stop 1, quiet=.true.

contains

    ! INPUT.DAT and NCOLORtot from the command line (defaults INPUT.DAT, 1); a usage line or a
    ! one-line error and exit status 2 for more than two arguments or a NCOLORtot that is not an
    ! integer (like C's strtol: blanks before the number are allowed, nothing after it)
    subroutine read_arguments()
        integer :: first
        character(len=:), allocatable :: word

        call poisson_input_path('[NCOLORtot]', input_path)
        ncolortot = 1
        if (command_argument_count() == 2) then
            word = poisson_argument(2)
            first = verify(word, ' ' // achar(9) // achar(10) // achar(11) // achar(12) // &
                                 achar(13))      ! the first character that is not a blank
            if (first == 0) first = len(word) + 1
            ! -huge - 1 is refused as in C (INT_MIN): |NCOLORtot| must be an integer too
            if (.not. parse_int(word(first:), ncolortot) .or. ncolortot == -huge(ncolortot) - 1) then
                write(error_unit, '(a)') "iccg_f: NCOLORtot must be an integer, got '" // word // "'"
                deallocate(word, input_path)
                stop 2, quiet=.true.
            end if
            deallocate(word)
        end if
    end subroutine read_arguments

    ! The ordering of NCOLORtot on the graph (index, item): perm(new) = old, ncolor, color_ptr and
    ! the name. Levels and colors number from 1 (src_fortran/04_iccg/ordering.f90).
    subroutine make_ordering()
        integer(c_int), allocatable :: color(:), within(:), level(:), cm(:)
        integer(c_int) :: v, max_level

        allocate(color(n), within(n), level(n), stat=alloc_stat)
        if (alloc_stat /= 0) call poisson_out_of_memory('iccg_f')
        if (ncolortot == 1) then                         ! natural: one sequential sweep
            name = 'natural'
            do v = 1, n
                within(v) = v
                color(v) = 1
            end do
            ncolor = 1
        else if (ncolortot > 1) then                     ! MC
            name = 'MC'
            do v = 1, n
                within(v) = v
            end do
            ncolor = multicolor(n, index, item, ncolortot, color)
        else
            allocate(cm(n), stat=alloc_stat)
            if (alloc_stat /= 0) call poisson_out_of_memory('iccg_f')
            call cuthill_mckee(n, index, item, cm, level)
            max_level = 0
            do v = 1, n
                if (ncolortot == 0) then
                    within(v) = cm(v)
                else
                    within(v) = cm(n + 1 - v)
                end if
                max_level = max(max_level, level(v))
            end do
            deallocate(cm)
            if (ncolortot >= -1) then                    ! CM, RCM: wavefronts as colors
                if (ncolortot == 0) then
                    name = 'CM'
                else
                    name = 'RCM'
                end if
                call wavefronts(n, index, item, within, color)
                ncolor = maxval(color)
            else                                         ! CM-RCM: levels of the RCM
                name = 'CM-RCM'
                do v = 1, n
                    level(v) = max_level - level(v) + 1
                end do
                ncolor = cyclic_colors(n, index, item, within, level, -ncolortot, color)
                if (ncolor < 0) call poisson_out_of_memory('iccg_f')
            end if
        end if
        allocate(color_ptr(ncolor + 1), stat=alloc_stat)
        if (alloc_stat /= 0) call poisson_out_of_memory('iccg_f')
        call color_permutation(n, ncolor, color, within, perm, color_ptr)
        deallocate(color, within, level)
    end subroutine make_ordering

end program iccg_f
