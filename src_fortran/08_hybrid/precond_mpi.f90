! Lecture 08_hybrid: the parallel preconditioners of GeoFEM for the distributed CG of 06_pipecg
! (Fortran twin of src_c/08_hybrid/precond_mpi.c; library course_halo_fortran, with halo.f90 and
! cg_mpi.f90; the IC(0) kernels and orderings of 04_iccg come from libcourse_fortran). The same
! names and arguments as in C, 1-based; the module is course_precond_mpi, because the derived type
! is precond_mpi (Fortran does not let a module and an entity in it share a name).
!
! Every rank preconditions its own n internal rows (the local CRS of halo.f90: columns among the
! n_local local nodes, the internal ones 1 .. n first):
!   diagonal      z_i = r_i / a_ii (Jacobi), no communication
!   bjacobi-ic0   localized IC(0), block Jacobi over the ranks: B = the IC(0) of the internal
!                 block A_ii (the entries of the internal rows with a column <= n), after an
!                 ordering of lecture 04_iccg (natural, cm, rcm, mc K, cm-rcm K) on A_ii's graph:
!                     B r = unpermute(backward(forward(permute(r)))), no communication
!   asdd-ic0 K    additive Schwarz sweeps around the same B (K >= 1; K = 1 is bjacobi-ic0):
!                     z = B r; K-1 times: halo exchange of z, t = r - A z, z = z + B t
!                 (K-1 halo exchanges per application)
! The loops of precond_apply are orphaned `omp do` (like ic0_forward): cg_variant_mpi calls it
! from every thread of its parallel region (the whole solve), which share the rows; the halo
! exchanges of asdd-ic0 are made by the master thread between barriers (MPI_THREAD_FUNNELED).
! Outside a parallel region one thread does it all.
module course_precond_mpi
    use, intrinsic :: iso_c_binding, only: c_int, c_long, c_double
    use mpi_f08, only: MPI_Comm
    use course_halo, only: halo_exchange, jacobi_inverse_diagonal
    use course_ordering, only: cuthill_mckee, wavefronts, multicolor, cyclic_colors, &
                               color_permutation
    use course_ic0, only: ic0_factor, ic0_transpose, ic0_forward, ic0_backward
    implicit none
    private
    public :: precond_mpi, precond_name, precond_from_name, precond_setup, precond_apply, &
              precond_free
    public :: PRECOND_DIAGONAL, PRECOND_BJACOBI_IC0, PRECOND_ASDD_IC0, PRECOND_N_KINDS
    public :: PRECOND_OUT_OF_MEMORY, PRECOND_TOO_MANY_COLORS, PRECOND_BAD_ARGUMENT, &
              PRECOND_BREAKDOWN

    ! the kinds, numbered as in C
    integer(c_int), parameter :: PRECOND_DIAGONAL = 0
    integer(c_int), parameter :: PRECOND_BJACOBI_IC0 = 1
    integer(c_int), parameter :: PRECOND_ASDD_IC0 = 2
    integer(c_int), parameter :: PRECOND_N_KINDS = 3
    character(len=*), parameter :: KIND_NAMES(0:PRECOND_N_KINDS - 1) = &
        [character(len=11) :: 'diagonal', 'bjacobi-ic0', 'asdd-ic0']

    ! The statuses of precond_setup, as in C. A status <= PRECOND_BREAKDOWN is an IC(0) breakdown
    ! at the internal row PRECOND_BREAKDOWN - status, counted from 0 as in C (the local number of
    ! the row before the ordering, minus 1): the same number in both languages.
    integer(c_int), parameter :: PRECOND_OUT_OF_MEMORY = -1
    integer(c_int), parameter :: PRECOND_TOO_MANY_COLORS = -2  ! more colors than internal nodes
    integer(c_int), parameter :: PRECOND_BAD_ARGUMENT = -3     ! unknown kind or ordering, ...
    integer(c_int), parameter :: PRECOND_BREAKDOWN = -4

    ! the orderings of 04_iccg, numbered as in C (ORDERING_NAMES(NATURAL) = 'natural', ...)
    integer, parameter :: NATURAL = 0, CM = 1, RCM = 2, MC = 3, CM_RCM = 4
    character(len=*), parameter :: ORDERING_NAMES(0:4) = &
        [character(len=7) :: 'natural', 'cm', 'rcm', 'mc', 'cm-rcm']

    ! One rank's preconditioner. The IC(0) parts are set for bjacobi-ic0 and asdd-ic0 only, dinv
    ! for diagonal only, the copy of the internal rows for asdd-ic0 only; precond_apply writes the
    ! work vectors (hence intent(inout) wherever it is applied).
    type :: precond_mpi
        integer(c_int) :: kind = PRECOND_DIAGONAL
        integer(c_int) :: sweeps = 1                   ! K (1 but for asdd-ic0)
        character(len=:), allocatable :: ordering      ! 'natural', 'cm', 'rcm', 'mc', 'cm-rcm'
        integer(c_int) :: requested_colors = 0         ! K of mc and cm-rcm, else 0
        integer(c_int) :: ncolor = 1                   ! colors of the ordering (1: natural)
        integer(c_int) :: n = 0, n_local = 0           ! internal rows, local nodes
        ! asdd-ic0: the internal rows (all local columns), for t = r - A z
        integer(c_int), allocatable :: row_ptr(:), col_idx(:)
        real(c_double), allocatable :: val(:)
        real(c_double), allocatable :: dinv(:)         ! diagonal: 1 / a_ii
        integer(c_int), allocatable :: perm(:)         ! perm(new) = old
        integer(c_int), allocatable :: color_ptr(:)    ! color c: new rows color_ptr(c) .. (c+1)-1
        ! the permuted internal block split as in 04_iccg, and its IC(0) factor
        real(c_double), allocatable :: diag(:), lower_val(:), upper_val(:)
        integer(c_int), allocatable :: lower_ptr(:), lower_col(:), upper_ptr(:), upper_col(:)
        real(c_double), allocatable :: fac_diag(:), inv_diag(:), fac_lower(:), fac_upper(:)
        ! work vectors in the new numbering: the right-hand side of B, and B applied to it
        real(c_double), allocatable :: permuted(:), solved(:)
    end type precond_mpi

