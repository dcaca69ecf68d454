! Lecture 05_halo: the local data of one rank, GeoFEM style (Fortran twin of
! src_c/05_halo/local_data.c and local_data.h; course/parallel/local.py, LocalData). fem3d_mpi_f builds it from PX x PY x PZ
! blocks or reads it from the file PREFIX.RANK that
!   python -m course partition ... --out PREFIX
! writes for any partition (the format: FILE_FORMAT in course/parallel/local.py; text, one group of
! values per line, blocks of numbers 10 to a line, every local index and offset 0-based in the
! file).
!
! Local numbering: the n_internal internal (owned) nodes first, then the external ones grouped by
! owner; the import and export tables are those of halo.f90. Here local indices and offsets are
! 1-based (the reader adds 1); global node and element numbers and ranks count from 0, as in the
! file.
!
! A bad file gives one line naming the file and the line, never a crash: every count is checked
! (against the mesh, or the file's own totals) before anything is allocated for it, every index
! against its range before it is used. The reader never stops the program: every rank reads its
! own file, so the ranks must first agree on which of them reports (the program does that).
module course_local_data
    use, intrinsic :: iso_c_binding, only: c_int, c_double
    use, intrinsic :: iso_fortran_env, only: int64
    use mpi_f08, only: MPI_Comm, MPI_Allreduce, MPI_Alltoall, MPI_INTEGER, MPI_MAX
    use course_input, only: read_line, parse_int, parse_real, max_line
    use course_halo, only: halo_exchange
    use course_cformat, only: c_d, c_g
    implicit none
    private
    public :: local_data, read_local_data, check_local_tables, check_local_halo
    public :: LOCAL_OK, LOCAL_NO_MEMORY, LOCAL_BAD

    integer, parameter :: dp = c_double
    character(len=*), parameter :: MAGIC = '# course local data (05_halo)'   ! the first line
    integer, parameter :: PER_LINE = 10           ! a block of numbers: 10 to a line
    integer, parameter :: MAX_WORD = 63           ! a longer word is cut (as in C)
    character(len=*), parameter :: BLANKS = ' ' // achar(9) // achar(13) // achar(10)
    ! the corners of an element (i, j, k): the bottom face counter-clockwise, then the top face
    integer, parameter :: CORNER(3, 8) = reshape([0, 0, 0, 1, 0, 0, 1, 1, 0, 0, 1, 0, &
                                                  0, 0, 1, 1, 0, 1, 1, 1, 1, 0, 1, 1], [3, 8])

    ! what the functions below return: 0, or the program's exit status for the failure
    integer, parameter :: LOCAL_OK = 0, LOCAL_NO_MEMORY = 1, LOCAL_BAD = 2

    type :: local_data
        integer :: rank = 0, size = 0               ! this rank, and the ranks of the partition
        integer(c_int) :: n_internal = 0, n_local = 0, n_elem = 0, n_neighbours = 0
        integer(c_int), allocatable :: global_ids(:)    ! n_local: global node number of each
        integer(c_int), allocatable :: element_ids(:)   ! n_elem: global element number of each
        integer(c_int), allocatable :: elements(:, :)   ! (8, n_elem): LOCAL corners, fem3d's order
        integer(c_int), allocatable :: neighbours(:)    ! n_neighbours ranks, ascending
        integer(c_int), allocatable :: import_ptr(:), import_index(:), export_ptr(:), &
                                       export_index(:)  ! halo.f90
    end type local_data

    ! a line reader that keeps its first failure: after it every read does nothing
    type :: reader
        integer :: unit = -1
        character(len=:), allocatable :: path
        integer :: line = 0                  ! the number of the line read last
        integer :: status = LOCAL_OK
        character(len=:), allocatable :: message
        character(len=:), allocatable :: buf ! the line read last
        integer :: pos = 1                   ! where the rest of it starts
    end type reader

contains

! --- a line reader that keeps its first failure ------------------------------------------------

logical function read_ok(r)
    type(reader), intent(in) :: r

    read_ok = r%status == LOCAL_OK
end function read_ok

! records the first failure as "PATH:LINE: what"
subroutine fail(r, status, what)
    type(reader), intent(inout) :: r
    integer, intent(in) :: status
    character(len=*), intent(in) :: what

    if (.not. read_ok(r)) return
    r%status = status
    r%message = r%path // ':' // c_d(r%line) // ': ' // what
end subroutine fail

! count integers into values (allocated, zeroed), or a failure; nothing after a failure
subroutine alloc_ints(r, values, count)
    type(reader), intent(inout) :: r
    integer(c_int), allocatable, intent(inout) :: values(:)
    integer, intent(in) :: count
    integer :: stat

    if (.not. read_ok(r)) return
    allocate(values(max(count, 0)), source=0, stat=stat)
    if (stat /= 0) call fail(r, LOCAL_NO_MEMORY, 'out of memory for ' // c_d(count) // ' numbers')
end subroutine alloc_ints

! the next line into r%buf; .false. (and a failure, unless one came before) if there is none
logical function next_line(r, what)
    type(reader), intent(inout) :: r
    character(len=*), intent(in) :: what
    integer :: ios

    next_line = .false.
    if (.not. read_ok(r)) return
    r%line = r%line + 1
    call read_line(r%unit, r%buf, ios, max_line)
    r%pos = 1
    if (ios /= 0) then
        call fail(r, LOCAL_BAD, 'the file ends; expected ' // what)
    else if (len(r%buf) > max_line) then
        call fail(r, LOCAL_BAD, 'line longer than ' // c_d(max_line) // ' characters')
    end if
    next_line = read_ok(r)
end function next_line

! the next word of the line (blanks, tabs and line ends separate words; cut to MAX_WORD
! characters); .false. if there is none
logical function next_word(r, word)
    type(reader), intent(inout) :: r
    character(len=:), allocatable, intent(out) :: word
    integer :: first, last

    first = r%pos
    do while (first <= len(r%buf))
        if (index(BLANKS, r%buf(first:first)) == 0) exit
        first = first + 1
    end do
    last = first - 1
    do while (last < len(r%buf))
        if (index(BLANKS, r%buf(last + 1:last + 1)) > 0) exit
        last = last + 1
    end do
    next_word = last >= first
    word = r%buf(first:min(last, first + MAX_WORD - 1))
    r%pos = last + 1
end function next_word

! value k (from 0) of the `count` on the current line: an integer into iv(1), or (iv empty) a
! real into dv(1) (Fortran's exponent letter d is not C's)
logical function next_value(r, k, count, what, iv, dv)
    type(reader), intent(inout) :: r
    integer, intent(in) :: k, count
    character(len=*), intent(in) :: what
    integer, intent(out) :: iv(:)
    real(dp), intent(out) :: dv(:)
    character(len=:), allocatable :: word

    if (.not. next_word(r, word)) then
        call fail(r, LOCAL_BAD, 'expected ' // c_d(count) // ' number(s) (' // what // &
                                '), found ' // c_d(k))
    else if (size(iv) > 0) then
        if (.not. parse_int(word, iv(1))) &
            call fail(r, LOCAL_BAD, 'expected an integer (' // what // "), got '" // word // "'")
    else if (scan(word, 'dD') > 0) then
        call fail(r, LOCAL_BAD, 'expected a number (' // what // "), got '" // word // "'")
    else if (.not. parse_real(word, dv(1))) then
        call fail(r, LOCAL_BAD, 'expected a number (' // what // "), got '" // word // "'")
    end if
    next_value = read_ok(r)
end function next_value

! size(values) integers from the next line; `exact`: nothing may follow them, else the rest of the
! line is a comment (as after "1 3    RANK SIZE")
subroutine read_ints(r, values, exact, what)
    type(reader), intent(inout) :: r
    integer(c_int), intent(inout) :: values(:)
    logical, intent(in) :: exact
    character(len=*), intent(in) :: what
    character(len=:), allocatable :: word
    real(dp) :: unused(0)
    integer :: k

    if (.not. next_line(r, what)) return
    do k = 1, size(values)
        if (.not. next_value(r, k - 1, size(values), what, values(k:k), unused)) return
    end do
    if (exact) then
        if (next_word(r, word)) call fail(r, LOCAL_BAD, 'expected ' // c_d(size(values)) // &
                                             ' number(s) (' // what // '), found more')
    end if
end subroutine read_ints

! every value in low .. high-1
subroutine check_range(r, values, low, high, what)
    type(reader), intent(inout) :: r
    integer(c_int), intent(in) :: values(:)
    integer, intent(in) :: low, high
    character(len=*), intent(in) :: what
    integer :: k

    do k = 1, size(values)
        if (.not. read_ok(r)) return
        if (values(k) < low .or. values(k) >= high) &
            call fail(r, LOCAL_BAD, what // ': ' // c_d(values(k)) // ' is outside ' // &
                                    c_d(low) // ' .. ' // c_d(high - 1))
    end do
end subroutine check_range

! size(values) integers in low .. high-1, PER_LINE to a line (no line at all when there are none)
subroutine read_block(r, values, low, high, what)
    type(reader), intent(inout) :: r
    integer(c_int), intent(inout) :: values(:)
    integer, intent(in) :: low, high
    character(len=*), intent(in) :: what
    integer :: first, last

    do first = 1, size(values), PER_LINE
        if (.not. read_ok(r)) return
        last = min(first + PER_LINE - 1, size(values))
        call read_ints(r, values(first:last), .true., what)
        if (read_ok(r)) call check_range(r, values(first:last), low, high, what)
    end do
end subroutine read_block

! --- the groups of the file ------------------------------------------------------------------

logical function same_real(a, b)
    real(dp), intent(in) :: a, b

    same_real = abs(a - b) <= 1.0e-12_dp * max(abs(a), abs(b))
end function same_real

! the first line; RANK SIZE; NX NY NZ DX DY DZ, which must be the input's
subroutine read_header(r, nel, h, d)
    type(reader), intent(inout) :: r
    integer, intent(in) :: nel(3)
    real(dp), intent(in) :: h(3)
    type(local_data), intent(in) :: d
    character(len=*), parameter :: WHAT = 'NX NY NZ DX DY DZ'
    integer(c_int) :: rank_size(2)
    integer :: file_nel(3), k, none(0), ios
    real(dp) :: file_h(3), unused(0)

    r%line = 1                            ! an empty file is not a local data file either
    call read_line(r%unit, r%buf, ios, max_line)
    if (ios /= 0) r%buf = ''
    r%buf = r%buf(:scan(r%buf // achar(13), achar(13)) - 1)         ! without a CR at its end
    if (len(r%buf) /= len(MAGIC) .or. r%buf /= MAGIC) &
        call fail(r, LOCAL_BAD, "not a local data file (the first line must be '" // MAGIC // "')")
    call read_ints(r, rank_size, .false., 'RANK SIZE')
    if (read_ok(r) .and. (rank_size(1) /= d%rank .or. rank_size(2) /= d%size)) &
        call fail(r, LOCAL_BAD, 'RANK SIZE = ' // c_d(rank_size(1)) // ' ' // &
                                c_d(rank_size(2)) // ', but this is rank ' // c_d(d%rank) // &
                                ' of ' // c_d(d%size))

    if (.not. next_line(r, WHAT)) return
    do k = 1, 3
        if (.not. next_value(r, k - 1, 6, WHAT, file_nel(k:k), unused)) return
    end do
    do k = 1, 3
        if (.not. next_value(r, k + 2, 6, WHAT, none, file_h(k:k))) return
    end do
    if (any(file_nel /= nel)) &
        call fail(r, LOCAL_BAD, 'the mesh ' // three(file_nel) // ' does not match the ' // &
                                "input's NX NY NZ = " // three(nel))
    do k = 1, 3
        if (.not. same_real(file_h(k), h(k))) &
            call fail(r, LOCAL_BAD, 'the element size ' // three_reals(file_h) // ' does not ' // &
                                    "match the input's DX DY DZ = " // three_reals(h))
    end do
end subroutine read_header

function three(v) result(text)
    integer, intent(in) :: v(3)
    character(len=:), allocatable :: text

    text = c_d(v(1)) // ' ' // c_d(v(2)) // ' ' // c_d(v(3))
end function three

function three_reals(v) result(text)                ! like "%.15g %.15g %.15g"
    real(dp), intent(in) :: v(3)
    character(len=:), allocatable :: text

    text = c_g(v(1), 15) // ' ' // c_g(v(2), 15) // ' ' // c_g(v(3), 15)
end function three_reals

! N_INTERNAL N_EXTERNAL and the global numbers of the local nodes
subroutine read_nodes(r, nel, d)
    type(reader), intent(inout) :: r
    integer, intent(in) :: nel(3)
    type(local_data), intent(inout) :: d
    integer(c_int) :: counts(2)
    integer(int64) :: n_node, n_local

    n_node = product(int(nel, int64) + 1)
    call read_ints(r, counts, .false., 'N_INTERNAL N_EXTERNAL')
    if (read_ok(r) .and. (counts(1) < 1 .or. counts(2) < 0)) &
        call fail(r, LOCAL_BAD, 'N_INTERNAL must be positive and N_EXTERNAL not negative, got ' // &
                                c_d(counts(1)) // ' ' // c_d(counts(2)))
    n_local = int(counts(1), int64) + counts(2)
    if (read_ok(r) .and. n_local > n_node) &
        call fail(r, LOCAL_BAD, 'N_INTERNAL + N_EXTERNAL = ' // c_d(n_local) // ' local ' // &
                                'nodes, more than the ' // c_d(n_node) // ' nodes of the mesh')
    if (.not. read_ok(r)) return
    d%n_internal = counts(1)
    d%n_local = counts(1) + counts(2)
    call alloc_ints(r, d%global_ids, d%n_local)
    if (read_ok(r)) call read_block(r, d%global_ids, 0, int(n_node), 'global node numbers')
end subroutine read_nodes

! The corners of local element e (0-based corners still) must be the nodes of its global element
! (so that the element data agree with the node data: coordinates, fixed nodes, flux faces all
! come from global numbers).
subroutine check_corners(r, nel, d, e)
    type(reader), intent(inout) :: r
    integer, intent(in) :: nel(3), e
    type(local_data), intent(in) :: d
    integer :: id, i(3), c(3), a, local
    integer(int64) :: node

    id = d%element_ids(e)
    i = [mod(id, nel(1)), mod(id / nel(1), nel(2)), id / nel(1) / nel(2)]
    do a = 1, 8
        if (.not. read_ok(r)) return
        c = i + CORNER(:, a)
        local = d%elements(a, e)
        node = c(1) + (nel(1) + 1_int64) * (c(2) + (nel(2) + 1_int64) * c(3))
        if (d%global_ids(local + 1) /= node) &
            call fail(r, LOCAL_BAD, 'element ' // c_d(id) // ': corner ' // c_d(a - 1) // &
                                    ' is local node ' // c_d(local) // ' = global node ' // &
                                    c_d(d%global_ids(local + 1)) // ', but should be global ' // &
                                    'node ' // c_d(node))
    end do
end subroutine check_corners

! N_ELEMENTS, their global numbers and their local corners
subroutine read_elements(r, nel, d)
    type(reader), intent(inout) :: r
    integer, intent(in) :: nel(3)
    type(local_data), intent(inout) :: d
    integer(c_int) :: n_elem(1)
    integer :: n_mesh, e, stat

    n_mesh = int(product(int(nel, int64)))      ! fits: the input reader limits the mesh
    call read_ints(r, n_elem, .false., 'N_ELEMENTS')
    if (read_ok(r) .and. (n_elem(1) < 0 .or. n_elem(1) > n_mesh)) &
        call fail(r, LOCAL_BAD, 'N_ELEMENTS = ' // c_d(n_elem(1)) // ' is outside 0 .. ' // &
                                c_d(n_mesh) // ' (the elements of the mesh)')
    if (.not. read_ok(r)) return
    d%n_elem = n_elem(1)
    call alloc_ints(r, d%element_ids, d%n_elem)
    if (.not. read_ok(r)) return
    allocate(d%elements(8, d%n_elem), source=0, stat=stat)
    if (stat /= 0) call fail(r, LOCAL_NO_MEMORY, 'out of memory for ' // c_d(8 * d%n_elem) // &
                                                 ' numbers')
    if (read_ok(r)) call read_block(r, d%element_ids, 0, n_mesh, 'global element numbers')
    do e = 1, d%n_elem
        if (.not. read_ok(r)) return
        call read_ints(r, d%elements(:, e), .true., 'the 8 local corners of an element')
        if (read_ok(r)) call check_range(r, d%elements(:, e), 0, d%n_local, 'local corners')
        if (read_ok(r)) call check_corners(r, nel, d, e)
    end do
end subroutine read_elements

! n_nb + 1 offsets: from 0, never decreasing, at most max_count for one neighbour
subroutine read_offsets(r, ptr, max_count, max_name, what)
    type(reader), intent(inout) :: r
    integer(c_int), intent(inout) :: ptr(:)
    integer, intent(in) :: max_count
    character(len=*), intent(in) :: max_name, what
    integer :: m

    call read_block(r, ptr, 0, huge(1), what)
    if (read_ok(r) .and. ptr(1) /= 0) &
        call fail(r, LOCAL_BAD, what // ' must start at 0 and never decrease')
    do m = 1, size(ptr) - 1
        if (.not. read_ok(r)) return
        if (ptr(m + 1) < ptr(m)) then
            call fail(r, LOCAL_BAD, what // ' must start at 0 and never decrease')
        else if (ptr(m + 1) - ptr(m) > max_count) then
            call fail(r, LOCAL_BAD, what // ': ' // c_d(ptr(m + 1) - ptr(m)) // ' nodes for ' // &
                                    'one neighbour, more than ' // max_name // ' = ' // &
                                    c_d(max_count))
        end if
    end do
end subroutine read_offsets

! import_ptr (ending at N_EXTERNAL) and import_index, which the format fixes (as read_local in
! course/parallel/local.py): the external nodes in their order, N_INTERNAL .. N_LOCAL-1
subroutine read_imports(r, d)
    type(reader), intent(inout) :: r
    type(local_data), intent(inout) :: d
    integer :: n_nb, n_external, first, last, k

    n_nb = d%n_neighbours
    n_external = d%n_local - d%n_internal
    call read_offsets(r, d%import_ptr, n_external, 'N_EXTERNAL', 'import_ptr')
    if (read_ok(r) .and. d%import_ptr(n_nb + 1) /= n_external) &
        call fail(r, LOCAL_BAD, 'import_ptr ends at ' // c_d(d%import_ptr(n_nb + 1)) // &
                                ', but N_EXTERNAL = ' // c_d(n_external))
    call alloc_ints(r, d%import_index, n_external)
    do first = 1, n_external, PER_LINE                  ! line by line: errors name their line
        if (.not. read_ok(r)) exit
        last = min(first + PER_LINE - 1, n_external)
        call read_block(r, d%import_index(first:last), d%n_internal, d%n_local, 'import_index')
        do k = first, last
            if (.not. read_ok(r)) exit
            if (d%import_index(k) /= d%n_internal + k - 1) &
                call fail(r, LOCAL_BAD, 'import_index must list the external nodes in order: ' &
                                        // 'N_INTERNAL .. N_LOCAL-1')
        end do
    end do
end subroutine read_imports

! N_NEIGHBOURS, the neighbour ranks, the import and the export table
subroutine read_tables(r, d)
    type(reader), intent(inout) :: r
    type(local_data), intent(inout) :: d
    integer(c_int) :: n_nb(1)
    integer :: m

    call read_ints(r, n_nb, .false., 'N_NEIGHBOURS')
    if (read_ok(r) .and. (n_nb(1) < 0 .or. n_nb(1) >= d%size)) &
        call fail(r, LOCAL_BAD, 'N_NEIGHBOURS = ' // c_d(n_nb(1)) // ' is outside 0 .. ' // &
                                c_d(d%size - 1) // ' (SIZE - 1)')
    if (.not. read_ok(r)) return
    d%n_neighbours = n_nb(1)
    call alloc_ints(r, d%neighbours, d%n_neighbours)
    call alloc_ints(r, d%import_ptr, d%n_neighbours + 1)
    call alloc_ints(r, d%export_ptr, d%n_neighbours + 1)
    if (.not. read_ok(r)) return
    call read_block(r, d%neighbours, 0, d%size, 'neighbour ranks')
    do m = 1, d%n_neighbours
        if (.not. read_ok(r)) return
        if (d%neighbours(m) == d%rank .or. m > 1 .and. &
            d%neighbours(m) <= d%neighbours(max(m - 1, 1))) &
            call fail(r, LOCAL_BAD, 'the neighbour ranks must be ascending and other than ' // &
                                    'RANK = ' // c_d(d%rank))
    end do
    call read_imports(r, d)
    if (.not. read_ok(r)) return
    call read_offsets(r, d%export_ptr, d%n_internal, 'N_INTERNAL', 'export_ptr')
    if (.not. read_ok(r)) return
    call alloc_ints(r, d%export_index, d%export_ptr(d%n_neighbours + 1))
    if (read_ok(r)) &
        call read_block(r, d%export_index, 0, d%n_internal, 'export_index')
end subroutine read_tables

! [read_local_data]
! Reads the local data file `path` of rank `rank` of `n_ranks` into d and checks it against the
! mesh of the input (nel elements of size h along x, y, z): the groups of the file in their order
! (course/parallel/local.py, FILE_FORMAT), each checked as it comes; after the first failure
! nothing more is read or allocated. Returns LOCAL_OK, or LOCAL_BAD or LOCAL_NO_MEMORY with a
! one-line message ("PATH:LINE: what was expected").
function read_local_data(path, nel, h, rank, n_ranks, d, message) result(status)
    character(len=*), intent(in) :: path
    integer, intent(in) :: nel(3), rank, n_ranks
    real(dp), intent(in) :: h(3)
    type(local_data), intent(out) :: d
    character(len=:), allocatable, intent(out) :: message
    integer :: status
    type(reader) :: r
    character(len=512) :: msg
    integer :: ios, k

    open(newunit=r%unit, file=path, status='old', action='read', iostat=ios, iomsg=msg)
    if (ios /= 0) then
        ! gfortran's message reads "Cannot open file 'PATH': REASON"; only REASON, like strerror
        message = trim(msg)
        k = index(message, "': ", back=.true.)
        if (k > 0) message = message(k + 3:)
        message = path // ': cannot open local data file: ' // message
        status = LOCAL_BAD
        return
    end if
    r%path = path
    d%rank = rank
    d%size = n_ranks
    call read_header(r, nel, h, d)
    if (read_ok(r)) call read_nodes(r, nel, d)
    if (read_ok(r)) call read_elements(r, nel, d)
    if (read_ok(r)) call read_tables(r, d)
    close(r%unit)
    status = r%status
    if (status /= LOCAL_OK) then
        message = r%message
        return
    end if
    message = ''
    d%elements = d%elements + 1                     ! from here on 1-based
    d%import_ptr = d%import_ptr + 1
    d%import_index = d%import_index + 1
    d%export_ptr = d%export_ptr + 1
    d%export_index = d%export_index + 1
end function read_local_data
! [read_local_data]

! --- do the ranks' tables fit together? --------------------------------------------------------

! [check_local_tables]
! Collective: the tables of all ranks fit together, so that the halo exchange can neither hang nor
! truncate a message (q is a neighbour of r exactly when r is a neighbour of q, and r imports from
! q as many values as q exports to r). Every rank sends every other one what it will send it per
! exchange (1 + the count for a neighbour, 0 otherwise) and compares with what it expects to
! receive from it. `name` names d in the message. Returns LOCAL_OK, or this rank's status and
! message (LOCAL_BAD if it found a mismatch).
function check_local_tables(d, name, comm, message) result(status)
    type(local_data), intent(in) :: d
    character(len=*), intent(in) :: name
    type(MPI_Comm), intent(in) :: comm
    character(len=:), allocatable, intent(out) :: message
    integer :: status
    character(len=*), parameter :: MISFIT = ' (the local data files do not fit together)'
    integer, allocatable :: sends(:), theirs(:)
    integer :: stat, worst, m, q, imports
    logical :: listed

    message = ''
    allocate(sends(0:d%size - 1), theirs(0:d%size - 1), source=0, stat=stat)
    call MPI_Allreduce(stat, worst, 1, MPI_INTEGER, MPI_MAX, comm)  ! all take part, or none
    if (worst /= 0) then
        message = name // ': out of memory'
        status = merge(LOCAL_NO_MEMORY, LOCAL_OK, stat /= 0)
        return
    end if
    do m = 1, d%n_neighbours
        sends(d%neighbours(m)) = 1 + d%export_ptr(m + 1) - d%export_ptr(m)
    end do
    call MPI_Alltoall(sends, 1, MPI_INTEGER, theirs, 1, MPI_INTEGER, comm)
    status = LOCAL_OK
    m = 1
    do q = 0, d%size - 1
        listed = .false.
        if (m <= d%n_neighbours) listed = d%neighbours(m) == q
        imports = 0
        if (listed) then
            imports = d%import_ptr(m + 1) - d%import_ptr(m)
            m = m + 1
        end if
        status = LOCAL_BAD
        if (listed .and. theirs(q) == 0) then
            message = name // ': rank ' // c_d(q) // ' is a neighbour here, but rank ' // &
                      c_d(q) // ' does not list rank ' // c_d(d%rank) // MISFIT
        else if (.not. listed .and. theirs(q) > 0) then
            message = name // ': rank ' // c_d(q) // ' lists rank ' // c_d(d%rank) // &
                      ' as a neighbour, but it is not one here' // MISFIT
        else if (listed .and. theirs(q) - 1 /= imports) then
            message = name // ': rank ' // c_d(d%rank) // ' imports ' // c_d(imports) // &
                      ' node(s) from rank ' // c_d(q) // ', which exports ' // &
                      c_d(theirs(q) - 1) // ' to it' // MISFIT
        else
            status = LOCAL_OK
        end if
        if (status /= LOCAL_OK) return
    end do
end function check_local_tables
! [check_local_tables]

! the neighbour whose import range holds import k
integer function owner_of_import(d, k)
    type(local_data), intent(in) :: d
    integer, intent(in) :: k
    integer :: m

    m = 1
    do while (m < d%n_neighbours)
        if (d%import_ptr(m + 1) > k) exit
        m = m + 1
    end do
    owner_of_import = d%neighbours(m)
end function owner_of_import

! Collective, after check_local_tables: one halo exchange of the global node numbers, which must
! arrive where import_index puts them (x, send_buf and recv_buf: the work arrays of the exchange,
! n_local, export and import entries). Returns LOCAL_OK, or LOCAL_BAD with a message.
function check_local_halo(d, x, send_buf, recv_buf, name, comm, message) result(status)
    type(local_data), intent(in) :: d
    real(dp), intent(out) :: x(d%n_local)
    real(dp), intent(inout), asynchronous :: send_buf(*), recv_buf(*)
    character(len=*), intent(in) :: name
    type(MPI_Comm), intent(in) :: comm
    character(len=:), allocatable, intent(out) :: message
    integer :: status
    integer :: a, k

    do a = 1, d%n_local
        x(a) = merge(real(d%global_ids(a), dp), -1.0_dp, a <= d%n_internal)
    end do
    call halo_exchange(d%n_neighbours, d%neighbours, d%import_ptr, d%import_index, d%export_ptr, &
                       d%export_index, x, send_buf, recv_buf, comm)
    message = ''
    status = LOCAL_OK
    do k = 1, d%n_local - d%n_internal
        a = d%import_index(k)
        if (nint(x(a), int64) /= d%global_ids(a)) then      ! whole numbers, or -1
            message = name // ': local node ' // c_d(a - 1) // ' is global node ' // &
                      c_d(d%global_ids(a)) // ', but rank ' // c_d(owner_of_import(d, k)) // &
                      ' sends global node ' // c_d(nint(x(a), int64)) // ' for it' // &
                      ' (the local data files do not fit together)'
            status = LOCAL_BAD
            return
        end if
    end do
end function check_local_halo

end module course_local_data