contains

! "diagonal", "bjacobi-ic0", "asdd-ic0"; '' for a kind outside 0 .. 2
function precond_name(kind) result(name)
    integer(c_int), intent(in) :: kind
    character(len=:), allocatable :: name

    name = ''
    if (kind >= 0 .and. kind < PRECOND_N_KINDS) name = trim(KIND_NAMES(kind))
end function precond_name

! The kind called `name`, or -1 if there is none.
integer(c_int) function precond_from_name(name)
    character(len=*), intent(in) :: name
    integer(c_int) :: k

    precond_from_name = -1
    do k = 0, PRECOND_N_KINDS - 1
        if (len(name) == len_trim(KIND_NAMES(k)) .and. name == KIND_NAMES(k)) &
            precond_from_name = k
    end do
end function precond_from_name

! the position of the ordering in ORDERING_NAMES, or -1
integer function ordering_index(name)
    character(len=*), intent(in) :: name
    integer :: k

    ordering_index = -1
    do k = NATURAL, CM_RCM
        if (len(name) == len_trim(ORDERING_NAMES(k)) .and. name == ORDERING_NAMES(k)) &
            ordering_index = k
    end do
end function ordering_index

! .true. if (kind, sweeps, ordering, colors) is a valid combination: sweeps 1 but for asdd-ic0,
! natural 0 only with diagonal, colors 0 for natural, cm, rcm and >= 2 for mc, cm-rcm
logical function valid_choice(kind, sweeps, ordering, colors)
    integer(c_int), intent(in) :: kind, sweeps, colors
    integer, intent(in) :: ordering

    valid_choice = .false.
    if (kind < 0 .or. kind >= PRECOND_N_KINDS .or. ordering < 0 .or. sweeps < 1) return
    if (kind /= PRECOND_ASDD_IC0 .and. sweeps /= 1) return
    if (kind == PRECOND_DIAGONAL .and. (ordering /= NATURAL .or. colors /= 0)) return
    if (ordering < MC) then
        valid_choice = colors == 0
    else
        valid_choice = colors >= 2
    end if
end function valid_choice

! ---- setup ----------------------------------------------------------------------------------

! Builds p for the n_internal internal rows (row_ptr, col_idx, val: the local CRS of halo.f90).
! ordering: 'natural', 'cm', 'rcm' (colors 0) or 'mc', 'cm-rcm' (colors >= 2); diagonal takes
! natural 0 only, and sweeps 1 but for asdd-ic0. Returns 0, or a negative status (the parameters
! above): p is then freed. Local: no communication (the caller makes the ranks agree on it).
function precond_setup(kind, sweeps, ordering, colors, n_internal, n_local, row_ptr, col_idx, &
                       val, p) result(status)
    integer(c_int), intent(in) :: kind, sweeps
    character(len=*), intent(in) :: ordering
    integer(c_int), intent(in) :: colors, n_internal, n_local
    integer(c_int), intent(in) :: row_ptr(n_internal + 1), col_idx(*)
    real(c_double), intent(in) :: val(*)
    type(precond_mpi), intent(out) :: p
    integer(c_int) :: status
    integer :: which, nnz, alloc_stat

    which = ordering_index(ordering)
    status = PRECOND_BAD_ARGUMENT
    if (.not. valid_choice(kind, sweeps, which, colors)) return
    status = PRECOND_TOO_MANY_COLORS
    if (colors > n_internal) return
    p%kind = kind
    p%sweeps = sweeps
    p%ordering = trim(ORDERING_NAMES(which))
    p%requested_colors = colors
    p%ncolor = 1
    p%n = n_internal
    p%n_local = n_local
    status = PRECOND_OUT_OF_MEMORY
    if (kind == PRECOND_DIAGONAL) then
        allocate(p%dinv(n_internal), stat=alloc_stat)
        if (alloc_stat /= 0) return
        call first_touch(p%dinv)
        call jacobi_inverse_diagonal(n_internal, row_ptr, col_idx, val, p%dinv)
        status = 0
        return
    end if
    allocate(p%permuted(n_internal), p%solved(n_internal), stat=alloc_stat)
    if (alloc_stat == 0 .and. kind == PRECOND_ASDD_IC0) then
        nnz = row_ptr(n_internal + 1) - 1
        allocate(p%row_ptr, source=row_ptr, stat=alloc_stat)
        if (alloc_stat == 0) allocate(p%col_idx, source=col_idx(1:nnz), stat=alloc_stat)
        if (alloc_stat == 0) allocate(p%val, source=val(1:nnz), stat=alloc_stat)
    end if
    if (alloc_stat == 0) status = order_block(p, which, colors, row_ptr, col_idx)
    if (status == 0) status = factor_block(p, row_ptr, col_idx, val)
    if (status /= 0) then
        call precond_free(p)
        return
    end if
    call first_touch(p%permuted)
    call first_touch(p%solved)
end function precond_setup

! First touch of a vector that the solve's threads work on by static shares of the rows: zeroed
! by the same static schedule, so that each thread's pages are placed in its NUMA node's memory
! (lecture 03's v1).
subroutine first_touch(v)
    real(c_double), intent(inout) :: v(:)
    integer :: i

    !$omp parallel do schedule(static)
    do i = 1, size(v)
        v(i) = 0.0_c_double
    end do
    !$omp end parallel do
end subroutine first_touch

! Frees what precond_setup allocated (p may be empty).
subroutine precond_free(p)
    type(precond_mpi), intent(inout) :: p

    p = precond_mpi()                  ! the defaults; the allocatable components deallocated
end subroutine precond_free

! ---- the internal block and its ordering ------------------------------------------------------

! The graph of A_ii: (ptr, adj) = the columns <= n of the internal rows but the diagonal, in
! their CRS order (the pattern, the zeros of the Dirichlet rows included, as
! course.solvers.ordering.adjacency). adj holds row_ptr(n+1)-1 entries at most.
subroutine block_graph(n, row_ptr, col_idx, ptr, adj)
    integer(c_int), intent(in) :: n
    integer(c_int), intent(in) :: row_ptr(n + 1), col_idx(*)
    integer(c_int), intent(out) :: ptr(n + 1), adj(*)
    integer(c_int) :: i, k, count

    count = 0
    ptr(1) = 1
    do i = 1, n
        do k = row_ptr(i), row_ptr(i + 1) - 1
            if (col_idx(k) <= n .and. col_idx(k) /= i) then
                count = count + 1
                adj(count) = col_idx(k)
            end if
        end do
        ptr(i + 1) = count + 1
    end do
end subroutine block_graph

! The colors (from 1) of the ordering `which` with target K = colors, and the order `within` that
! numbers the unknowns inside a color (course.solvers.ordering.order). Returns the number of
! colors, -1 out of memory.
integer(c_int) function color_unknowns(n, ptr, adj, which, colors, color, within) result(ncolor)
    integer(c_int), intent(in) :: n
    integer(c_int), intent(in) :: ptr(n + 1), adj(*)
    integer, intent(in) :: which
    integer(c_int), intent(in) :: colors
    integer(c_int), intent(out) :: color(n), within(n)
    integer(c_int), allocatable :: cm_order(:), level(:)
    integer(c_int) :: k
    integer :: alloc_stat

    if (which == NATURAL .or. which == MC) then         ! the given numbering inside the colors
        within = [(k, k = 1, n)]
        color = 1
        ncolor = 1
        if (which == MC) ncolor = multicolor(n, ptr, adj, colors, color)
        return
    end if
    ncolor = -1
    allocate(cm_order(n), level(n), stat=alloc_stat)
    if (alloc_stat /= 0) return
    call cuthill_mckee(n, ptr, adj, cm_order, level)
    if (which == CM) then
        within = cm_order
    else
        within = cm_order(n:1:-1)                       ! reversed: rcm
    end if
    if (which /= CM_RCM) then                           ! cm, rcm: the wavefronts as colors
        call wavefronts(n, ptr, adj, within, color)
        ncolor = 0
        if (n > 0) ncolor = maxval(color)
    else                                                ! cm-rcm: the levels of the RCM, from 1
        level = maxval(level) + 1 - level
        ncolor = cyclic_colors(n, ptr, adj, within, level, colors, color)
    end if
end function color_unknowns

! p%perm, p%color_ptr, p%ncolor for the ordering `which` of A_ii; 0 or PRECOND_OUT_OF_MEMORY
integer(c_int) function order_block(p, which, colors, row_ptr, col_idx) result(status)
    type(precond_mpi), intent(inout) :: p
    integer, intent(in) :: which
    integer(c_int), intent(in) :: colors
    integer(c_int), intent(in) :: row_ptr(p%n + 1), col_idx(*)
    integer(c_int), allocatable :: ptr(:), adj(:), color(:), within(:)
    integer :: alloc_stat

    status = PRECOND_OUT_OF_MEMORY
    allocate(ptr(p%n + 1), adj(row_ptr(p%n + 1) - 1), color(p%n), within(p%n), p%perm(p%n), &
             stat=alloc_stat)
    if (alloc_stat /= 0) return
    call block_graph(p%n, row_ptr, col_idx, ptr, adj)
    p%ncolor = color_unknowns(p%n, ptr, adj, which, colors, color, within)
    if (p%ncolor < 0) return
    allocate(p%color_ptr(p%ncolor + 1), stat=alloc_stat)
    if (alloc_stat /= 0) return
    call color_permutation(p%n, p%ncolor, color, within, p%perm, p%color_ptr)
    status = 0
end function order_block

! ---- the permuted block, split, and its IC(0) -------------------------------------------------

! Puts column j (new numbering) with value v into the row that starts at `start` of a part
! (col, val) and holds entries start .. count-1 so far: insertion keeps the columns increasing.
subroutine insert_sorted(start, count, col, val, j, v)
    integer(c_int), intent(in) :: start, j
    integer(c_int), intent(inout) :: count
    integer(c_int), intent(inout) :: col(*)
    real(c_double), intent(inout) :: val(*)
    real(c_double), intent(in) :: v
    integer(c_int) :: pos

    pos = count
    count = count + 1
    do while (pos > start)
        if (col(pos - 1) <= j) exit
        col(pos) = col(pos - 1)
        val(pos) = val(pos - 1)
        pos = pos - 1
    end do
    col(pos) = j
    val(pos) = v
end subroutine insert_sorted

! The row pointers of the strict lower and upper parts of P A_ii P^T (iperm(old) = new).
subroutine count_split(p, iperm, row_ptr, col_idx)
    type(precond_mpi), intent(inout) :: p
    integer(c_int), intent(in) :: iperm(p%n), row_ptr(p%n + 1), col_idx(*)
    integer(c_int) :: i, k, j, low, up

    p%lower_ptr(1) = 1
    p%upper_ptr(1) = 1
    do i = 1, p%n
        low = 0
        up = 0
        do k = row_ptr(p%perm(i)), row_ptr(p%perm(i) + 1) - 1
            if (col_idx(k) > p%n) cycle                 ! an external column: not in A_ii
            j = iperm(col_idx(k))
            if (j < i) low = low + 1
            if (j > i) up = up + 1
        end do
        p%lower_ptr(i + 1) = p%lower_ptr(i) + low
        p%upper_ptr(i + 1) = p%upper_ptr(i) + up
    end do
end subroutine count_split

! Row and column `new` of P A_ii P^T are row and column perm(new) of A_ii: D, L, U with the
! columns of every row increasing (04_iccg's split).
subroutine fill_split(p, iperm, row_ptr, col_idx, val)
    type(precond_mpi), intent(inout) :: p
    integer(c_int), intent(in) :: iperm(p%n), row_ptr(p%n + 1), col_idx(*)
    real(c_double), intent(in) :: val(*)
    integer(c_int) :: i, k, j, low, up

    do i = 1, p%n
        low = p%lower_ptr(i)
        up = p%upper_ptr(i)
        p%diag(i) = 0.0_c_double
        do k = row_ptr(p%perm(i)), row_ptr(p%perm(i) + 1) - 1
            if (col_idx(k) > p%n) cycle                 ! an external column: not in A_ii
            j = iperm(col_idx(k))
            if (j == i) then
                p%diag(i) = val(k)
            else if (j < i) then
                call insert_sorted(p%lower_ptr(i), low, p%lower_col, p%lower_val, j, val(k))
            else
                call insert_sorted(p%upper_ptr(i), up, p%upper_col, p%upper_val, j, val(k))
            end if
        end do
    end do
end subroutine fill_split

! Splits P A_ii P^T and factors it; 0 or a negative status
integer(c_int) function factor_block(p, row_ptr, col_idx, val) result(status)
    type(precond_mpi), intent(inout) :: p
    integer(c_int), intent(in) :: row_ptr(p%n + 1), col_idx(*)
    real(c_double), intent(in) :: val(*)
    integer(c_int), allocatable :: iperm(:)
    integer(c_int) :: i, n, nl, nu
    integer :: alloc_stat

    n = p%n
    status = PRECOND_OUT_OF_MEMORY
    allocate(iperm(n), p%lower_ptr(n + 1), p%upper_ptr(n + 1), stat=alloc_stat)
    if (alloc_stat /= 0) return
    do i = 1, n
        iperm(p%perm(i)) = i
    end do
    call count_split(p, iperm, row_ptr, col_idx)
    nl = p%lower_ptr(n + 1) - 1
    nu = p%upper_ptr(n + 1) - 1
    allocate(p%diag(n), p%lower_col(nl), p%lower_val(nl), p%upper_col(nu), p%upper_val(nu), &
             p%fac_diag(n), p%inv_diag(n), p%fac_lower(nl), p%fac_upper(nu), stat=alloc_stat)
    if (alloc_stat /= 0) return
    call fill_split(p, iperm, row_ptr, col_idx, val)
    status = ic0_factor(n, p%lower_ptr, p%lower_col, p%lower_val, p%diag, p%fac_lower, &
                        p%fac_diag)
    if (status < 0) then                    ! the pivot of new row -status: old row perm(-status)
        status = PRECOND_BREAKDOWN - (p%perm(-status) - 1)
        return
    end if
    status = PRECOND_OUT_OF_MEMORY
    if (ic0_transpose(n, p%lower_ptr, p%lower_col, p%fac_lower, p%upper_ptr, p%fac_upper) /= 0) &
        return
    p%inv_diag = 1.0_c_double / p%fac_diag              ! the sweeps multiply by 1/d
    status = 0
end function factor_block

! ---- the application --------------------------------------------------------------------------

! z = M^-1 r for the internal rows (r: n internal entries; z: n_local entries, its external ones
! are overwritten by the halo exchanges of asdd-ic0). The halo arguments are those of
! halo_exchange (halo.f90), the buffers included. exchanges = exchanges + the halo exchanges made
! (K-1 for asdd-ic0, else 0; the master thread counts). Inside a parallel region every thread of
! the team calls it, with the same arguments (r and z complete: written before a barrier); z is
! complete on return.
! [precond_apply]
subroutine precond_apply(p, r, z, n_neighbours, neighbours, import_ptr, import_index, &
                         export_ptr, export_index, send_buf, recv_buf, comm, exchanges)
    type(precond_mpi), intent(inout) :: p
    real(c_double), intent(in) :: r(p%n)
    real(c_double), intent(inout) :: z(p%n_local)
    integer(c_int), intent(in) :: n_neighbours
    integer(c_int), intent(in) :: neighbours(n_neighbours)
    integer(c_int), intent(in) :: import_ptr(n_neighbours + 1), import_index(*)
    integer(c_int), intent(in) :: export_ptr(n_neighbours + 1), export_index(*)
    real(c_double), intent(inout), asynchronous :: send_buf(*), recv_buf(*)
    type(MPI_Comm), intent(in) :: comm
    integer(c_long), intent(inout) :: exchanges
    integer(c_int) :: i, sweep

    if (p%kind == PRECOND_DIAGONAL) then
        !$omp do schedule(static)
        do i = 1, p%n
            z(i) = p%dinv(i) * r(i)
        end do
        !$omp end do
        return
    end if
    call permute(p, r)                                  ! z = B r
    call block_solve(p)
    call unpermute(p, z)
    ! ASDD: each sweep corrects z by B applied to the residual of the whole local rows, whose
    ! external columns hold the neighbours' latest z: the ranks' blocks talk through the halo.
    do sweep = 2, p%sweeps
        ! z is complete: the implied barrier of the `omp do` that wrote it last
        !$omp master
        ! MPI_THREAD_FUNNELED: the master thread only
        call halo_exchange(n_neighbours, neighbours, import_ptr, import_index, export_ptr, &
                           export_index, z, send_buf, recv_buf, comm)
        exchanges = exchanges + 1
        !$omp end master
        !$omp barrier                                    ! every thread sees the received entries
        call permuted_residual(p, r, z)                 ! z = z + B (r - A z)
        call block_solve(p)
        call add_unpermuted(p, z)
    end do
end subroutine precond_apply
! [precond_apply]

! p%permuted = r in the new numbering: permuted(new) = r(perm(new))
subroutine permute(p, r)
    type(precond_mpi), intent(inout) :: p
    real(c_double), intent(in) :: r(p%n)
    integer(c_int) :: i

    !$omp do schedule(static)
    do i = 1, p%n
        p%permuted(i) = r(p%perm(i))
    end do
    !$omp end do
end subroutine permute

! p%solved = (the IC(0) of P A_ii P^T)^-1 p%permuted: the colored sweeps of 04_iccg
subroutine block_solve(p)
    type(precond_mpi), intent(inout) :: p

    call ic0_forward(p%n, p%ncolor, p%color_ptr, p%lower_ptr, p%lower_col, p%fac_lower, &
                     p%inv_diag, p%permuted, p%solved)
    call ic0_backward(p%n, p%ncolor, p%color_ptr, p%upper_ptr, p%upper_col, p%fac_upper, &
                      p%inv_diag, p%solved)
end subroutine block_solve

! z = p%solved in the original numbering: z(perm(new)) = solved(new)
subroutine unpermute(p, z)
    type(precond_mpi), intent(inout) :: p
    real(c_double), intent(inout) :: z(p%n)
    integer(c_int) :: i

    !$omp do schedule(static)
    do i = 1, p%n
        z(p%perm(i)) = p%solved(i)
    end do
    !$omp end do
end subroutine unpermute

! z = z + p%solved in the original numbering
subroutine add_unpermuted(p, z)
    type(precond_mpi), intent(inout) :: p
    real(c_double), intent(inout) :: z(p%n)
    integer(c_int) :: i

    !$omp do schedule(static)
    do i = 1, p%n
        z(p%perm(i)) = z(p%perm(i)) + p%solved(i)
    end do
    !$omp end do
end subroutine add_unpermuted

! p%permuted = t in the new numbering, t = r - A z on the internal rows over all local columns
! (z's external entries are current): row perm(new) of A for entry new
subroutine permuted_residual(p, r, z)
    type(precond_mpi), intent(inout) :: p
    real(c_double), intent(in) :: r(p%n), z(p%n_local)
    integer(c_int) :: i, k, old
    real(c_double) :: s

    !$omp do schedule(static) private(k, old, s)
    do i = 1, p%n
        old = p%perm(i)
        s = r(old)
        do k = p%row_ptr(old), p%row_ptr(old + 1) - 1
            s = s - p%val(k) * z(p%col_idx(k))
        end do
        p%permuted(i) = s
    end do
    !$omp end do
end subroutine permuted_residual

end module course_precond_mpi
